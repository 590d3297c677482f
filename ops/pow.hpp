// pow: each element raised to a fixed power.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x^p element by element, p a number fixed with the node (torch.pow(x, p), numpy.power(x, p)
// of a scalar p): std::pow in T, with p rounded to T, but for the exponents PyTorch computes
// otherwise, which give torch's bits: x * x (p = 2), x * x * x (3), 1 / (x * x) (-2), sqrt(x)
// (0.5), 1 / sqrt(x) (-0.5), 1 / x (-1). IEEE semantics: a negative x to a p that is not an
// integer is NaN (so is -inf to 0.5, as torch: std::pow gives inf), 0 to a negative p is inf
// (-inf for -0 and an odd p), x^0 = 1 for every x, NaN and 0 included; (-0)^0.5 is -0, as torch. The gradient is
// grad_out * p * x^(p - 1), a pow node of p - 1 (so second order works): exactly 0 for p = 0
// (a constant of zeros, as PyTorch: no NaN at x = 0), grad_out itself for p = 1; as PyTorch, it
// is inf or NaN where x^(p - 1) is (x = 0 and p < 1). Throws xgrad::error naming the op if p is
// NaN or infinite (no node is added).
template <class T>
Var<T> pow(const Var<T>& x, double p);

}  // namespace xgrad
