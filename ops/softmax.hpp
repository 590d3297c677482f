// softmax: normalised exponentials along one axis.
#pragma once

#include <optional>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = exp(x - max) / sum(exp(x - max)) along `axis` (default -1, the last), any rank >= 1.
// Stable: each row's maximum is subtracted before exp, so finite rows of any magnitude give
// finite weights summing to 1. A row holding NaN or +inf gives NaN (as jax.nn.softmax). A row
// of only -inf, one whose every key is masked, is defined as a row of zeros (the normalisation
// would be 0/0); its gradient, through softmax_vjp, is then exactly 0 too.
// Throws xgrad::error if the axis is out of range or has length 0.
template <class T>
Var<T> softmax(const Var<T>& x, long axis = -1);

// The axis `op` normalises along if it is a softmax op, as given (may be negative); nullopt for
// any other op. For code that finds softmax nodes in a graph (lib/diagnostics).
std::optional<long> softmax_axis(const Op& op);

// ONNX, for the lowerings of softmax, log_softmax and flash_attention: the exponentials of a
// row of x along `axis` (an ONNX axis, >= 0) less its maximum, as the forward computes them, in
// ops that xgrad's importer reads back. m = Max(ReduceMax(x), lowest): finite on a row of only
// -inf (every key masked), whose exponentials are then 0 and sum 0 where ONNX's Softmax would
// give NaN; exps = Exp(x - m); sum = ReduceSum(exps), >= 1 on every other row. All keep the
// axis (as 1 in m and sum). NaN or +inf in a row makes its sum NaN, as in the forward.
struct OnnxExpRows {
  std::string m, exps, sum;
};
OnnxExpRows onnx_exp_rows(OnnxEmitter& e, const std::string& x, std::int64_t axis);
// softmax(x) along `axis` as the forward defines it: exps * (1 / Max(sum, 1)), 0 on a row of
// only -inf; the same from rows onnx_exp_rows wrote already.
std::string onnx_softmax(OnnxEmitter& e, const std::string& x, std::int64_t axis);
std::string onnx_softmax(OnnxEmitter& e, const OnnxExpRows& rows);

namespace detail {
// The op's forward on one row of n elements at a stride (y may be x), for loops outside a graph
// (bench/) that must compute what the node computes. float and double.
template <class T>
void softmax_row(const T* x, T* y, std::size_t n, std::size_t stride);
}  // namespace detail

}  // namespace xgrad
