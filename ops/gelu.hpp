// gelu: the Gaussian error linear unit, exact or in GPT-2's tanh form.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// Which GELU: as torch.nn.functional.gelu's `approximate` ("none" or "tanh", the JSON attribute).
enum class GeluApprox {
  none,  // 0.5 x (1 + erf(x / sqrt 2)): x times the standard normal CDF, PyTorch's default
  tanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): GPT-2's form
};

// y = gelu(x) element by element, any shape, with PyTorch's CPU formulas (float64 agrees with
// PyTorch to 1e-15 relative). gelu(inf) = inf; gelu(-inf) and gelu(NaN) are NaN (-inf times 0),
// as in PyTorch. The VJP is built from nodes (erf or tanh, exp, mul, ...), so derivatives of
// every order exist.
template <class T>
Var<T> gelu(const Var<T>& x, GeluApprox approx = GeluApprox::none);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_gelu_op(const JsonCursor& attrs);

}  // namespace xgrad
