// mul: elementwise product of two arrays of one shape.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = a * b elementwise, a and b of the same shape (no broadcasting; see broadcast_to).
template <class T>
Var<T> mul(const Var<T>& a, const Var<T>& b);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_mul_op(const JsonCursor& attrs);

}  // namespace xgrad
