// pad: zeros ahead of and behind one axis.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x with `before` zeros ahead of and `after` zeros behind it along `axis` (negative counts
// from the end, as numpy), any rank >= 1: numpy.pad(x, (0, 0), ..., (before, after), ..., (0, 0))
// with constant 0. The gradient slices grad_out back to x's part (ops/slice.hpp).
// Throws xgrad::error naming the shape and the numbers if the axis is out of range or y would
// hold more than max_array_elements elements (axes of length 0 counted as 1).
template <class T>
Var<T> pad(const Var<T>& x, long axis, std::size_t before, std::size_t after);

}  // namespace xgrad
