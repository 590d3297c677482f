// forward: y = x in `shape`, row-major order kept        x.shape -> shape (same count)
// VJP:     grad_x = reshape(grad_out, x.shape)
// saves:   the target shape.
#include <xgrad/ops/reshape.hpp>

#include <algorithm>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

class ReshapeOp final : public AttrOp<ReshapeOp, Shape> {
 public:
  static constexpr const char* key = "shape";
  using AttrOp::AttrOp;

  std::string name() const override { return "reshape"; }
  // ONNX: Reshape to the shape, a 0 in it meaning 0 (allowzero).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Reshape", {n.inputs[0], e.int64s(onnx_dims(m_value))}, {{"allowzero", std::int64_t{1}}})};
  }
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
    if (!bounded_size(m_value) || shape_size(m_value) != shape_size(x[0])) {
      throw error("x " + shape_str(x[0]) + " has " + std::to_string(shape_size(x[0])) + " elements, " + shape_str(m_value) +
                  " holds " + (bounded_size(m_value) ? std::to_string(shape_size(m_value)) : std::string("too many")));
    }
    return m_value;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    if (x[0]->data() != y.data()) std::copy(x[0]->data(), x[0]->data() + x[0]->size(), y.data());
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {reshape(v.grad_out, shape_of(v.x[0]))};
  }
};

}  // namespace

template <class T>
Var<T> reshape(const Var<T>& x, const Shape& shape) {
  return x.graph().apply(std::make_shared<ReshapeOp>(shape), {x});
}

std::shared_ptr<const Op> make_reshape_op(const JsonCursor& attrs) { return ReshapeOp::from_attrs(attrs); }

template Var<float> reshape(const Var<float>&, const Shape&);
template Var<double> reshape(const Var<double>&, const Shape&);

}  // namespace xgrad
