// where: each element from a where a condition holds, from b elsewhere.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y = a where cond != 0, b where cond == 0 (numpy.where(cond, a, b), torch.where): cond a mask
// of 1 and 0 (a mask leaf of Graph::mask, a comparison's output such as less(x, t), or any node:
// every nonzero, NaN included, selects a). cond, a and b broadcast together by numpy's rules
// (axes aligned on the right, an axis of 1 or a missing leading axis stretches); y has the
// broadcast shape. One pass, no broadcast copy of an input. The gradient is grad_out where cond
// holds for a, grad_out where it does not for b, each summed to its input's shape, built as
// apply_mask(grad_out, cond, 0) and apply_mask(grad_out, logical_not(cond), 0): the branch not
// taken gets exactly 0, even where grad_out is inf or NaN (no product with 0). cond gets no
// gradient (zeros, as apply_mask's mask). Throws xgrad::error naming the three shapes if they do
// not broadcast together, or if y would hold more than max_array_elements = 2^28 elements.
template <class T>
Var<T> where(const Var<T>& cond, const Var<T>& a, const Var<T>& b);

}  // namespace xgrad
