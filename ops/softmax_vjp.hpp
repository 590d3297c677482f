// softmax_vjp: the VJP of softmax as one fused node.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// z = y * (grad_out - sum(grad_out * y, axis, keepdims)), the gradient w.r.t. the input of a
// softmax whose output is y, for the gradient grad_out w.r.t. that output. y and grad_out have
// the same shape. Throws xgrad::error naming both shapes otherwise, or if axis is out of range.
template <class T>
Var<T> softmax_vjp(const Var<T>& y, const Var<T>& grad_out, long axis = -1);

// True if `op` is a softmax_vjp op: its node's inputs are (y, grad_out). For code that pairs
// softmax nodes with their gradients (lib/diagnostics).
bool is_softmax_vjp(const Op& op);

namespace detail {
// The op's forward on one row of n elements at a stride: z = y * (g - sum(g * y)) (z may be y or
// g), for loops outside a graph (bench/) that must compute what the node computes. float and double.
template <class T>
void softmax_vjp_row(const T* y, const T* g, T* z, std::size_t n, std::size_t stride);
}  // namespace detail

}  // namespace xgrad
