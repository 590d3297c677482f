// log_softmax: the logarithm of softmax, computed without forming softmax.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x - max - log(sum(exp(x - max))) along `axis` (default -1), any rank >= 1: log(softmax(x))
// without its underflow (a weight of 1e-400 is a log-probability of -921, not -inf). An entry of
// -inf gives -inf; a row of only -inf gives a row of -inf (the log of softmax's row of zeros). A
// row holding NaN or +inf gives NaN. The gradient is grad_out - softmax(x) * sum(grad_out) along
// the axis, built from softmax, sum, mul, scale and add nodes, so it can be differentiated again.
// Throws xgrad::error if the axis is out of range or has length 0.
template <class T>
Var<T> log_softmax(const Var<T>& x, long axis = -1);

}  // namespace xgrad
