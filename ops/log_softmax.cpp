// forward: y = x - max(x) - log(sum(exp(x - max(x))))     along axis, same shape; -inf if all x = -inf
// VJP:     grad_x = grad_out - softmax(x) * sum(grad_out)  (sum along axis, kept as 1 and broadcast)
// saves:   nothing beyond its input x (the VJP recomputes softmax(x) as a node).
#include <xgrad/ops/log_softmax.hpp>

#include <cmath>
#include <limits>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axis = "axis";

// One row of n elements at stride `stride`: a max pass, an exp-and-sum pass (y as scratch), a
// subtract pass.
template <class T>
void log_softmax_row(const T* x, T* y, std::size_t n, std::size_t stride) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const T max = detail::row_max(x, n, stride);
  if (max == minus_inf && !detail::row_has_nan(x, n, stride)) {  // log of softmax's row of zeros
    for (std::size_t i = 0; i < n; ++i) y[i * stride] = minus_inf;
    return;
  }
  const T log_sum = std::log(detail::row_exp(x, max, y, n, stride));
  detail::row_shift(x, -max - log_sum, y, n, stride);
}

class LogSoftmaxOp final : public OpFor<LogSoftmaxOp> {
 public:
  explicit LogSoftmaxOp(long axis) : m_axis(axis) {}

  std::string name() const override { return "log_softmax"; }
  // ONNX: (x - m) - Log(Max(sum, 1)) from onnx_exp_rows: -inf on a row of only -inf, where
  // ONNX's LogSoftmax gives NaN.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const OnnxExpRows rows = onnx_exp_rows(e, n.inputs[0], onnx_axis(m_axis, n.input_shapes[0].size()));
    const std::string log_sum = e.op("Log", {e.op("Max", {rows.sum, e.scalar(1)})});
    return {e.op("Sub", {e.op("Sub", {n.inputs[0], rows.m}), log_sum})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_axis, m_axis}}; }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return detail::row_pass_work(Op::work(x, y), x[0], m_axis);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    detail::nonempty_axis(m_axis, x[0], "log_softmax");
    return x[0];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    detail::parallel_for_each_row(shape_of(y), m_axis,
                                  [&](std::size_t offset, std::size_t n, std::size_t stride) {
                                    log_softmax_row(src + offset, dst + offset, n, stride);
                                  });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T> p = softmax(v.x[0], m_axis);
    return {add(v.grad_out, scale(mul(p, sum(v.grad_out, {m_axis}, true)), -1.0))};
  }

 private:
  long m_axis;
};

}  // namespace

template <class T>
Var<T> log_softmax(const Var<T>& x, long axis) {
  return x.graph().apply(std::make_shared<LogSoftmaxOp>(axis), {x});
}

std::shared_ptr<const Op> make_log_softmax_op(const JsonCursor& attrs) {
  attrs.check_object({key_axis});
  return std::make_shared<LogSoftmaxOp>(attrs[key_axis].integer());
}

template Var<float> log_softmax(const Var<float>&, long);
template Var<double> log_softmax(const Var<double>&, long);

}  // namespace xgrad
