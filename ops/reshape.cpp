// forward: y = x in `shape`, row-major order kept        x.shape -> shape (same count)
// VJP:     grad_x = reshape(grad_out, x.shape)
// saves:   the target shape.
#include <xgrad/ops/reshape.hpp>

#include <algorithm>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_shape = "shape";

class ReshapeOp final : public OpFor<ReshapeOp> {
 public:
  explicit ReshapeOp(Shape shape) : m_shape(std::move(shape)) {}

  std::string name() const override { return "reshape"; }
  // ONNX: Reshape to the shape, a 0 in it meaning 0 (allowzero).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Reshape", {n.inputs[0], e.int64s(onnx_dims(m_shape))}, {{"allowzero", std::int64_t{1}}})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_shape, m_shape}}; }
  // Over its input, a lean replay's reshape copies nothing.
  bool overwrites_input(std::size_t) const override { return true; }
  // A lean replay's view: x's elements in order, read in the new shape; none of a view whose
  // elements are not in order (a permuted one).
  std::optional<View> view_of(const View& x, const Shape& y) const override {
    if (!x.is_contiguous()) return std::nullopt;
    View v = View::contiguous(y);
    v.offset = x.offset;
    return v;
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!bounded_size(m_shape) || shape_size(m_shape) != shape_size(x[0])) {
      throw error("x " + shape_str(x[0]) + " has " + std::to_string(shape_size(x[0])) + " elements, " + shape_str(m_shape) +
                  " holds " + (bounded_size(m_shape) ? std::to_string(shape_size(m_shape)) : std::string("too many")));
    }
    return m_shape;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    if (x[0]->data() != y.data()) std::copy(x[0]->data(), x[0]->data() + x[0]->size(), y.data());
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const auto& s = v.x[0].value().shape();
    return {reshape(v.grad_out, Shape(s.begin(), s.end()))};
  }

 private:
  Shape m_shape;
};

}  // namespace

template <class T>
Var<T> reshape(const Var<T>& x, const Shape& shape) {
  return x.graph().apply(std::make_shared<ReshapeOp>(shape), {x});
}

std::shared_ptr<const Op> make_reshape_op(const JsonCursor& attrs) {
  attrs.check_object({key_shape});
  return std::make_shared<ReshapeOp>(attrs[key_shape].shape());
}

template Var<float> reshape(const Var<float>&, const Shape&);
template Var<double> reshape(const Var<double>&, const Shape&);

}  // namespace xgrad
