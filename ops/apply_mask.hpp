// apply_mask: keep the allowed entries, fill the others.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = x where mask != 0, `fill` where mask == 0. mask holds 1 (allowed) and 0 (forbidden) and
// broadcasts to x's shape by numpy's rules (a (T_q, T_k) mask over (B, H, T_q, T_k) scores).
// Masked attention fills with -inf before softmax. The mask is a constant: its gradient is 0.
// Throws xgrad::error naming both shapes if the mask does not broadcast to x.
template <class T>
Var<T> apply_mask(const Var<T>& x, const Var<T>& mask, double fill);

}  // namespace xgrad
