// concat: several arrays joined along one axis.
#pragma once

#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = the xs one after another along `axis` (negative counts from the end, as numpy):
// numpy.concatenate(xs, axis), torch.cat. Every x has the same rank (>= 1) and the same length on
// every other axis; one x gives a copy. The gradient of each x is its slice of grad_out
// (ops/slice.hpp). Throws xgrad::error, naming the op, the axis and every shape, for no x, xs of
// other ranks or lengths, an axis out of range, or a y of more than max_array_elements elements.
template <class T>
Var<T> concat(const std::vector<Var<T>>& xs, long axis);

}  // namespace xgrad
