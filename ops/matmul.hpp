// matmul: batched matrix product with BLAS transpose flags.
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// y = op(a) @ op(b), where op swaps the last two axes when its transpose flag is set.
// a (..., m, k) and b (..., k, n) have equal rank >= 2 and equal leading (batch) axes; y is
// (..., m, n). A transposed operand is handed to GEMM as a flag and never copied.
// Throws xgrad::error naming both shapes if the inner sizes or the batch axes differ,
// or if y would hold more than max_array_elements = 2^28 elements (axes of length 0 counted as 1).
template <class T>
Var<T> matmul(const Var<T>& a, const Var<T>& b, bool transpose_a = false, bool transpose_b = false);

// The op from its exported attributes (ops/registry).
std::shared_ptr<const Op> make_matmul_op(const JsonCursor& attrs);

}  // namespace xgrad
