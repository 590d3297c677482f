// Peak resident memory of one attention forward + backward through the graph, composed or fused.
// One measurement per process:
//   xgrad_rss --impl composed|fused --t T [--d D] [--dtype float32|float64] [--lean]
// prints one line: impl, dtype, T, d, the RSS before the graph (inputs allocated), the peak, the
// peak's excess over it, and the seconds taken. With --lean, the graph is built, made lean
// (Graph::keep_only: out and the gradients kept), and the peak and seconds are those of one
// replay after it (the kernel's high-water mark, VmHWM, reset through /proc/self/clear_refs).
// tools/setup bench runs it at T = 4096, 8192, 16384.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include <xgrad/xgrad.hpp>

#include "memory.hpp"

namespace {

using xgrad::random_array;
using xgrad::bench::restart_peak;
using xgrad::bench::status_mib;

template <class T>
int measure(xgrad::AttentionImpl impl, std::size_t t, std::size_t d, bool lean) {
  xgrad::Graph<T> g;
  const auto q = g.input("q", random_array<T>({t, d}, 1));
  const auto k = g.input("k", random_array<T>({t, d}, 2));
  const auto v = g.input("v", random_array<T>({t, d}, 3));
  const xt::xarray<T> seed = random_array<T>({t, d}, 4);
  const double before = status_mib("VmRSS");
  auto t0 = std::chrono::steady_clock::now();
  const auto out = xgrad::attention(q, k, v, impl);
  const auto grads = xgrad::grad(out, {q, k, v}, seed);
  if (lean) {
    g.set_output("out", out);
    for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
    g.keep_only({});
    if (!restart_peak()) {
      std::fprintf(stderr, "xgrad_rss: cannot reset the peak RSS (/proc/self/clear_refs)\n");
      return 1;
    }
    t0 = std::chrono::steady_clock::now();
    g.replay();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double peak = status_mib("VmHWM");
  std::printf("impl %s%s  dtype %s  T %zu  d %zu  rss_before_MiB %.1f  peak_rss_MiB %.1f  extra_MiB %.1f  seconds %.2f\n",
              impl == xgrad::AttentionImpl::fused ? "fused" : "composed", lean ? " (lean replay)" : "", xgrad::dtype_name<T>(), t, d, before, peak,
              peak - before, seconds);
  return grads[0].value().size() == t * d ? 0 : 1;
}

int usage() {
  std::fprintf(stderr, "usage: xgrad_rss --impl composed|fused --t T [--d D] [--dtype float32|float64] [--lean]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  std::string impl, dtype = "float32";
  std::size_t t = 0, d = 64;
  bool lean = false;
  for (int i = 1; i < argc; i += 2) {
    if (std::strcmp(argv[i], "--lean") == 0) {
      lean = true;
      --i;
      continue;
    }
    if (i + 1 == argc) return usage();
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
  if (t == 0 || (impl != "composed" && impl != "fused") || (dtype != "float32" && dtype != "float64")) {
    return usage();
  }
  const auto which = impl == "fused" ? xgrad::AttentionImpl::fused : xgrad::AttentionImpl::composed;
  try {
    return dtype == "float32" ? measure<float>(which, t, d, lean) : measure<double>(which, t, d, lean);
  } catch (const xgrad::error& e) {
    std::fprintf(stderr, "xgrad_rss: %s\n", e.what());
    return 1;
  }
}
