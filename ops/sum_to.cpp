// forward: y = sum of x over the broadcast axes          x.shape -> shape
// VJP:     grad_x = broadcast_to(grad_out, x.shape)       shape -> x.shape
// saves:   the target shape.
#include <xgrad/ops/sum_to.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_shape = "shape";

class SumToOp final : public OpFor<SumToOp> {
 public:
  explicit SumToOp(Shape shape) : m_shape(std::move(shape)) {}

  std::string name() const override { return "sum_to"; }
  // ONNX: ReduceSum (keepdims) over the leading axes x has beyond the target and the axes where
  // the target has 1, then Reshape to the target.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const Shape& x = n.input_shapes[0];
    const std::size_t extra = x.size() - m_shape.size();
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i < extra || (m_shape[i - extra] == 1 && x[i] != 1)) axes.push_back(static_cast<std::int64_t>(i));
    }
    std::string y = n.inputs[0];
    if (!axes.empty()) y = e.op("ReduceSum", {y, e.int64s(axes)}, {{"keepdims", std::int64_t{1}}});
    return {e.op("Reshape", {y, e.int64s(onnx_dims(m_shape))}, {{"allowzero", std::int64_t{1}}})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_shape, m_shape}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!detail::broadcastable(m_shape, x[0])) {
      throw error("cannot sum x " + shape_str(x[0]) + " to " + shape_str(m_shape) +
                  ": the target does not broadcast to x");
    }
    // Larger than x only where x has an axis of 0 that the target has as 1.
    detail::check_elements(m_shape, [&] { return "summing x " + shape_str(x[0]) + " to " + shape_str(m_shape); });
    return m_shape;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& a = *x[0];
    const std::size_t lead = a.dimension() - m_shape.size();
    std::vector<std::size_t> axes;
    for (std::size_t i = 0; i < a.dimension(); ++i) {
      if (i < lead || (m_shape[i - lead] == 1 && a.shape()[i] != 1)) axes.push_back(i);
    }
    detail::sum_axes(a, axes, T(1), y);
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const auto& s = v.x[0].value().shape();
    return {broadcast_to(v.grad_out, Shape(s.begin(), s.end()))};
  }

 private:
  Shape m_shape;
};

}  // namespace

template <class T>
Var<T> sum_to(const Var<T>& x, const Shape& shape) {
  return x.graph().apply(std::make_shared<SumToOp>(shape), {x});
}

std::shared_ptr<const Op> make_sum_to_op(const JsonCursor& attrs) {
  attrs.check_object({key_shape});
  return std::make_shared<SumToOp>(attrs[key_shape].shape());
}

template Var<float> sum_to(const Var<float>&, const Shape&);
template Var<double> sum_to(const Var<double>&, const Shape&);

}  // namespace xgrad
