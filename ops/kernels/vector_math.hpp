// tanh, sin and cos over arrays, vectorised: the fused attention's soft-cap computes one tanh per
// weight it computes (forward and backward), rope one sine and one cosine per angle of its table,
// which libm computes one element at a time (about 20 ns an element here: 2.5x the causal
// attention's time at T = 2048, bench/RESULTS.md).
#pragma once

#include <cstddef>

namespace xgrad::detail {

// y = f(x), element by element (y may be x), for f = tanh, sin, cos. On x86-64 with glibc 2.35
// or later, glibc's vector math library (libmvec) computes it, 8 floats or 4 doubles at a time
// where the CPU has AVX2, else 4 or 2 (SSE2); elsewhere std::tanh, std::sin, std::cos.
// Measured against the function computed in a wider type and rounded, on this machine
// (tests/ops/kernels/vector_math_test.cpp allows 2 ulp for float and 4 for double): tanh within
// 1 ulp (float) and 2 (double), sin and cos within 1 ulp (float) and 2 (double) over |x| <= 1e4.
// tanh(+-inf) = +-1, sin(+-inf) = cos(+-inf) = NaN, f(NaN) = NaN, tanh(-0) = sin(-0) = -0. Each
// element's bits depend only on it (a short tail runs in a padded vector), so they do not depend
// on how an array is split over threads.
void vector_tanh(const float* x, float* y, std::size_t n);
void vector_tanh(const double* x, double* y, std::size_t n);
void vector_sin(const float* x, float* y, std::size_t n);
void vector_sin(const double* x, double* y, std::size_t n);
void vector_cos(const float* x, float* y, std::size_t n);
void vector_cos(const double* x, double* y, std::size_t n);

// What the functions above run here: "avx2" or "sse2" (libmvec at that width), or "scalar" (libm).
const char* vector_math_kind();

}  // namespace xgrad::detail
