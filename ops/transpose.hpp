// transpose: swap the last two axes.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x with its last two axes swapped: (..., m, n) -> (..., n, m). Needs rank >= 2.
// To feed a transposed operand to matmul without a copy, use matmul's transpose flags.
template <class T>
Var<T> transpose(const Var<T>& x);

}  // namespace xgrad
