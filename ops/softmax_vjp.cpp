// forward: z = y * (g - s),  s = sum(g * y) along axis          (y, g same shape) -> same shape
// VJP:     grad_g = softmax_vjp(y, u)                            u = grad_out of z
//          grad_y = u * (g - s) - g * t,  t = sum(u * y) along axis
// saves:   nothing beyond its inputs y and g.
#include <xgrad/ops/softmax_vjp.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace detail {

template <class T>
void softmax_vjp_row(const T* y, const T* g, T* z, std::size_t n, std::size_t stride) {
  row_softmax_vjp(y, g, row_dot(g, y, n, stride), z, n, stride);
}

template void softmax_vjp_row(const float*, const float*, float*, std::size_t, std::size_t);
template void softmax_vjp_row(const double*, const double*, double*, std::size_t, std::size_t);

}  // namespace detail

namespace {

class SoftmaxVjpOp final : public AttrOp<SoftmaxVjpOp, long, 2> {
 public:
  static constexpr const char* key = "axis";
  using AttrOp::AttrOp;

  std::string name() const override { return "softmax_vjp"; }
  // ONNX: y * (grad_out - ReduceSum(grad_out * y, axis, keepdims)).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::int64_t axis = onnx_axis(m_value, n.input_shapes[0].size());
    const std::string& y = n.inputs[0];
    const std::string& g = n.inputs[1];
    const std::string dot = e.op("ReduceSum", {e.op("Mul", {g, y}), e.int64s({axis})}, {{"keepdims", std::int64_t{1}}});
    return {e.op("Mul", {y, e.op("Sub", {g, dot})})};
  }
  bool overwrites_input(std::size_t) const override { return true; }  // the row dot is taken first
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return detail::row_pass_work(Op::work(x, y), x[0], m_value);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0] != x[1]) {
      throw error("y and grad_out differ in shape: y is " + shape_str(x[0]) + ", grad_out is " +
                  shape_str(x[1]));
    }
    detail::normalize_axis(m_value, x[0]);
    return x[0];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& z) const {
    const T* y = x[0]->data();
    const T* g = x[1]->data();
    T* dst = z.data();
    detail::parallel_for_each_row(shape_of(z), m_value,
                                  [&](std::size_t offset, std::size_t n, std::size_t stride) {
                                    detail::softmax_vjp_row(y + offset, g + offset, dst + offset, n, stride);
                                  });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& y = v.x[0];
    const Var<T>& g = v.x[1];
    const Var<T>& u = v.grad_out;
    Var<T> grad_y, grad_g;
    if (v.wanted[0]) {
      const Shape shape(y.value().shape().begin(), y.value().shape().end());
      Shape row_shape = shape;  // the sums keep the axis with length 1
      row_shape[detail::normalize_axis(m_value, shape)] = 1;
      const auto row_dot = [&](const Var<T>& a, const Var<T>& b) {
        return broadcast_to(sum_to(mul(a, b), row_shape), shape);
      };
      grad_y = add(mul(u, add(g, scale(row_dot(g, y), -1.0))), scale(mul(g, row_dot(u, y)), -1.0));
    }
    if (v.wanted[1]) grad_g = softmax_vjp(y, u, m_value);
    return {grad_y, grad_g};
  }
};

}  // namespace

template <class T>
Var<T> softmax_vjp(const Var<T>& y, const Var<T>& grad_out, long axis) {
  return y.graph().apply(std::make_shared<SoftmaxVjpOp>(axis), {y, grad_out});
}

bool is_softmax_vjp(const Op& op) { return dynamic_cast<const SoftmaxVjpOp*>(&op) != nullptr; }

std::shared_ptr<const Op> make_softmax_vjp_op(const JsonCursor& attrs) { return SoftmaxVjpOp::from_attrs(attrs); }

template Var<float> softmax_vjp(const Var<float>&, const Var<float>&, long);
template Var<double> softmax_vjp(const Var<double>&, const Var<double>&, long);

}  // namespace xgrad
