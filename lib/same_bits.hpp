// Bit-for-bit equality of values and arrays, under the two NaN policies xgrad needs.
//
// same_bits: the same bytes. A NaN equals only a NaN of the same sign and payload, and -0.0
//   differs from 0.0. For values computed twice in memory (a replay, a lean replay, a second
//   backward pass, a computation split over threads), which must repeat exactly.
// same_bits_any_nan: the same bytes, except that any NaN equals any NaN (-0.0 still differs from
//   0.0). For values that went through the JSON graph format or a JSON array file, which store
//   every NaN as "nan" and so keep no sign or payload.
#pragma once

#include <cmath>
#include <cstring>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/error.hpp>

namespace xgrad {

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
bool same_bits_any_nan(T a, T b) {
  return std::isnan(a) ? std::isnan(b) : same_bits(a, b);
}

// The same shape and, element by element, the same bits.
template <class T>
bool same_bits(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  // No memcmp of an empty array: its data() may be null, which memcmp must not be given.
  return shapes_equal(a.shape(), b.shape()) &&
         (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
bool same_bits_any_nan(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  if (!shapes_equal(a.shape(), b.shape())) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_bits_any_nan(a.data()[i], b.data()[i])) return false;
  }
  return true;
}

}  // namespace xgrad
