// Random inputs of the benchmark programs: a rows x cols matrix of standard normal entries.
#pragma once

#include <cstdint>
#include <random>

#include <xtensor/xarray.hpp>

namespace xgrad::bench {

template <class T>
xt::xarray<T> random(std::size_t rows, std::size_t cols, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  xt::xarray<T> a = xt::xarray<T>::from_shape({rows, cols});
  for (auto& x : a) x = static_cast<T>(normal(rng));
  return a;
}

}  // namespace xgrad::bench
