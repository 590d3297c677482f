// Attention through the xgrad graph beside the bare GEMMs of its products, in one process.
//
// Benchmarks, named xgrad/<mode>/<dtype>/<T_q>x<T_k>x<d_k>x<d_v>/threads:<n>:
//   fwd            replay of a graph holding attention's forward nodes
//   fwd_bwd        replay of a graph holding the forward nodes and grad(out, {q, k, v}, g)
//   build_fwd_bwd  a fresh graph built, run and differentiated per call (the documented example)
//   fused_fwd      fwd with attention(q, k, v, AttentionImpl::fused): one flash_attention node
//   fused_fwd_bwd  fwd_bwd with the fused op (its backward: one flash_attention_vjp node)
//   causal_fwd, causal_fwd_bwd, window_fwd, window_fwd_bwd, softcap_fwd_bwd
//                  the same with the fused op's variants (T >= 1024): the causal mask, a causal
//                  sliding window of 128 keys, the causal mask with a soft-cap of 30 (tanh per
//                  weight); their ratio counter is still against the full GEMMs
//   lean_fwd       fwd of a lean graph (Graph::keep_only: only out is kept; the scores' buffer
//                  becomes the weights')
//   lean_fwd_bwd   fwd_bwd of a lean graph (out and the 3 gradients kept; 2 T x T buffers)
//   gemms_fwd      the 2 forward GEMMs alone (q k^T, w v), into preallocated buffers
//   gemms_fwd_bwd  the 6 GEMMs of forward and backward (+ g v^T, w^T g, dS k, dS^T q)
//   loop_fwd       the floor of a materialising implementation, not a graph: the 2 forward GEMMs
//                  of gemms_fwd (the scale as the GEMM's alpha) with softmax in place between
//                  them, through the softmax node's own row function (the "C loop")
//   loop_fwd_bwd   the same with backward: the 6 GEMMs, softmax_vjp in place over the weights
// Counters: `ratio` = median time of the benchmark over the median time of its GEMMs, both timed
// alternately in the same iterations (so noise hits both); `GFLOPs` (flops of the GEMMs over the
// benchmark's time); `peak_extra_M` = the peak of bytes live on the heap during one fresh build +
// forward (+ backward) beyond the inputs, in units of M = one T_q x T_k array; for the lean
// modes, the peak during the first replay after keep_only (the build itself holds every value).
// Run through tools/setup bench, or build/bench/xgrad_bench --benchmark_filter=...
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <set>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <xtensor-blas/xblas.hpp>
#include <xtensor/xmath.hpp>

#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/softmax_vjp.hpp>
#include <xgrad/xgrad.hpp>

#include "main.hpp"
#include "timing.hpp"
#include "../tests/heap_count.hpp"


extern "C" void openblas_set_num_threads(int);

namespace {

using xgrad::bench::median;
using xgrad::bench::median_seconds;
// Heap accounting (every operator new and delete of the process), for peak_extra_M.
using xgrad::heap::current;
using xgrad::heap::peak;

}  // namespace

namespace {

struct Shape4 {
  std::size_t t_q, t_k, d_k, d_v;
  std::string str() const {
    return std::to_string(t_q) + "x" + std::to_string(t_k) + "x" + std::to_string(d_k) + "x" + std::to_string(d_v);
  }
  double flops(bool backward) const {  // 2 T_q T_k (d_k + d_v) forward; 3x that with backward
    return (backward ? 6.0 : 2.0) * double(t_q) * double(t_k) * double(d_k + d_v);
  }
};

using xgrad::random_array;

// The bare GEMMs: the same products with the same flags, into buffers allocated once; run_loop
// adds the row passes between them (the C loop).
template <class T>
class Gemms {
 public:
  explicit Gemms(const Shape4& s)
      : m_s(s), q(random_array<T>({s.t_q, s.d_k}, 1)), k(random_array<T>({s.t_k, s.d_k}, 2)), v(random_array<T>({s.t_k, s.d_v}, 3)),
        g(random_array<T>({s.t_q, s.d_v}, 4)), w(xt::xarray<T>::from_shape({s.t_q, s.t_k})), dw(w), out(g), dq(q), dk(k), dv(v) {}

  void run(bool backward) { products(backward, false); }

  // The same products with the row passes between them, in place: softmax over the scores, and
  // dS = w (dW - rowsum(dW w)) over the weights once dv is computed. The scale is the alpha of
  // the first GEMM and of the last two.
  void run_loop(bool backward) { products(backward, true); }

  // The largest difference of out (and, with backward, of the gradients) from the graph's, over
  // the largest magnitude of the graph's.
  double relative_error(const xgrad::Graph<T>& graph, bool backward) const {
    double worst = 0;
    const auto compare = [&](const xt::xarray<T>& mine, xgrad::Slot at) {
      const xt::xarray<T>& theirs = graph.node(at.node).value(at.output);
      worst = std::max(worst, double(xt::amax(xt::abs(mine - theirs))()) / double(xt::amax(xt::abs(theirs))()));
    };
    compare(out, graph.outputs().at("out"));
    if (backward) {
      compare(dq, graph.grads().at("q"));
      compare(dk, graph.grads().at("k"));
      compare(dv, graph.grads().at("v"));
    }
    return worst;
  }

 private:
  void products(bool backward, bool loop) {
    const int tq = int(m_s.t_q), tk = int(m_s.t_k), dkk = int(m_s.d_k), dvv = int(m_s.d_v);
    const T a = loop ? T(1 / std::sqrt(double(m_s.d_k))) : T(1);
    gemm(false, true, tq, tk, dkk, a, q.data(), dkk, k.data(), dkk, w.data(), tk);      // S = q k^T
    if (loop) rows(false);
    gemm(false, false, tq, dvv, tk, 1, w.data(), tk, v.data(), dvv, out.data(), dvv);   // out = w v
    if (!backward) return;
    gemm(false, true, tq, tk, dvv, 1, g.data(), dvv, v.data(), dvv, dw.data(), tk);     // dW = g v^T
    gemm(true, false, tk, dvv, tq, 1, w.data(), tk, g.data(), dvv, dv.data(), dvv);     // dv = w^T g
    if (loop) rows(true);
    const T* ds = loop ? w.data() : dw.data();
    gemm(false, false, tq, dkk, tk, a, ds, tk, k.data(), dkk, dq.data(), dkk);          // dq = dS k
    gemm(true, false, tk, dkk, tq, a, ds, tk, q.data(), dkk, dk.data(), dkk);           // dk = dS^T q
  }
  // The rows of softmax and softmax_vjp, as their nodes compute them and split over xgrad's pool
  // as they split theirs (with 2 threads set, from T_q T_k = 2^16), in place.
  void rows(bool vjp) {
    const std::size_t n = m_s.t_k;
    xgrad::detail::parallel_rows(m_s.t_q, n, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        T* r = w.data() + i * n;
        if (vjp) {
          xgrad::detail::softmax_vjp_row(r, dw.data() + i * n, r, n, 1);
        } else {
          xgrad::detail::softmax_row(r, r, n, 1);
        }
      }
    });
  }
  static void gemm(bool ta, bool tb, int m, int n, int kk, T alpha, const T* a, int lda, const T* b, int ldb, T* c,
                   int ldc) {
    cxxblas::gemm(cxxblas::RowMajor, ta ? cxxblas::Trans : cxxblas::NoTrans, tb ? cxxblas::Trans : cxxblas::NoTrans,
                  m, n, kk, alpha, a, lda, b, ldb, T(0), c, ldc);
  }
  Shape4 m_s;
  xt::xarray<T> q, k, v, g, w, dw, out, dq, dk, dv;
};

// A graph of attention on random q, k, v; with backward, grad(out, {q, k, v}, g) too. Lean:
// keep_only out and the gradients.
// A variant of the fused op: the masks and the soft-cap of flash_attention.
struct Variant {
  bool causal = false;
  std::size_t window = 0;
  double softcap = 0;
  bool any() const { return causal || window > 0 || softcap > 0; }
};

template <class T>
struct AttentionGraph {
  xgrad::Graph<T> graph;
  AttentionGraph(const Shape4& s, bool backward, xgrad::AttentionImpl impl, bool lean = false, Variant variant = {}) {
    const auto q = graph.input("q", random_array<T>({s.t_q, s.d_k}, 1));
    const auto k = graph.input("k", random_array<T>({s.t_k, s.d_k}, 2));
    const auto v = graph.input("v", random_array<T>({s.t_k, s.d_v}, 3));
    const double scale = 1 / std::sqrt(double(s.d_k));
    const auto out = variant.any() ? xgrad::flash_attention(q, k, v, scale, xgrad::FlashMask<T>{variant.causal, {}, variant.window},
                                                            variant.softcap).out
                                   : xgrad::attention(q, k, v, impl);
    graph.set_output("out", out);
    if (backward) {
      const auto grads = xgrad::grad(out, {q, k, v}, random_array<T>({s.t_q, s.d_v}, 4));
      for (std::size_t i = 0; i < 3; ++i) graph.set_grad(std::string(1, "qkv"[i]), grads[i]);
    }
    if (lean) graph.keep_only({});
  }
};

// Bytes live at the peak of one fresh build + run (+ backward), beyond those live before; lean:
// at the peak of the first replay after keep_only.
template <class T>
double peak_extra_m(const Shape4& s, bool backward, xgrad::AttentionImpl impl, bool lean) {
  xt::xarray<T> inputs[] = {random_array<T>({s.t_q, s.d_k}, 1), random_array<T>({s.t_k, s.d_k}, 2), random_array<T>({s.t_k, s.d_v}, 3)};
  const std::size_t before = current.load();
  peak = before;
  {
    AttentionGraph<T> a(s, backward, impl, lean);
    if (lean) {
      peak = current.load();
      a.graph.replay();
    }
    benchmark::DoNotOptimize(a.graph.size());
  }
  // The graph's copies of q, k, v and g are inputs, not extra: subtract them.
  const double inputs_bytes = double(sizeof(T)) * double(s.t_q * s.d_k + s.t_k * s.d_k + s.t_k * s.d_v +
                                                         (backward ? s.t_q * s.d_v : 0));
  return (double(peak.load() - before) - inputs_bytes) / (double(sizeof(T)) * double(s.t_q) * double(s.t_k));
}

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
enum class Mode {
  fwd, fwd_bwd, build_fwd_bwd, fused_fwd, fused_fwd_bwd, lean_fwd, lean_fwd_bwd,
  gemms_fwd, gemms_fwd_bwd, loop_fwd, loop_fwd_bwd,
  causal_fwd, causal_fwd_bwd, window_fwd, window_fwd_bwd, softcap_fwd_bwd
};

// The fused op's variant that a mode times (none for the other modes).
Variant variant_of(Mode m) {
  switch (m) {
    case Mode::causal_fwd:
    case Mode::causal_fwd_bwd: return {true, 0, 0};
    case Mode::window_fwd:
    case Mode::window_fwd_bwd: return {true, 128, 0};
    case Mode::softcap_fwd_bwd: return {true, 0, 30};
    default: return {};
  }
}

template <class T>
void run(benchmark::State& state, Shape4 s, Mode mode, int threads) {
  openblas_set_num_threads(threads);
  const Variant variant = variant_of(mode);
  const bool backward = mode != Mode::fwd && mode != Mode::fused_fwd && mode != Mode::lean_fwd &&
                        mode != Mode::gemms_fwd && mode != Mode::loop_fwd && mode != Mode::causal_fwd &&
                        mode != Mode::window_fwd;
  const bool lean = mode == Mode::lean_fwd || mode == Mode::lean_fwd_bwd;
  const bool replayed = mode == Mode::fwd || mode == Mode::fwd_bwd || mode == Mode::fused_fwd ||
                        mode == Mode::fused_fwd_bwd || lean || variant.any();
  const auto impl = mode == Mode::fused_fwd || mode == Mode::fused_fwd_bwd ? xgrad::AttentionImpl::fused
                                                                           : xgrad::AttentionImpl::composed;
  // The steady state of a training loop: one untimed replay (replayed modes) and one untimed
  // reference call, just before the timed ones. A lean graph's first replay after keep_only
  // allocates its shared buffers afresh, and the reference's first call writes its output
  // buffers for the first time; at T = 4096 their page faults (15 us per 4 KiB page here) would
  // dominate the two or three timed iterations. The reference's call comes last: measured on this VM, the first GEMMs on
  // buffers left untouched while the graph was built and released its values (about 0.5 GiB at
  // T = 4096 in float64) ran 2.2x slower, without a page fault, and the next ones at full speed.
  Gemms<T> gemms(s);
  std::unique_ptr<Gemms<T>> looped;  // its own buffers: the loop writes its weights over the scores
  if (mode == Mode::loop_fwd || mode == Mode::loop_fwd_bwd) {
    looped = std::make_unique<Gemms<T>>(s);
    // A floor that computed something else would be no floor: check it against the graph, once
    // per benchmark (Google Benchmark calls this function several times).
    static std::set<std::string> checked;
    const std::string key = std::to_string(sizeof(T)) + (backward ? "/bwd/" : "/fwd/") + s.str();
    if (!checked.count(key)) {
      looped->run_loop(backward);
      const double error = looped->relative_error(AttentionGraph<T>(s, backward, impl).graph, backward);
      if (!(error <= (sizeof(T) == 4 ? 1e-4 : 1e-10))) {
        state.SkipWithError(("the loop differs from the graph: relative error " + std::to_string(error)).c_str());
        return;
      }
      checked.insert(key);
    }
    looped->run_loop(backward);  // untimed, like the graph's replay below
  }
  Gemms<T>& loop = looped ? *looped : gemms;
  std::unique_ptr<AttentionGraph<T>> graph;
  if (replayed) {
    graph = std::make_unique<AttentionGraph<T>>(s, backward, impl, lean, variant);
    graph->graph.replay();
  }
  gemms.run(backward);
  std::vector<double> own, reference;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    switch (mode) {
      case Mode::fwd:
      case Mode::fwd_bwd:
      case Mode::fused_fwd:
      case Mode::fused_fwd_bwd:
      case Mode::lean_fwd:
      case Mode::lean_fwd_bwd:
      case Mode::causal_fwd:
      case Mode::causal_fwd_bwd:
      case Mode::window_fwd:
      case Mode::window_fwd_bwd:
      case Mode::softcap_fwd_bwd: graph->graph.replay(); break;
      case Mode::build_fwd_bwd: {
        AttentionGraph<T> fresh(s, true, impl);
        benchmark::DoNotOptimize(fresh.graph.size());
        break;
      }
      case Mode::gemms_fwd:
      case Mode::gemms_fwd_bwd: gemms.run(backward); break;
      case Mode::loop_fwd:
      case Mode::loop_fwd_bwd: loop.run_loop(backward); break;
    }
    const auto t1 = Clock::now();
    gemms.run(backward);
    const auto t2 = Clock::now();
    own.push_back(seconds(t0, t1));
    reference.push_back(seconds(t1, t2));
    state.SetIterationTime(seconds(t0, t1));
  }
  state.counters["ratio"] = median(own) / median(reference);
  state.counters["GFLOPs"] = s.flops(backward) / median(own) / 1e9;
  if ((replayed && !variant.any()) || mode == Mode::build_fwd_bwd) {
    state.counters["peak_extra_M"] = peak_extra_m<T>(s, backward, impl, lean);
  }
}

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::fwd: return "fwd";
    case Mode::fwd_bwd: return "fwd_bwd";
    case Mode::build_fwd_bwd: return "build_fwd_bwd";
    case Mode::fused_fwd: return "fused_fwd";
    case Mode::fused_fwd_bwd: return "fused_fwd_bwd";
    case Mode::lean_fwd: return "lean_fwd";
    case Mode::lean_fwd_bwd: return "lean_fwd_bwd";
    case Mode::gemms_fwd: return "gemms_fwd";
    case Mode::gemms_fwd_bwd: return "gemms_fwd_bwd";
    case Mode::loop_fwd: return "loop_fwd";
    case Mode::loop_fwd_bwd: return "loop_fwd_bwd";
    case Mode::causal_fwd: return "causal_fwd";
    case Mode::causal_fwd_bwd: return "causal_fwd_bwd";
    case Mode::window_fwd: return "window_fwd";
    case Mode::window_fwd_bwd: return "window_fwd_bwd";
    case Mode::softcap_fwd_bwd: return "softcap_fwd_bwd";
  }
  return "";
}

template <class T>
void register_all(const char* dtype) {
  const Shape4 shapes[] = {{2, 2, 1, 2},        {128, 128, 64, 64},   {512, 512, 64, 64}, {1024, 1024, 64, 64},
                           {2048, 2048, 64, 64}, {4096, 4096, 64, 64}, {1024, 4096, 128, 128}};
  for (const Shape4& s : shapes) {
    for (int threads : {1, 2}) {
      for (Mode m : {Mode::fwd, Mode::fwd_bwd, Mode::build_fwd_bwd, Mode::fused_fwd, Mode::fused_fwd_bwd, Mode::lean_fwd,
                     Mode::lean_fwd_bwd, Mode::gemms_fwd, Mode::gemms_fwd_bwd, Mode::loop_fwd, Mode::loop_fwd_bwd,
                     Mode::causal_fwd, Mode::causal_fwd_bwd, Mode::window_fwd, Mode::window_fwd_bwd, Mode::softcap_fwd_bwd}) {
        if (m == Mode::build_fwd_bwd && s.t_q > 128) continue;  // fresh buffers per call: a node-overhead probe
        if (variant_of(m).any() && (s.t_q < 1024 || s.t_q != s.t_k)) continue;  // the variants at T >= 1024
        const std::string name = std::string("xgrad/") + mode_name(m) + "/" + dtype + "/" + s.str() +
                                 "/threads:" + std::to_string(threads);
        auto* b = benchmark::RegisterBenchmark(name.c_str(), [s, m, threads](benchmark::State& st) { run<T>(st, s, m, threads); });
        b->UseManualTime()->Unit(s.t_q <= 2 ? benchmark::kNanosecond : benchmark::kMicrosecond);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return xgrad::bench::run_benchmarks(argc, argv, register_all<float>, register_all<double>);
}
