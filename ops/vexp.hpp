// exp for the row loops of softmax and log_softmax: branch-free, so that a loop of it vectorises
// (std::exp is a scalar library call, and a scalar exp loop alone makes attention 1.5x slower
// than its matrix products). Cephes' method: x = n ln2 + r with |r| <= ln2 / 2, a polynomial
// (float) or Pade (double) approximation of e^r, and 2^n assembled from bits.
// Accuracy, tested against std::exp over the whole range: within 1 ulp for float, 2 ulp for
// double, exact 0 below the underflow threshold, +inf above the overflow one, subnormal results
// rounded once; exp(-inf) = 0, exp(+inf) = +inf, exp(NaN) = NaN.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

namespace xgrad::detail {

// 2^n for an integer-valued n of an exponent's range, from the bits of n + 1.5 * 2^(mantissa bits).
inline float pow2_of_integer(float n) {
  const float t = n + 12582912.0f;  // 1.5 * 2^23: n sits in the low mantissa bits
  std::uint32_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits = (bits - 0x4B400000u + 127u) << 23;
  float p;
  std::memcpy(&p, &bits, sizeof p);
  return p;
}

inline double pow2_of_integer(double n) {
  const double t = n + 6755399441055744.0;  // 1.5 * 2^52
  std::uint64_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  bits = (bits - 0x4338000000000000u + 1023u) << 52;
  double p;
  std::memcpy(&p, &bits, sizeof p);
  return p;
}

// n rounded to the nearest integer (ties to even) by adding and removing 1.5 * 2^mantissa bits.
inline float round_to_integer(float x) { return (x + 12582912.0f) - 12582912.0f; }
inline double round_to_integer(double x) { return (x + 6755399441055744.0) - 6755399441055744.0; }

// e^r on |r| <= ln2 / 2 (a little more for rounding of n), as the Cephes library computes it.
inline float exp_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return p * r * r + r + 1.0f;
}

inline double exp_reduced(double r) {
  const double rr = r * r;
  const double p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr + 9.99999999999999999910e-1);
  const double q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr + 2.27265548208155028766e-1) * rr +
                   2.00000000000000000009e0;
  return 1.0 + 2.0 * p / (q - p);
}

template <class T>
struct ExpLimits;
template <>
struct ExpLimits<float> {
  static constexpr float hi = 88.72283935546875f;     // above: +inf (e^hi is about FLT_MAX)
  static constexpr float lo = -103.972084045410156f;  // below: 0 (less than half the least subnormal)
  static constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
};
template <>
struct ExpLimits<double> {
  static constexpr double hi = 709.782712893383973096;
  static constexpr double lo = -745.133219101941108420;
  static constexpr double ln2_hi = 6.93145751953125e-1, ln2_lo = 1.42860682030941723212e-6;
};

template <class T>
inline T vexp(T x) {
  using L = ExpLimits<T>;
  const T xc = std::min(std::max(x, L::lo), L::hi);  // NaN stays NaN (both comparisons fail)
  const T n = round_to_integer(xc * T(1.44269504088896340736));
  const T r = (xc - n * L::ln2_hi) - n * L::ln2_lo;
  // 2^n as 2^n1 2^n2, each within the normal range, so a subnormal result is rounded once.
  const T n1 = round_to_integer(n * T(0.5));
  const T e = exp_reduced(r) * pow2_of_integer(n1) * pow2_of_integer(n - n1);
  return x > L::hi ? std::numeric_limits<T>::infinity() : (x < L::lo ? T(0) : e);
}

}  // namespace xgrad::detail
