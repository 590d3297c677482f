// One row-major GEMM call for the ops that run BLAS on raw buffers (matmul, flash_attention).
#pragma once

#include <algorithm>
#include <cstddef>

#include <xtensor-blas/xblas.hpp>

#include <xgrad/ops/kernels/blas.hpp>

namespace xgrad::detail {

// C = alpha op(A) op(B) + beta C, row-major, C (m, n) with leading dimension ldc; op(A) (m, k),
// op(B) (k, n); a transposed operand is read through the flag, never copied. Empty products are
// handled here (BLAS rejects a zero leading dimension): k = 0 leaves beta C. Sizes must fit int.
// The first call warns if OpenBLAS runs kernels below the CPU's (warn_if_blas_fallback).
template <class T>
void gemm(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k, T alpha, const T* a, std::size_t lda,
          const T* b, std::size_t ldb, T beta, T* c, std::size_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (std::size_t i = 0; i < m; ++i) {
      T* row = c + i * ldc;
      if (beta == T(0)) {
        std::fill(row, row + n, T(0));
      } else {
        for (std::size_t j = 0; j < n; ++j) row[j] *= beta;
      }
    }
    return;
  }
  warn_if_blas_fallback();
  const auto ld = [](std::size_t x) { return static_cast<int>(std::max<std::size_t>(x, 1)); };
  cxxblas::gemm(cxxblas::RowMajor, trans_a ? cxxblas::Trans : cxxblas::NoTrans, trans_b ? cxxblas::Trans : cxxblas::NoTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a, ld(lda), b, ld(ldb), beta, c, ld(ldc));
}

}  // namespace xgrad::detail
