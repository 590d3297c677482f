// Shapes as xgrad passes them: Shape, the shape of an array or of a Var's value as one, and the
// element count of a shape.
#pragma once

#include <cstddef>
#include <vector>

namespace xgrad {

template <class T>
class Var;

using Shape = std::vector<std::size_t>;

// The shape of an xtensor array or expression, as a Shape.
template <class E>
Shape shape_of(const E& x) {
  return Shape(x.shape().begin(), x.shape().end());
}

// The shape of a Var's value.
template <class T>
Shape shape_of(const Var<T>& x) {
  return shape_of(x.value());
}

// The number of elements of an array of this shape (1 for a scalar, 0 with an axis of length 0).
// Unchecked: for shapes already within limits (see bounded_size in graph/op.hpp).
template <class S>
std::size_t shape_size(const S& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

}  // namespace xgrad
