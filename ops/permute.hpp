// permute: reorder the axes.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x with its axes reordered: axis i of y is axis axes[i] of x (numpy.transpose(x, axes)).
// (B, T, H, d) -> (B, H, T, d) is permute(x, {0, 2, 1, 3}). Throws xgrad::error naming the
// axes and the shape unless axes is a permutation of 0 .. rank-1.
template <class T>
Var<T> permute(const Var<T>& x, const std::vector<std::size_t>& axes);

}  // namespace xgrad
