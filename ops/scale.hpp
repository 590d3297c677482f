// scale: multiply by a constant.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = alpha * x, any shape. alpha is an attribute (a constant, not differentiated), kept as a
// double and rounded to T when applied.
template <class T>
Var<T> scale(const Var<T>& x, double alpha);

}  // namespace xgrad
