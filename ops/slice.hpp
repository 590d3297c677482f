// slice: a contiguous range of one axis.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x[..., begin:end, ...] along `axis` (negative counts from the end, as numpy), any rank >= 1:
// y's axis has length end - begin, the other axes are x's. begin == end gives an empty y. The
// gradient pads grad_out back to x's shape with zeros (ops/pad.hpp).
// Throws xgrad::error naming the shape and the numbers unless the axis is in range and
// 0 <= begin <= end <= x.shape[axis].
template <class T>
Var<T> slice(const Var<T>& x, long axis, std::size_t begin, std::size_t end);

}  // namespace xgrad
