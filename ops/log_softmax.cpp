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
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad {

namespace {

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

class LogSoftmaxOp final : public RowOp<LogSoftmaxOp> {
 public:
  using RowOp::RowOp;

  std::string name() const override { return "log_softmax"; }
  // ONNX: (x - m) - Log(Max(sum, 1)) from onnx_exp_rows: -inf on a row of only -inf, where
  // ONNX's LogSoftmax gives NaN.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const OnnxExpRows rows = onnx_exp_rows(e, n.inputs[0], onnx_axis(axis(), n.input_shapes[0].size()));
    const std::string log_sum = e.op("Log", {e.op("Max", {rows.sum, e.scalar(1)})});
    return {e.op("Sub", {e.op("Sub", {n.inputs[0], rows.m}), log_sum})};
  }

  template <class T>
  static void row(const T* x, T* y, std::size_t n, std::size_t stride) {
    log_softmax_row(x, y, n, stride);
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T> p = softmax(v.x[0], axis());
    return {add(v.grad_out, scale(mul(p, sum(v.grad_out, {axis()}, true)), -1.0))};
  }
};

}  // namespace

template <class T>
Var<T> log_softmax(const Var<T>& x, long axis) {
  return x.graph().apply(std::make_shared<LogSoftmaxOp>(axis), {x});
}

std::shared_ptr<const Op> make_log_softmax_op(const JsonCursor& attrs) { return LogSoftmaxOp::from_attrs(attrs); }

template Var<float> log_softmax(const Var<float>&, long);
template Var<double> log_softmax(const Var<double>&, long);

}  // namespace xgrad
