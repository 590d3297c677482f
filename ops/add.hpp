// add: elementwise sum of two arrays of one shape.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = a + b, a and b of the same shape (no broadcasting; see broadcast_to). Used by grad() to
// sum the gradient contributions of a node used more than once.
template <class T>
Var<T> add(const Var<T>& a, const Var<T>& b);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_add_op(const JsonCursor& attrs);

}  // namespace xgrad
