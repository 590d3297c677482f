// layer_norm beside rms_norm and rope: the time per element of each one's forward, and of forward
// and backward, over the last axis of activations (B, T, d) at the shapes they normalise (rope:
// rotates, at the positions 0 .. T - 1: a table of sines and cosines per position, then one pass).
//
// Benchmarks, named norm/<op>/<mode>/<dtype>/<B>x<T>x<d>/threads:1:
//   fwd      replay of a graph holding the norm node (layer_norm(x, gamma, beta) or rms_norm(x, gamma)),
//            or rope(x, rope_positions(g, T))
//   fwd_bwd  replay of a graph holding it and grad(y, {x, gamma[, beta]}, u): the one fused VJP node
// Shapes: char_gpt's activations (12, 64, 128) (examples/char_gpt, bench/model_bench's batch);
// its per-head q and k (12 x 4 heads, 64, 32), what a QK-norm normalises; GPT-2 small's (8, 256, 768).
// Counter `per_element` = the CPU time of one replay over the elements of x (CPU time: on a shared
// machine it varies less than the wall time). One thread (xgrad's pool follows OpenBLAS's count).
// Run with repetitions for medians:
//   build/bench/xgrad_norm_bench --benchmark_repetitions=9 --benchmark_report_aggregates_only=true
#include <string>

#include <benchmark/benchmark.h>

#include <xgrad/xgrad.hpp>

#include "main.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

struct Rows {
  std::size_t b, t, d;
  std::string str() const { return std::to_string(b) + "x" + std::to_string(t) + "x" + std::to_string(d); }
};

enum class Norm { layer, rms, rope };

template <class T>
void run(benchmark::State& state, Rows s, Norm norm, bool backward) {
  openblas_set_num_threads(1);
  xgrad::Graph<T> g;
  const auto x = g.input("x", xgrad::random_array<T>({s.b, s.t, s.d}, 1));
  const auto gamma = g.parameter("gamma", xgrad::random_array<T>({s.d}, 2));
  const auto beta = g.parameter("beta", xgrad::random_array<T>({s.d}, 3));
  const auto y = norm == Norm::layer ? xgrad::layer_norm(x, gamma, beta)
                 : norm == Norm::rms ? xgrad::rms_norm(x, gamma)
                                     : xgrad::rope(x, xgrad::rope_positions(g, s.t));
  if (backward) {
    const auto wrt = norm == Norm::layer ? std::vector<xgrad::Var<T>>{x, gamma, beta}
                     : norm == Norm::rms ? std::vector<xgrad::Var<T>>{x, gamma}
                                         : std::vector<xgrad::Var<T>>{x};
    const auto grads = xgrad::grad(y, wrt, xgrad::random_array<T>({s.b, s.t, s.d}, 4));
    benchmark::DoNotOptimize(grads.size());
  }
  g.replay();  // untimed: the buffers are written once before the timed replays
  for (auto _ : state) {
    g.replay();
    benchmark::ClobberMemory();
  }
  const double elements = double(s.b) * double(s.t) * double(s.d);
  state.counters["per_element"] =
      benchmark::Counter(elements, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

template <class T>
void register_all(const char* dtype) {
  for (const Rows& s : {Rows{12, 64, 128}, Rows{48, 64, 32}, Rows{8, 256, 768}}) {
    for (const bool backward : {false, true}) {
      for (const Norm norm : {Norm::layer, Norm::rms, Norm::rope}) {
        const char* op = norm == Norm::layer ? "layer_norm" : norm == Norm::rms ? "rms_norm" : "rope";
        const std::string name = std::string("norm/") + op + "/" +
                                 (backward ? "fwd_bwd" : "fwd") + "/" + dtype + "/" + s.str() + "/threads:1";
        benchmark::RegisterBenchmark(name.c_str(), [s, norm, backward](benchmark::State& st) { run<T>(st, s, norm, backward); })
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return xgrad::bench::run_benchmarks(argc, argv, register_all<float>, register_all<double>);
}
