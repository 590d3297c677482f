// gelu: the Gaussian error linear unit, exact or in GPT-2's tanh form.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Which GELU: as torch.nn.functional.gelu's `approximate` ("none" or "tanh", the JSON attribute).
enum class GeluApprox {
  none,  // 0.5 x (1 + erf(x / sqrt 2)): x times the standard normal CDF, PyTorch's default
  tanh,  // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))): GPT-2's form
};

// y = gelu(x) element by element, any shape, with PyTorch's CPU formulas (float64 agrees with
// PyTorch to 1e-15 relative), erf vectorised (ops/kernels/vector_math.hpp). gelu(inf) = inf; gelu(-inf) and gelu(NaN) are NaN (-inf times 0),
// as in PyTorch. The VJP is one gelu_vjp node, whose own VJP is built from nodes (erf or tanh,
// exp, mul, ...), so derivatives of every order exist.
template <class T>
Var<T> gelu(const Var<T>& x, GeluApprox approx = GeluApprox::none);

// z = grad_out * gelu'(x), element by element: gelu's VJP as one fused node, one pass over x and
// grad_out (which have the same shape; throws xgrad::error naming both shapes otherwise). The
// roundings, in their order, of the erf, exp, mul, add and scale nodes it replaces, with erf and
// exp vectorised (ops/kernels/vector_math.hpp, vexp.hpp: within 2 ulp in float; 4.3e-16 relative
// in double); the tanh form keeps their bits. Its VJP: grad_out's gradient is gelu_vjp(x, grad_z), x's is grad_z grad_out gelu''(x),
// of erf or tanh, exp, mul and scale nodes.
template <class T>
Var<T> gelu_vjp(const Var<T>& x, const Var<T>& grad_out, GeluApprox approx = GeluApprox::none);

}  // namespace xgrad
