// matmul: batched matrix product with BLAS transpose flags.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = op(a) @ op(b), where op swaps the last two axes when its transpose flag is set, as
// numpy.matmul and torch.matmul for operands of rank >= 2. a (..., m, k) and b (..., k, n): the
// batch axes (all but the last two) broadcast by numpy's rules, so (B, T, d) @ (d, h),
// (B, H, T, d) @ (H, d, e) and a rank-2 weight over any batch work; y is (batch..., m, n).
// Neither operand is copied: a transposed one is handed to GEMM as a flag, a broadcast one read
// in place, and a weight without batch axes under an untransposed a makes one GEMM of all of
// a's rows, (B*T, d) x (d, h). The gradient of a broadcast operand is summed back to its shape.
// Throws xgrad::error naming both shapes if an operand has rank < 2, the inner sizes differ, the
// batch axes do not broadcast together, or y would hold more than max_array_elements = 2^28
// elements (axes of length 0 counted as 1).
template <class T>
Var<T> matmul(const Var<T>& a, const Var<T>& b, bool transpose_a = false, bool transpose_b = false);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_matmul_op(const JsonCursor& attrs);

}  // namespace xgrad
