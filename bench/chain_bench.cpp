// Linear in the node count: a chain of N softmax nodes with its backward pass, and one of 4N,
// timed for what once grew as N^2 (issue 15): a lean replay after keep_only (spare buffers were
// searched and erased in a list), the softmax diagnostics (each softmax searched every later
// node for its softmax_vjp, as xgrad inspect runs them after an import), and a JSON import. Prints, per task, the median seconds at N and
// 4N and their ratio: about 4 for linear work, 16 for quadratic.
//   xgrad_chain_bench [--n N] [--runs R]      (defaults 20000 and 5)
// tools/setup bench runs it; a ctest runs it once at a small N (no time is checked there).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <xgrad/xgrad.hpp>

#include "timing.hpp"

namespace {

using xgrad::bench::median;
using xgrad::bench::median_seconds;

struct Chain {
  xgrad::Graph<double> g;
  std::string json;
};

// x (4, 8) -> softmax -> softmax -> ... (n nodes), y's gradient w.r.t. x, exported with its inputs.
void build(Chain& c, std::size_t n) {
  auto x = c.g.input("x", xt::xarray<double>(xt::ones<double>({4, 8})));
  xgrad::Var<double> y = x;
  for (std::size_t i = 0; i < n; ++i) y = xgrad::softmax(y);
  c.g.set_output("y", y);
  c.g.set_grad("x", xgrad::grad(xgrad::sum(y), {x})[0]);
  c.json = xgrad::to_json(c.g, xgrad::ExportValues::inputs).dump();
}

std::size_t positive(const char* option, const char* text) {
  char* end = nullptr;
  const unsigned long v = std::strtoul(text, &end, 10);
  if (!*text || *end || v == 0 || text[0] == '-') {
    std::fprintf(stderr, "xgrad_chain_bench: %s needs a positive integer, not '%s'\n", option, text);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  std::size_t n = 20000, runs = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--n" || a == "--runs") && i + 1 < argc) {
      (a == "--n" ? n : runs) = positive(argv[i], argv[i + 1]);
      ++i;
    } else {
      std::fprintf(stderr, "usage: xgrad_chain_bench [--n N] [--runs R]\n");
      return 2;
    }
  }
  Chain small, large;
  build(small, n);
  build(large, 4 * n);
  for (Chain* c : {&small, &large}) {
    c->g.keep_only({});
    c->g.replay();  // the first lean replay makes the buffers; the timed ones reuse them
  }
  struct Task {
    const char* name;
    std::function<void(Chain&)> run;
  };
  const Task tasks[] = {
      {"lean replay", [](Chain& c) { c.g.replay(); }},
      {"json import", [](Chain& c) { xgrad::graph_from_json<double>(c.json); }},
      {"inspect", [](Chain& c) {  // import and diagnostics, as xgrad inspect
         auto g = xgrad::graph_from_json<double>(c.json);
         xgrad::softmax_diagnostics(*g, 0.99, false);
       }},
  };
  std::printf("chain of N = %zu and 4N softmax nodes with their backward pass (%zu and %zu nodes), median of %zu\n",
              n, small.g.size(), large.g.size(), runs);
  for (const Task& t : tasks) {
    const double a = median_seconds(runs, [&] { t.run(small); });
    const double b = median_seconds(runs, [&] { t.run(large); });
    std::printf("%-12s N: %.4f s  4N: %.4f s  ratio %.2f (4 is linear, 16 quadratic)\n", t.name, a, b, b / a);
  }
  return 0;
}
