// Seeded Gaussian arrays: the one way xgrad, its tests, benchmarks, examples and tool draw them.
// Each array is materialised entry by entry in row-major order (never a lazy xt::random
// expression, which would draw again on every access), from std::mt19937_64 and
// std::normal_distribution<double>, cast to T.
#pragma once

#include <cstdint>
#include <random>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/shape.hpp>

namespace xgrad {

// Draws of N(0, stddev^2) from one seeded stream: arrays drawn one after another continue it.
class NormalStream {
 public:
  explicit NormalStream(std::uint64_t seed, double stddev = 1.0) : m_rng(seed), m_normal(0.0, stddev) {}

  template <class T = double>
  xt::xarray<T> array(const Shape& shape) {
    xt::xarray<T> a = xt::xarray<T>::from_shape(shape);
    for (auto& x : a) x = static_cast<T>(m_normal(m_rng));
    return a;
  }

  // Forgets the draw the distribution keeps back (it draws in pairs), so that the next array
  // starts as a new std::normal_distribution on the same engine would.
  void reset() { m_normal.reset(); }

 private:
  std::mt19937_64 m_rng;
  std::normal_distribution<double> m_normal;
};

// An array of independent N(0, stddev^2) entries from its own seed.
template <class T>
xt::xarray<T> random_array(const Shape& shape, std::uint64_t seed, double stddev = 1.0) {
  return NormalStream(seed, stddev).array<T>(shape);
}

}  // namespace xgrad
