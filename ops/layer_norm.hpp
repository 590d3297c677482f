// layer_norm: normalise over the last axis, then scale and shift.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis of x (d elements), as
// torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps): var is the biased variance (divided
// by d) and eps sits inside the square root. x has rank >= 1 and d >= 1; gamma and beta are (d).
// The node has three outputs, as PyTorch's native_layer_norm and ONNX's LayerNormalization:
// 0 y (x's shape); 1 the mean and 2 the reciprocal standard deviation 1 / sqrt(var + eps), both
// (..., 1) (x's shape with the last axis 1; g.var(y.id(), 1) reads the mean). Each output can be
// differentiated; the VJP is one layer_norm_vjp node reading the saved mean and rstd.
// Throws xgrad::error naming the shapes if x has rank 0 or d = 0, or gamma or beta is not (d),
// and naming eps if it is negative or not finite.
template <class T>
Var<T> layer_norm(const Var<T>& x, const Var<T>& gamma, const Var<T>& beta, double eps = 1e-5);

// The gradients layer_norm_vjp gives.
template <class T>
struct LayerNormGrads {
  Var<T> grad_x, grad_gamma, grad_beta;
};

// layer_norm's VJP for the gradient grad_y w.r.t. y, as one node of three outputs, from the
// saved mean and rstd: with xhat = (x - mean) rstd and gy = grad_y gamma, grad_x = rstd (gy -
// mean(gy) - xhat mean(gy xhat)) over the last axis, grad_gamma = the sum over the rows of
// grad_y xhat, grad_beta = that of grad_y. Row sums are vector reductions; grad_gamma and
// grad_beta sum the rows in order, so the bits do not depend on the thread count. x and grad_y
// are (..., d), gamma (d), mean and rstd (..., 1); throws xgrad::error naming the shapes
// otherwise. Its VJP is that of the same formula composed of nodes (second order and beyond).
template <class T>
LayerNormGrads<T> layer_norm_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& mean, const Var<T>& rstd,
                                 const Var<T>& grad_y);

}  // namespace xgrad
