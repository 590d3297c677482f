// relu: the rectifier max(x, 0).
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = max(x, 0) elementwise; NaN stays NaN. The gradient is grad_out where x > 0 and 0 where
// x <= 0 (the subgradient 0 at the kink, as PyTorch and JAX choose).
template <class T>
Var<T> relu(const Var<T>& x);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_relu_op(const JsonCursor& attrs);

}  // namespace xgrad
