// sum and mean: reductions over axes (one op class, ops/sum.cpp).
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x summed over `axes` (each in [-rank, rank), in any order, none twice), as numpy.sum(x,
// axis=axes, keepdims=keepdims): the summed axes are dropped, or kept as 1 when keepdims. An empty
// list sums nothing (y = x). sum(x) sums every axis to a scalar of shape (). Throws xgrad::error
// naming the axis and x's shape if an axis is out of range or repeated.
template <class T>
Var<T> sum(const Var<T>& x, const std::vector<long>& axes, bool keepdims = false);
template <class T>
Var<T> sum(const Var<T>& x);

// y = x averaged over `axes`, as numpy.mean(x, axis=axes, keepdims=keepdims); axes as for sum().
// mean(x) averages every axis to a scalar of shape (). An axis of length 0 averages nothing and
// gives NaN (0/0), as numpy does. Throws xgrad::error naming the axis and x's shape if an axis is
// out of range or repeated.
template <class T>
Var<T> mean(const Var<T>& x, const std::vector<long>& axes, bool keepdims = false);
template <class T>
Var<T> mean(const Var<T>& x);

// The gradient g of a reduction of x spread back over x: g reshaped to x's shape with the
// reduced axes as 1 (`kept`), then broadcast to x's shape. The VJP of sum and mean.
template <class T>
Var<T> spread_back(const Var<T>& g, const Shape& kept, const Shape& x_shape);

}  // namespace xgrad
