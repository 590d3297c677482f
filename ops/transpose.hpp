// transpose: swap the last two axes.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = x with its last two axes swapped: (..., m, n) -> (..., n, m). Needs rank >= 2.
// To feed a transposed operand to matmul without a copy, use matmul's transpose flags.
template <class T>
Var<T> transpose(const Var<T>& x);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_transpose_op(const JsonCursor& attrs);

}  // namespace xgrad
