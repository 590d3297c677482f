// The building blocks of attention variants that today's experimental models are made of,
// composed of graph nodes (no hand-written backward): rotary position embeddings so far.
// docs/attention-variants.md gives each one's formula and paper.
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
// the positions are fixed). Nodes: a constant of the d/2 frequencies, reshape, mul, cos, sin,
// two slices, mul, sub, add, concat. Throws xgrad::error naming the shapes for an odd or empty
// last axis, x of rank < 2, positions that do not broadcast, and a base that is not finite and
// > 0.
template <class T>
Var<T> rope(const Var<T>& x, const Var<T>& positions, double base = 10000.0);

// The positions 0, 1, ..., T - 1 as a constant leaf of shape (T), for rope.
template <class T>
Var<T> rope_positions(Graph<T>& g, std::size_t t);

}  // namespace xgrad
