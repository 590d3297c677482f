// broadcast_to: repeat an array along axes of length 1 and new leading axes.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x broadcast to `shape` by numpy's rules (x's axes aligned on the right; each equal to the
// target's or 1). Throws xgrad::error naming both shapes if x does not broadcast to it,
// or if y would hold more than max_array_elements = 2^28 elements (axes of length 0 counted as 1); infer_shape refuses before anything is allocated.
template <class T>
Var<T> broadcast_to(const Var<T>& x, const Shape& shape);

}  // namespace xgrad
