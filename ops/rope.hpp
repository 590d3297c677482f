// rope: rotary position embeddings, one pass over x.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Rotary position embeddings (Su et al. 2021, RoFormer), in the half-split form of GPT-NeoX and
// Llama: for x (..., T, d), d even, and h = d / 2, each pair (x_i, x_{i+h}) of a position p is
// rotated by the angle p theta_i, theta_i = base^(-2i/d):
//   y_i     = x_i cos(p theta_i) - x_{i+h} sin(p theta_i)
//   y_{i+h} = x_{i+h} cos(p theta_i) + x_i sin(p theta_i)
// `positions` holds p (any real numbers, usually 0, 1, ..., T - 1) and broadcasts against x's
// shape without its last axis by numpy's rules: (T) for every batch and head, (B, 1, T) for
// (B, H, T, d) queries or keys. It is a Var, so its gradient is defined (a constant leaf when
// the positions are fixed: rope_positions in lib/variants.hpp).
// One node: the angles p theta_i are rounded to T as the product of p and theta_i in T, their
// sines and cosines computed once per distinct position (libmvec: within 2 ulp in float, 4 in
// double, ops/kernels/vector_math.hpp), then one pass over x. The same values as the composition
// of nodes (reshape, mul, cos, sin, slice, mul, sub, add, concat) up to those ulps.
// VJP: grad_x = rope(grad_out, -positions), the inverse rotation; grad_positions, when wanted,
// = sum over i of theta_i (grad_out_{i+h} y_i - grad_out_i y_{i+h}), summed to positions' shape
// (nodes: slice, mul, sub, sum, sum_to), so second order works.
// Throws xgrad::error naming the shapes for an odd or empty last axis, x of rank < 2, positions
// that do not broadcast, and a base that is not finite and > 0; no node is added then.
template <class T>
Var<T> rope(const Var<T>& x, const Var<T>& positions, double base = 10000.0);

}  // namespace xgrad
