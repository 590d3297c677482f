// sum_to: sum an array down to a shape it was broadcast from.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x summed over the axes along which `shape` would be broadcast to x's shape (the extra
// leading axes and the axes where `shape` has 1), so y has `shape`. The inverse of broadcast_to
// for gradients. Throws xgrad::error naming both shapes if `shape` does not broadcast to x's,
// or if y would hold more than max_array_elements = 2^28 elements (axes of length 0 counted as 1) (only an empty x can have a larger target).
template <class T>
Var<T> sum_to(const Var<T>& x, const Shape& shape);

// The gradient g of a broadcast result, summed back to x's shape: g itself if the shapes agree
// (no node), sum_to(g, x.shape) otherwise. The VJP of every broadcasting op ends with it.
template <class T>
Var<T> sum_to_shape_of(const Var<T>& g, const Var<T>& x) {
  const auto& s = x.value().shape();
  if (shapes_equal(g.value().shape(), s)) return g;
  return sum_to(g, Shape(s.begin(), s.end()));
}

}  // namespace xgrad
