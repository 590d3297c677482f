// Peak resident memory of one attention forward + backward through the graph, composed or fused.
// One measurement per process (the kernel's high-water mark, VmHWM, never goes down):
//   xgrad_rss --impl composed|fused --t T [--d D] [--dtype float32|float64]
// prints one line: impl, dtype, T, d, the RSS before the graph (inputs allocated), the peak, the
// peak's excess over it, and the seconds taken. tools/setup bench runs it at T = 4096, 8192, 16384.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include <xgrad/xgrad.hpp>

#include "random_matrix.hpp"

namespace {

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM").
double status_mib(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string key = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) == 0) return std::stod(line.substr(key.size())) / 1024.0;  // kB
  }
  return -1;
}

using xgrad::bench::random;

template <class T>
int measure(xgrad::AttentionImpl impl, std::size_t t, std::size_t d) {
  xgrad::Graph<T> g;
  const auto q = g.input("q", random<T>(t, d, 1));
  const auto k = g.input("k", random<T>(t, d, 2));
  const auto v = g.input("v", random<T>(t, d, 3));
  const xt::xarray<T> seed = random<T>(t, d, 4);
  const double before = status_mib("VmRSS");
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = xgrad::attention(q, k, v, impl);
  const auto grads = xgrad::grad(out, {q, k, v}, seed);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double peak = status_mib("VmHWM");
  std::printf("impl %s  dtype %s  T %zu  d %zu  rss_before_MiB %.1f  peak_rss_MiB %.1f  extra_MiB %.1f  seconds %.2f\n",
              impl == xgrad::AttentionImpl::fused ? "fused" : "composed", xgrad::dtype_name<T>(), t, d, before, peak,
              peak - before, seconds);
  return grads[0].value().size() == t * d ? 0 : 1;
}

int usage() {
  std::fprintf(stderr, "usage: xgrad_rss --impl composed|fused --t T [--d D] [--dtype float32|float64]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string impl, dtype = "float32";
  std::size_t t = 0, d = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--impl") {
      impl = value;
    } else if (flag == "--dtype") {
      dtype = value;
    } else if (flag == "--t" || flag == "--d") {
      char* end = nullptr;
      const unsigned long n = std::strtoul(value.c_str(), &end, 10);
      if (*end != '\0' || n == 0 || value[0] == '-') return usage();
      (flag == "--t" ? t : d) = n;
    } else {
      return usage();
    }
  }
  if (argc % 2 == 0 || t == 0 || (impl != "composed" && impl != "fused") || (dtype != "float32" && dtype != "float64")) {
    return usage();
  }
  const auto which = impl == "fused" ? xgrad::AttentionImpl::fused : xgrad::AttentionImpl::composed;
  try {
    return dtype == "float32" ? measure<float>(which, t, d) : measure<double>(which, t, d);
  } catch (const xgrad::error& e) {
    std::fprintf(stderr, "xgrad_rss: %s\n", e.what());
    return 1;
  }
}
