// Shape, and the shape of an xtensor array as one.
#pragma once

#include <cstddef>
#include <vector>

namespace xgrad {

using Shape = std::vector<std::size_t>;

// The shape of an xt::xarray (or any expression with shape()) as a Shape.
template <class A>
Shape shape_of(const A& a) {
  return Shape(a.shape().begin(), a.shape().end());
}

}  // namespace xgrad
