// rms_norm: divide by the root mean square over the last axis, then scale.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x / sqrt(mean(x^2) + eps) * gamma over the last axis of x (d elements), as
// torch.nn.functional.rms_norm(x, (d,), gamma, eps) and ONNX's RMSNormalization (axis -1): no
// mean is subtracted and there is no shift (Zhang and Sennrich 2019, as Llama uses it). x has
// rank >= 1 and d >= 1; gamma is (d). eps sits inside the square root; its default is 1e-5, as
// layer_norm's and ONNX's (PyTorch's default, eps=None, is the dtype's machine epsilon: pass
// 1.1920929e-07 or 2.220446049250313e-16 for that). A row of zeros gives zeros for eps > 0 and
// NaN for eps = 0 (0 * inf).
// The node has two outputs: 0 y (x's shape) and 1 the reciprocal root mean square
// rstd = 1 / sqrt(mean(x^2) + eps), (..., 1) (x's shape with the last axis 1; g.var(y.id(), 1)
// reads it). Both can be differentiated; the VJP is one rms_norm_vjp node reading the saved rstd.
// Throws xgrad::error naming the shapes if x has rank 0 or d = 0, or gamma is not (d), and
// naming eps if it is negative or not finite; no node is added then.
template <class T>
Var<T> rms_norm(const Var<T>& x, const Var<T>& gamma, double eps = 1e-5);

// The gradients rms_norm_vjp gives.
template <class T>
struct RmsNormGrads {
  Var<T> grad_x, grad_gamma;
};

// rms_norm's VJP for the gradient grad_y w.r.t. y, as one node of two outputs, from the saved
// rstd: with xhat = x rstd and gy = grad_y gamma, grad_x = rstd (gy - xhat mean(gy xhat)) over the
// last axis, grad_gamma = the sum over the rows of grad_y xhat (in row order, so the bits do not
// depend on the thread count). x and grad_y are (..., d), gamma (d), rstd (..., 1); throws
// xgrad::error naming the shapes otherwise. Its VJP is that of the same formula composed of nodes
// (second order and beyond).
template <class T>
RmsNormGrads<T> rms_norm_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& rstd, const Var<T>& grad_y);

}  // namespace xgrad
