// reshape: the same elements in another shape.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x with `shape`, the elements in the same row-major order; the element counts must be
// equal. Splitting d_model into (H, d_head) for attention heads is a reshape, then a permute.
// Throws xgrad::error naming both shapes if the counts differ.
template <class T>
Var<T> reshape(const Var<T>& x, const Shape& shape);

}  // namespace xgrad
