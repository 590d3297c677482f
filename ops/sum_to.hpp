// sum_to: sum an array down to a shape it was broadcast from.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = x summed over the axes along which `shape` would be broadcast to x's shape (the extra
// leading axes and the axes where `shape` has 1), so y has `shape`. The inverse of broadcast_to
// for gradients. Throws xgrad::error naming both shapes if `shape` does not broadcast to x's.
template <class T>
Var<T> sum_to(const Var<T>& x, const Shape& shape);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_sum_to_op(const JsonCursor& attrs);

}  // namespace xgrad
