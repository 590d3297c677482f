// mul: elementwise product of two arrays of one shape.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = a * b elementwise, a and b of the same shape (no broadcasting; see broadcast_to).
template <class T>
Var<T> mul(const Var<T>& a, const Var<T>& b);

}  // namespace xgrad
