// exp on AVX-512 vectors, for row_exp on CPUs that have AVX-512F (ops/kernels/row_kernels.cpp picks it
// at run time). The method and the coefficients are those of ops/kernels/vexp.hpp, with two AVX-512
// instructions in place of the bit assembly of 2^n: vrndscale rounds x log2(e) to the integer n,
// and vscalef computes e^r 2^n with one rounding, giving 0 below the underflow threshold, +inf
// above the overflow one and subnormal results rounded once without the split of 2^n. That is
// about half the instructions: exp runs twice as fast, within the same bounds (1 ulp of std::exp
// for float, 2 ulp for double, tested through row_exp).
// Only for GCC on x86-64 (XGRAD_AVX512_EXP); included by ops/kernels/row_kernels.cpp alone (it is
// installed with the other headers, but no public header includes it).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define XGRAD_AVX512_EXP 1

// GCC 12 warns, wrongly, that the "undefined" vectors of the masked intrinsics are used
// uninitialized (they are fully masked out).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include <xgrad/ops/kernels/vexp.hpp>

#define XGRAD_AVX512 __attribute__((target("avx512f"), always_inline)) inline

namespace xgrad::detail::avx512 {

// x clamped to +-clamp first, so that n and r stay finite (x = +-inf would give r = NaN); the
// clamped n (+-159 for float, +-1082 for double) is still beyond the range, and vscalef alone
// takes the result to 0 or +inf. max(-clamp, x) and min(clamp, .) return x if x is NaN.
constexpr float clamp_f = 110.0f;
constexpr double clamp_d = 750.0;
constexpr int round_nearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// c[0] x^(N-1) + ... + c[N-1], by Horner's rule, as detail::horner.
template <std::size_t N>
XGRAD_AVX512 __m512 horner(__m512 x, const float (&c)[N]) {
  __m512 p = _mm512_set1_ps(c[0]);
  for (std::size_t i = 1; i < N; ++i) p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(c[i]));
  return p;
}
template <std::size_t N>
XGRAD_AVX512 __m512d horner(__m512d x, const double (&c)[N]) {
  __m512d p = _mm512_set1_pd(c[0]);
  for (std::size_t i = 1; i < N; ++i) p = _mm512_fmadd_pd(p, x, _mm512_set1_pd(c[i]));
  return p;
}

XGRAD_AVX512 __m512 exp16(__m512 x) {
  using L = ExpLimits<float>;
  const __m512 xc = _mm512_min_ps(_mm512_set1_ps(clamp_f), _mm512_max_ps(_mm512_set1_ps(-clamp_f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(L::log2e)), round_nearest);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(L::ln2_hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(L::ln2_lo), r);
  const __m512 p = horner(r, ExpCoefficients::p_float);
  const __m512 e = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(e, n);
}

XGRAD_AVX512 __m512d exp8(__m512d x) {
  using L = ExpLimits<double>;
  const __m512d xc = _mm512_min_pd(_mm512_set1_pd(clamp_d), _mm512_max_pd(_mm512_set1_pd(-clamp_d), x));
  const __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(L::log2e)), round_nearest);
  __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(L::ln2_hi), xc);
  r = _mm512_fnmadd_pd(n, _mm512_set1_pd(L::ln2_lo), r);
  const __m512d rr = _mm512_mul_pd(r, r);
  const __m512d p = _mm512_mul_pd(r, horner(rr, ExpCoefficients::p_double));
  const __m512d q = horner(rr, ExpCoefficients::q_double);
  const __m512d e = _mm512_add_pd(_mm512_set1_pd(1.0), _mm512_div_pd(_mm512_add_pd(p, p), _mm512_sub_pd(q, p)));
  return _mm512_scalef_pd(e, n);
}

// The vector types and operations of one element type, for the row loop below.
struct F32 {
  using T = float;
  using V = __m512;
  using M = __mmask16;
  static constexpr std::size_t lanes = 16;
  static XGRAD_AVX512 V set1(T a) { return _mm512_set1_ps(a); }
  static XGRAD_AVX512 V zero() { return _mm512_setzero_ps(); }
  static XGRAD_AVX512 V load(M m, const T* x) { return _mm512_maskz_loadu_ps(m, x); }
  static XGRAD_AVX512 void store(M m, T* y, V v) { _mm512_mask_storeu_ps(y, m, v); }
  static XGRAD_AVX512 V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static XGRAD_AVX512 V add(M m, V a, V b) { return _mm512_mask_add_ps(a, m, a, b); }
  static XGRAD_AVX512 V exp(V x) { return exp16(x); }
  static XGRAD_AVX512 T sum(V v) { return _mm512_reduce_add_ps(v); }
};

struct F64 {
  using T = double;
  using V = __m512d;
  using M = __mmask8;
  static constexpr std::size_t lanes = 8;
  static XGRAD_AVX512 V set1(T a) { return _mm512_set1_pd(a); }
  static XGRAD_AVX512 V zero() { return _mm512_setzero_pd(); }
  static XGRAD_AVX512 V load(M m, const T* x) { return _mm512_maskz_loadu_pd(m, x); }
  static XGRAD_AVX512 void store(M m, T* y, V v) { _mm512_mask_storeu_pd(y, m, v); }
  static XGRAD_AVX512 V sub(V a, V b) { return _mm512_sub_pd(a, b); }
  static XGRAD_AVX512 V add(M m, V a, V b) { return _mm512_mask_add_pd(a, m, a, b); }
  static XGRAD_AVX512 V exp(V x) { return exp8(x); }
  static XGRAD_AVX512 T sum(V v) { return _mm512_reduce_add_pd(v); }
};

// y = exp(x - shift) over a row, returning the sum of y. Every element goes through the same
// vector code, by lanes at a time (a masked part at the end); a strided row is copied lanes at a
// time into a contiguous block, so its elements and its sum have the same bits as a contiguous
// row's. y may be x.
template <class A>
__attribute__((target("avx512f"))) typename A::T row_exp(const typename A::T* x, typename A::T shift,
                                                         typename A::T* y, std::size_t n, std::size_t stride) {
  using T = typename A::T;
  const auto s = A::set1(shift);
  auto sum = A::zero();
  alignas(64) T block[A::lanes];
  std::size_t i = 0;
  if (stride == 1) {
    const auto all = static_cast<typename A::M>(~0u);
    for (; i + A::lanes <= n; i += A::lanes) {
      const auto e = A::exp(A::sub(A::load(all, x + i), s));
      A::store(all, y + i, e);
      sum = A::add(all, sum, e);
    }
  }
  for (; i < n; i += A::lanes) {
    const std::size_t k = std::min(A::lanes, n - i);
    const auto m = static_cast<typename A::M>((k == A::lanes) ? ~0u : (1u << k) - 1);
    if (stride == 1) {
      const auto e = A::exp(A::sub(A::load(m, x + i), s));
      A::store(m, y + i, e);
      sum = A::add(m, sum, e);
    } else {
      for (std::size_t j = 0; j < k; ++j) block[j] = x[(i + j) * stride];
      const auto e = A::exp(A::sub(A::load(m, block), s));
      A::store(m, block, e);
      sum = A::add(m, sum, e);
      for (std::size_t j = 0; j < k; ++j) y[(i + j) * stride] = block[j];
    }
  }
  return A::sum(sum);
}

// Whether this CPU runs the code above.
inline bool available() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}

}  // namespace xgrad::detail::avx512

#undef XGRAD_AVX512
#pragma GCC diagnostic pop

#endif
