// The benchmarks' one way to time: the median of repeated runs (noisy machines: medians, not means).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace xgrad::bench {

// The median of v (0 for none).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// The median wall time of `runs` calls of f, in seconds.
inline double median_seconds(std::size_t runs, const std::function<void()>& f) {
  std::vector<double> t;
  for (std::size_t i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(t);
}

}  // namespace xgrad::bench
