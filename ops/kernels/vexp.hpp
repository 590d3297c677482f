// exp for the row loops of softmax and log_softmax: branch-free, so that a loop of it vectorises
// (std::exp is a scalar library call, and a scalar exp loop alone makes attention 1.5x slower
// than its matrix products). Cephes' method: x = n ln2 + r with |r| <= ln2 / 2, a polynomial
// (float) or Pade (double) approximation of e^r, and 2^n assembled from bits.
// Accuracy, tested against std::exp over the whole range: within 1 ulp for float, 2 ulp for
// double, exact 0 below the underflow threshold, +inf above the overflow one, subnormal results
// rounded once; exp(-inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN. In GCC x86-64 builds on CPUs
// with AVX-512F, row_exp runs the same method with AVX-512 instructions for n and 2^n
// (ops/kernels/vexp_avx512.hpp).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

namespace xgrad::detail {

// The layout of float and double (IEEE binary32 and binary64): the integer type of their bits,
// the mantissa's bits, the exponent's bias, and magic = 1.5 * 2^(mantissa bits) with its bits
// (adding magic puts an integer-valued x of an exponent's range in the low mantissa bits,
// rounded to the nearest, ties to even).
template <class T>
struct FloatBits {
  static_assert(std::numeric_limits<T>::is_iec559 && (sizeof(T) == 4 || sizeof(T) == 8), "float or double");
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  static constexpr int mantissa = std::numeric_limits<T>::digits - 1;   // 23, 52
  static constexpr U bias = std::numeric_limits<T>::max_exponent - 1;  // 127, 1023
  static constexpr T magic = T(3) * T(U(1) << (mantissa - 1));  // 1.5 * 2^23, 1.5 * 2^52
  static constexpr U magic_bits = ((bias + mantissa) << mantissa) | (U(1) << (mantissa - 1));  // 0x4B400000, ...
};

// 2^n for an integer-valued n of an exponent's range, from the bits of n + magic.
template <class T>
inline T pow2_of_integer(T n) {
  using B = FloatBits<T>;
  const T t = n + B::magic;
  typename B::U bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits = (bits - B::magic_bits + B::bias) << B::mantissa;
  T p;
  std::memcpy(&p, &bits, sizeof p);
  return p;
}

// x rounded to the nearest integer (ties to even) by adding and removing magic.
template <class T>
inline T round_to_integer(T x) {
  return (x + FloatBits<T>::magic) - FloatBits<T>::magic;
}

// Cephes' approximations of e^r on |r| <= ln2 / 2 (a little more for rounding of n), their
// coefficients highest degree first, shared with ops/kernels/vexp_avx512.hpp. float: e^r = 1 + r + r^2 P(r).
// double: e^r = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)), a Pade form.
struct ExpCoefficients {
  static constexpr float p_float[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                       4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  static constexpr double p_double[3] = {1.26177193074810590878e-4, 3.02994407707441961300e-2,
                                         9.99999999999999999910e-1};
  static constexpr double q_double[4] = {3.00198505138664455042e-6, 2.52448340349684104192e-3,
                                         2.27265548208155028766e-1, 2.00000000000000000009e0};
};

// c[0] x^(N-1) + ... + c[N-1], by Horner's rule.
template <class T, std::size_t N>
[[gnu::always_inline]] inline T horner(T x, const T (&c)[N]) {
  T p = c[0];
  for (std::size_t i = 1; i < N; ++i) p = p * x + c[i];
  return p;
}

[[gnu::always_inline]] inline float exp_reduced(float r) { return horner(r, ExpCoefficients::p_float) * r * r + r + 1.0f; }

[[gnu::always_inline]] inline double exp_reduced(double r) {
  const double rr = r * r;
  const double p = r * horner(rr, ExpCoefficients::p_double);
  const double q = horner(rr, ExpCoefficients::q_double);
  return 1.0 + 2.0 * p / (q - p);
}

template <class T>
struct ExpLimits;
template <>
struct ExpLimits<float> {
  static constexpr float hi = 88.72283935546875f;     // above: +inf (e^hi is about FLT_MAX)
  static constexpr float lo = -103.972084045410156f;  // below: 0 (less than half the least subnormal)
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;  // ln2 = ln2_hi + ln2_lo
  static constexpr float log2e = 1.44269504088896341f;
};
template <>
struct ExpLimits<double> {
  static constexpr double hi = 709.782712893383973096;
  static constexpr double lo = -745.133219101941108420;
  static constexpr double ln2_hi = 6.93145751953125e-1, ln2_lo = 1.42860682030941723212e-6;
  static constexpr double log2e = 1.44269504088896340736;
};

template <class T>
[[gnu::always_inline]] inline T vexp(T x) {
  using L = ExpLimits<T>;
  const T xc = std::min(std::max(x, L::lo), L::hi);  // NaN stays NaN (both comparisons fail)
  const T n = round_to_integer(xc * L::log2e);
  const T r = (xc - n * L::ln2_hi) - n * L::ln2_lo;
  // 2^n as 2^n1 2^n2, each within the normal range, so a subnormal result is rounded once.
  const T n1 = round_to_integer(n * T(0.5));
  const T e = exp_reduced(r) * pow2_of_integer(n1) * pow2_of_integer(n - n1);
  return x > L::hi ? std::numeric_limits<T>::infinity() : (x < L::lo ? T(0) : e);
}

}  // namespace xgrad::detail
