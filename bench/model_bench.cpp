// One training step of a whole model through the public API, timed beside the same step's bare
// GEMMs: examples/char_gpt.hpp's model (replay of the loss and its gradients, gradient clipping,
// AdamW), on random tokens. bench/model_compare.py runs it beside PyTorch.
//
//   xgrad_model_bench --model stack|char_gpt [--dtype float32|float64] [--steps N] [--full]
//                     [--batch B] [--block T] [--profile]
//
// Models: `stack`, the 2-layer causal transformer of issue 19 (B 16, T 64, d 128, 4 heads, MLP
// 512; char_gpt's blocks, with its embeddings and head over 114 tokens), and `char_gpt`, its
// default model (4 layers, B 12, T 64, d 128). The step runs as a lean replay (keep_only the
// loss and the gradients) unless --full. Threads: OPENBLAS_NUM_THREADS, as for all of xgrad.
// Prints one line: model, dtype, threads, batch, block, the median step in ms over --steps
// steps (after 3 not timed), the median of the same step's bare GEMMs (every matmul and linear
// node's products, by the calls they make, on buffers of their sizes), their ratio, and the peak
// RSS of the timed steps less the RSS before the model was built: what the model and its step hold;
// last, the OpenBLAS kernels the GEMMs ran (OPENBLAS_CORETYPE decides them: docs/performance.md).
// --profile then runs --steps more steps with Graph::time_nodes and prints, op by op (forward and
// backward nodes apart), the nodes, the ms a step and the share of the step; "outside the graph"
// is the rest of the step (gradient clipping, AdamW).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <xgrad/ops/kernels/gemm.hpp>

#include "memory.hpp"
#include "timing.hpp"

#include "../examples/char_gpt.hpp"

namespace {

using xgrad::bench::median;
using xgrad::bench::median_seconds;
using xgrad::bench::restart_peak;
using xgrad::bench::status_mib;

using xgrad::Graph;
using xgrad::Var;

struct Product {  // one GEMM call
  bool ta, tb;
  std::size_t m, n, k;
};

// The GEMM calls of every matmul and linear node, as ops/matmul.cpp makes them: one per batch
// index, or one of all rows for a weight without batch axes under an untransposed a (and for
// every linear node).
template <class T>
std::vector<Product> products(const Graph<T>& g) {
  std::vector<Product> calls;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const auto& node = g.node(id);
    if (node.is_leaf()) continue;
    if (node.op->name() == "linear") {
      const xgrad::Shape y = node.shape();
      const std::size_t k = g.node(node.inputs[1].node).shape(node.inputs[1].output)[0];
      calls.push_back({false, false, y.back() ? xgrad::shape_size(y) / y.back() : 0, y.back(), k});
      continue;
    }
    if (node.op->name() != "matmul") continue;
    const xgrad::Json attrs = node.op->attrs();
    const bool ta = attrs.at("transpose_a").get<bool>(), tb = attrs.at("transpose_b").get<bool>();
    const xgrad::Shape a = g.node(node.inputs[0].node).shape(node.inputs[0].output);
    const xgrad::Shape b = g.node(node.inputs[1].node).shape(node.inputs[1].output);
    const xgrad::Shape y = node.shape();
    const std::size_t m = y[y.size() - 2], n = y.back(), k = ta ? a[a.size() - 2] : a.back();
    std::size_t batch = 1;
    for (std::size_t i = 0; i + 2 < y.size(); ++i) batch *= y[i];
    if (b.size() == 2 && !ta) {
      calls.push_back({ta, tb, batch * m, n, k});
    } else {
      for (std::size_t i = 0; i < batch; ++i) calls.push_back({ta, tb, m, n, k});
    }
  }
  return calls;
}

// The time of each op's nodes over `steps` steps, op by op, forward and backward apart.
template <class T>
void print_profile(const Graph<T>& g, const std::vector<double>& seconds, std::size_t steps, double step_ms) {
  struct Row {
    std::size_t nodes = 0;
    double ms = 0;
  };
  std::map<std::string, Row> rows;
  double nodes_ms = 0;
  for (std::size_t id = 0; id < std::min(seconds.size(), g.size()); ++id) {
    const auto& n = g.node(id);
    if (n.is_leaf() || seconds[id] == 0) continue;
    Row& r = rows[n.op_name() + (n.in_backward() ? " (backward)" : "")];
    ++r.nodes;
    r.ms += 1e3 * seconds[id] / static_cast<double>(steps);
    nodes_ms += 1e3 * seconds[id] / static_cast<double>(steps);
  }
  std::vector<std::pair<std::string, Row>> sorted(rows.begin(), rows.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  std::printf("%-28s %6s %10s %7s\n", "op", "nodes", "ms/step", "share");
  for (const auto& [name, r] : sorted) {
    std::printf("%-28s %6zu %10.3f %6.1f%%\n", name.c_str(), r.nodes, r.ms, 100 * r.ms / step_ms);
  }
  std::printf("%-28s %6s %10.3f %6.1f%%\n", "outside the graph", "", step_ms - nodes_ms, 100 * (step_ms - nodes_ms) / step_ms);
}

template <class T>
int run(const std::string& model, char_gpt::Config c, std::size_t batch, std::size_t steps, bool lean, bool profile) {
  const double baseline = status_mib("VmRSS");  // before the model: the program, its libraries, OpenBLAS
  c.vocab = 114;
  Graph<T> g;
  const auto m = char_gpt::build_model(g, c, batch, 1);
  char_gpt::Trainer<T> trainer(m, 0.1);
  const std::vector<Product> calls = products(g);  // while every node holds its value (and shape)
  if (lean) {  // the replay keeps what the step reads: the loss and the gradients
    std::vector<Var<T>> keep = trainer.grads();
    keep.push_back(m.loss);
    g.keep_only(keep);
  }
  std::uint64_t state = 42;
  const auto next = [&] { return (state = state * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  xt::xarray<std::int64_t> x = xt::zeros<std::int64_t>({batch, c.block}), y = x;
  const auto feed_random = [&] {  // a batch of random tokens and targets
    for (auto& v : x) v = static_cast<std::int64_t>(next() % c.vocab);
    for (auto& v : y) v = static_cast<std::int64_t>(next() % c.vocab);
    char_gpt::feed(g, m, x, y);
  };
  const auto clock = [] { return std::chrono::steady_clock::now(); };
  std::vector<double> step_ms, gemm_ms;
  std::size_t biggest = 1;
  for (const auto& p : calls) biggest = std::max({biggest, p.m * p.k, p.k * p.n, p.m * p.n});
  std::vector<T> bufa(biggest, T(0.5)), bufb(biggest, T(0.25)), bufc(biggest);
  for (std::size_t s = 0; s < steps + 3; ++s) {
    feed_random();
    const auto t0 = clock();
    trainer.step(1e-3);
    const auto t1 = clock();
    for (const auto& p : calls) {
      xgrad::detail::gemm(p.ta, p.tb, p.m, p.n, p.k, T(1), bufa.data(), p.ta ? p.m : p.k, bufb.data(),
                          p.tb ? p.k : p.n, T(0), bufc.data(), p.n);
    }
    const auto t2 = clock();
    if (s == 2) restart_peak();  // after the first steps: every buffer of a lean replay exists
    if (s >= 3) {
      step_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      gemm_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
    }
  }
  const double step = median(step_ms), gemms = median(gemm_ms);
  std::printf("model %s  dtype %s  threads %d  batch %zu  block %zu  %s  step_ms %.3f  gemm_ms %.3f  ratio %.3f  "
              "gemm_calls %zu  step_peak_MiB %.1f  kernels %s\n",
              model.c_str(), sizeof(T) == 4 ? "float32" : "float64", xgrad::blas_info().threads, batch, c.block,
              lean ? "lean" : "full", step, gemms, step / gemms, calls.size(), status_mib("VmHWM") - baseline,
              xgrad::blas_info().core.c_str());
  if (profile) {
    std::vector<double> seconds;
    double total_ms = 0;
    g.time_nodes(&seconds);
    for (std::size_t s = 0; s < steps; ++s) {
      feed_random();
      const auto t0 = clock();
      trainer.step(1e-3);
      total_ms += std::chrono::duration<double, std::milli>(clock() - t0).count();
    }
    g.time_nodes(nullptr);
    print_profile(g, seconds, steps, total_ms / static_cast<double>(steps));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  std::string model = "stack", dtype = "float32";
  std::size_t steps = 20, batch = 0, block = 0;
  bool lean = true, profile = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--model" && has_value) {
      model = argv[++i];
    } else if (a == "--dtype" && has_value) {
      dtype = argv[++i];
    } else if (a == "--steps" && has_value) {
      steps = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--batch" && has_value) {
      batch = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--block" && has_value) {
      block = std::strtoul(argv[++i], nullptr, 10);
    } else if (a == "--full") {
      lean = false;
    } else if (a == "--profile") {
      profile = true;
    } else {
      std::fprintf(stderr, "usage: xgrad_model_bench --model stack|char_gpt [--dtype float32|float64] [--steps N] "
                           "[--full] [--batch B] [--block T] [--profile]\n");
      return 2;
    }
  }
  char_gpt::Config c;  // char_gpt's defaults: 4 layers, 4 heads, d 128, block 64
  std::size_t b = 12;
  if (model == "stack") {
    c.layers = 2;
    b = 16;
  } else if (model != "char_gpt") {
    std::fprintf(stderr, "xgrad_model_bench: --model stack|char_gpt, not '%s'\n", model.c_str());
    return 2;
  }
  if (block) c.block = block;
  if (batch) b = batch;
  if (steps == 0 || (dtype != "float32" && dtype != "float64")) {
    std::fprintf(stderr, "xgrad_model_bench: --steps must be >= 1 and --dtype float32|float64\n");
    return 2;
  }
  return dtype == "float64" ? run<double>(model, c, b, steps, lean, profile) : run<float>(model, c, b, steps, lean, profile);
}
