// add: elementwise sum with broadcasting (bias, residual).
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = a + b elementwise, a and b broadcast together by numpy's rules: axes aligned on the right,
// an axis of 1 or a missing leading axis stretches (a bias (d) over (B, T, d), a residual of one
// shape). Used by grad() to sum the gradient contributions of a node used more than once.
// Throws xgrad::error naming both shapes if they do not broadcast together,
// or if y would hold more than max_array_elements = 2^28 elements (axes of length 0 counted as 1).
template <class T>
Var<T> add(const Var<T>& a, const Var<T>& b);

// How gradient contributions to one output combine, for grad() and for the VJP rules that run
// backward() (graph/backward.hpp's Accumulate): with add.
template <class T>
Var<T> sum_contributions(const Var<T>& a, const Var<T>& b) {
  return add(a, b);
}

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_add_op(const JsonCursor& attrs);

}  // namespace xgrad
