// mean: average over axes.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = x averaged over `axes`, as numpy.mean(x, axis=axes, keepdims=keepdims); axes as for sum().
// mean(x) averages every axis to a scalar of shape (). An axis of length 0 averages nothing and
// gives NaN (0/0), as numpy does. Throws xgrad::error naming the axis and x's shape if an axis is
// out of range or repeated.
template <class T>
Var<T> mean(const Var<T>& x, const std::vector<long>& axes, bool keepdims = false);
template <class T>
Var<T> mean(const Var<T>& x);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_mean_op(const JsonCursor& attrs);

}  // namespace xgrad
