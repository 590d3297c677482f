// erf, tanh, sin and cos over arrays, vectorised: gelu's forward and VJP spend most of their time
// in erf, the fused attention's soft-cap computes one tanh per weight it computes (forward and
// backward), rope one sine and one cosine per angle of its table, which libm computes one element
// at a time (erf 5-23 ns an element, the others about 20 ns here: bench/RESULTS.md).
#pragma once

#include <cstddef>

namespace xgrad::detail {

// y = f(x), element by element (y may be x), for f = erf, tanh, sin, cos. On x86-64 with glibc
// 2.35 or later, glibc's vector math library (libmvec) computes it, 8 floats or 4 doubles at a
// time where the CPU has AVX2, else 4 or 2 (SSE2); elsewhere std::erf, std::tanh, std::sin,
// std::cos. Measured on this machine (tests/ops/kernels/vector_math_test.cpp): erf against the
// correctly rounded erf, float within 2 ulp (std::erf: 1), double within 4.3e-16 relative of
// std::erf; the others against the function computed in a wider type and rounded (the test
// allows 2 ulp for float and 4 for double): tanh within 1 ulp (float) and 2 (double), sin and cos
// within 1 ulp (float) and 2 (double) over |x| <= 1e4. erf(+-inf) = tanh(+-inf) = +-1,
// sin(+-inf) = cos(+-inf) = NaN, f(NaN) = NaN, erf(-0) = tanh(-0) = sin(-0) = -0. Each element's
// bits depend only on it (a short tail runs in a padded vector), so they do not depend on how an
// array is split over threads.
void vector_erf(const float* x, float* y, std::size_t n);
void vector_erf(const double* x, double* y, std::size_t n);
void vector_tanh(const float* x, float* y, std::size_t n);
void vector_tanh(const double* x, double* y, std::size_t n);
void vector_sin(const float* x, float* y, std::size_t n);
void vector_sin(const double* x, double* y, std::size_t n);
void vector_cos(const float* x, float* y, std::size_t n);
void vector_cos(const double* x, double* y, std::size_t n);

// What the functions above run here: "avx2" or "sse2" (libmvec at that width), or "scalar" (libm).
const char* vector_math_kind();

}  // namespace xgrad::detail
