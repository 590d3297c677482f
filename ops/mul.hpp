// mul: elementwise product with broadcasting.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = a * b elementwise, a and b broadcast together by numpy's rules (see add).
// Throws xgrad::error naming both shapes if they do not broadcast together,
// or if y would hold more than max_array_elements = 2^28 elements (axes of length 0 counted as 1).
template <class T>
Var<T> mul(const Var<T>& a, const Var<T>& b);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_mul_op(const JsonCursor& attrs);

}  // namespace xgrad
