// layer_norm: normalise over the last axis, then scale and shift.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis of x (d elements), as
// torch.nn.functional.layer_norm(x, (d,), gamma, beta, eps): var is the biased variance (divided
// by d) and eps sits inside the square root. x has rank >= 1 and d >= 1; gamma and beta are (d).
// The node has three outputs, as PyTorch's native_layer_norm and ONNX's LayerNormalization:
// 0 y (x's shape); 1 the mean and 2 the reciprocal standard deviation 1 / sqrt(var + eps), both
// (..., 1) (x's shape with the last axis 1; g.var(y.id(), 1) reads the mean). Each output can be
// differentiated; the VJP reads the saved mean and rstd, as nodes.
// Throws xgrad::error naming the shapes if x has rank 0 or d = 0, or gamma or beta is not (d),
// and naming eps if it is negative or not finite.
template <class T>
Var<T> layer_norm(const Var<T>& x, const Var<T>& gamma, const Var<T>& beta, double eps = 1e-5);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_layer_norm_op(const JsonCursor& attrs);

}  // namespace xgrad
