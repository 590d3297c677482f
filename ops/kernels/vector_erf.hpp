// erf over an array, vectorised: gelu's forward and VJP spend most of their time in erf, which
// libm computes one element at a time (5-23 ns an element here, bench/RESULTS.md).
#pragma once

#include <cstddef>

namespace xgrad::detail {

// y = erf(x), element by element (y may be x). On x86-64 with glibc 2.35 or later, glibc's vector
// math library (libmvec) computes it, 8 floats or 4 doubles at a time where the CPU has AVX2, else
// 4 or 2 (SSE2); elsewhere std::erf. Measured against the correctly rounded erf: float within 2
// ulp (std::erf: 1), double within 4.3e-16 relative of std::erf; erf(+-inf) = +-1, erf(NaN) = NaN,
// erf(-0) = -0 (tests/ops/kernels/vector_erf_test.cpp). Each element's bits depend only on it (a
// short tail runs in a padded vector), so they do not depend on how an array is split over threads.
void vector_erf(const float* x, float* y, std::size_t n);
void vector_erf(const double* x, double* y, std::size_t n);

// What vector_erf runs here: "avx2" or "sse2" (libmvec at that width), or "scalar" (std::erf).
const char* vector_erf_kind();

}  // namespace xgrad::detail
