// forward: y = exp(x - max(x)) / sum(exp(x - max(x)))     along axis, same shape; 0 if all x = -inf
// VJP:     grad_x = softmax_vjp(y, grad_out) = y * (grad_out - sum(grad_out * y))
// saves:   its output y (the VJP reads y, never x).
#include <xgrad/ops/softmax.hpp>

#include <limits>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/softmax_vjp.hpp>

namespace xgrad {

namespace detail {

// A max pass, an exp-and-sum pass, a scale pass.
template <class T>
void softmax_row(const T* x, T* y, std::size_t n, std::size_t stride) {
  const T max = row_max(x, n, stride);
  if (max == -std::numeric_limits<T>::infinity() && !row_has_nan(x, n, stride)) {
    for (std::size_t i = 0; i < n; ++i) y[i * stride] = 0;  // every key masked: a row of zeros
    return;
  }
  row_scale(y, T(1) / row_exp(x, max, y, n, stride), y, n, stride);
}

template void softmax_row(const float*, float*, std::size_t, std::size_t);
template void softmax_row(const double*, double*, std::size_t, std::size_t);

}  // namespace detail

OnnxExpRows onnx_exp_rows(OnnxEmitter& e, const std::string& x, std::int64_t axis) {
  const std::vector<OnnxAttr> keep = {{"axes", std::vector<std::int64_t>{axis}}, {"keepdims", std::int64_t{1}}};
  const std::string m = e.op("Max", {e.op("ReduceMax", {x}, keep), e.lowest()});
  const std::string exps = e.op("Exp", {e.op("Sub", {x, m})});
  return {m, exps, e.op("ReduceSum", {exps, e.int64s({axis})}, {{"keepdims", std::int64_t{1}}})};
}

std::string onnx_softmax(OnnxEmitter& e, const OnnxExpRows& rows) {
  return e.op("Mul", {rows.exps, e.op("Div", {e.scalar(1), e.op("Max", {rows.sum, e.scalar(1)})})});
}

std::string onnx_softmax(OnnxEmitter& e, const std::string& x, std::int64_t axis) {
  return onnx_softmax(e, onnx_exp_rows(e, x, axis));
}

namespace {

class SoftmaxOp final : public RowOp<SoftmaxOp> {
 public:
  using RowOp::RowOp;

  std::string name() const override { return "softmax"; }
  bool overwrites_input(std::size_t) const override { return true; }  // the row is read before it is written
  // ONNX: onnx_softmax (a row of only -inf gives zeros, where ONNX's Softmax gives NaN).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {onnx_softmax(e, n.inputs[0], onnx_axis(axis(), n.input_shapes[0].size()))};
  }

  template <class T>
  static void row(const T* x, T* y, std::size_t n, std::size_t stride) {
    detail::softmax_row(x, y, n, stride);
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {softmax_vjp(v.y, v.grad_out, axis())};
  }
};

}  // namespace

template <class T>
Var<T> softmax(const Var<T>& x, long axis) {
  return x.graph().apply(std::make_shared<SoftmaxOp>(axis), {x});
}

std::optional<long> softmax_axis(const Op& op) {
  const auto* softmax = dynamic_cast<const SoftmaxOp*>(&op);
  return softmax ? std::optional<long>(softmax->axis()) : std::nullopt;
}

std::shared_ptr<const Op> make_softmax_op(const JsonCursor& attrs) { return SoftmaxOp::from_attrs(attrs); }

template Var<float> softmax(const Var<float>&, long);
template Var<double> softmax(const Var<double>&, long);

}  // namespace xgrad
