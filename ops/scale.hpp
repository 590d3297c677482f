// scale: multiply by a constant.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = alpha * x, any shape. alpha is an attribute (a constant, not differentiated), kept as a
// double and rounded to T when applied.
template <class T>
Var<T> scale(const Var<T>& x, double alpha);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_scale_op(const JsonCursor& attrs);

}  // namespace xgrad
