// tanh over an array, vectorised: the fused attention's soft-cap computes one tanh per weight
// it computes (forward and backward), which libm computes one element at a time (about 20 ns an
// element here: 2.5x the causal attention's time at T = 2048, bench/RESULTS.md).
#pragma once

#include <cstddef>

namespace xgrad::detail {

// y = tanh(x), element by element (y may be x). On x86-64 with glibc 2.35 or later, glibc's vector
// math library (libmvec) computes it, 8 floats or 4 doubles at a time where the CPU has AVX2, else
// 4 or 2 (SSE2); elsewhere std::tanh. Measured against tanh computed in a wider type and rounded:
// float within 1 ulp, double within 2 ulp on this machine (tests/ops/kernels/vector_tanh_test.cpp
// allows 2 and 4); tanh(+-inf) = +-1,
// tanh(NaN) = NaN, tanh(-0) = -0. Each element's bits depend only on it (a short tail runs in a
// padded vector), so they do not depend on how an array is split over threads.
void vector_tanh(const float* x, float* y, std::size_t n);
void vector_tanh(const double* x, double* y, std::size_t n);

// What vector_tanh runs here: "avx2" or "sse2" (libmvec at that width), or "scalar" (std::tanh).
const char* vector_tanh_kind();

}  // namespace xgrad::detail
