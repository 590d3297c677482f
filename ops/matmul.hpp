// matmul: batched matrix product with BLAS transpose flags; linear: x w + b in one node.
#pragma once

#include <xgrad/graph/graph.hpp>

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

// y = x w + b, a linear layer: x (..., k) of rank >= 2, w (k, n), b (n); y (..., n). The same as
// add(matmul(x, w), b), in one node: b is written into y's rows and one GEMM of all of x's rows
// adds x w to them (beta = 1), so no pass over y follows the product. Its bits are those of
// add(matmul(x, w), b) where OpenBLAS sums the inner axis in one block (k up to a few hundred);
// above, the block sums of x w are added to b one by one (a rounding or so apart). Gradients:
// grad_x = grad_out w^T, grad_w = one product of all rows, grad_b = grad_out summed over them.
// Throws xgrad::error naming the three shapes for an x of rank < 2, a w not a matrix, k not
// shared, a b other than (n), or a y of more than max_array_elements.
template <class T>
Var<T> linear(const Var<T>& x, const Var<T>& w, const Var<T>& b);

}  // namespace xgrad
