// The speed guard of issue 32, run by ctest in Release builds (test speed_guard): the ratios of
// bench/RESULTS.md's regression, printed, and a failure only far outside their targets, so that a
// noisy machine does not fail it and a regression like the last one (2.3x, 25 us) does.
//   - attention forward + backward at T 1024, d 64, float32, one BLAS thread: a fresh graph per
//     call (as a user's first step builds it) and a replay, each over its six bare GEMMs timed
//     alternately in the same rounds (target 1.12; fails above 2);
//   - the documented example, built fresh and replayed, per call (targets 12 and 5 us; fails
//     above 60 and 25 us).
// Medians of 5 rounds. Exit 0 within the bounds, 1 outside them.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include <cblas.h>

#include <xgrad/xgrad.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The documented example with its backward pass, in g.
void documented_example(xgrad::Graph<float>& g) {
  const auto q = g.input("q", {{std::log(2.0f)}, {0.0f}});
  const auto k = g.input("k", {{1.0f}, {0.0f}});
  const auto v = g.input("v", {{3.0f, 0.0f}, {0.0f, 6.0f}});
  const auto out = xgrad::attention(q, k, v);
  xgrad::grad(out, {q, k, v});
}

}  // namespace

int main() {
  using namespace xgrad;
  openblas_set_num_threads(1);
  const int t = 1024, d = 64;
  const auto q0 = random_array<float>({1024, 64}, 1), k0 = random_array<float>({1024, 64}, 2);
  const auto v0 = random_array<float>({1024, 64}, 3), go = random_array<float>({1024, 64}, 4);
  std::vector<float> s(t * t), p(t * t, 1.0f / t), o(t * d), dp(t * t), dv(t * d), dq(t * d), dk(t * d);
  const float *q = q0.data(), *k = k0.data(), *v = v0.data(), *dout = go.data();
  // The six products of attention forward and backward, into buffers allocated once.
  const auto gemms = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, d, 1, q, d, k, d, 0, s.data(), t);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, d, t, 1, p.data(), t, v, d, 0, o.data(), d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, t, t, d, 1, dout, d, v, d, 0, dp.data(), t);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, t, 1, p.data(), t, dout, d, 0, dv.data(), d);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, t, d, t, 1, dp.data(), t, k, d, 0, dq.data(), d);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, t, 1, dp.data(), t, q, d, 0, dk.data(), d);
  };
  const auto build = [&](Graph<float>& g) {
    const auto qv = g.input("q", q0), kv = g.input("k", k0), vv = g.input("v", v0);
    grad(attention(qv, kv, vv), {qv, kv, vv}, go);
  };
  Graph<float> replayed;
  build(replayed);

  std::vector<double> fresh_ratio, replay_ratio, example_fresh, example_replay;
  for (int round = 0; round < 6; ++round) {
    double t_gemms = 0, t_fresh = 0, t_replay = 0;
    for (int i = 0; i < 8; ++i) {
      Clock::time_point start = Clock::now();
      gemms();
      t_gemms += seconds_since(start);
      start = Clock::now();
      {
        Graph<float> g;
        build(g);
      }
      t_fresh += seconds_since(start);
      start = Clock::now();
      replayed.replay();
      t_replay += seconds_since(start);
    }
    Graph<float> example;
    documented_example(example);
    const int calls = 2000;
    Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i) example.replay();
    const double replay_us = seconds_since(start) / calls * 1e6;
    start = Clock::now();
    for (int i = 0; i < calls; ++i) {
      Graph<float> g;
      documented_example(g);
    }
    const double fresh_us = seconds_since(start) / calls * 1e6;
    if (round == 0) continue;  // warm-up: the first graphs fault in the pages later ones reuse
    fresh_ratio.push_back(t_fresh / t_gemms);
    replay_ratio.push_back(t_replay / t_gemms);
    example_fresh.push_back(fresh_us);
    example_replay.push_back(replay_us);
  }
  struct Figure {
    const char* what;
    double value, target, limit;
    const char* unit;
  };
  const Figure figures[] = {
      {"attention T 1024 d 64 float32 fwd+bwd, fresh graph / GEMMs", median(fresh_ratio), 1.12, 2.0, ""},
      {"attention T 1024 d 64 float32 fwd+bwd, replay / GEMMs", median(replay_ratio), 1.12, 2.0, ""},
      {"documented example, fresh", median(example_fresh), 12, 60, " us"},
      {"documented example, replay", median(example_replay), 5, 25, " us"},
  };
  bool ok = true;
  for (const Figure& f : figures) {
    const bool within = f.value <= f.limit;
    ok = ok && within;
    std::printf("%-60s %8.3f%s  (target %g%s, fails above %g%s)%s\n", f.what, f.value, f.unit, f.target, f.unit, f.limit,
                f.unit, within ? "" : "  FAR OUTSIDE");
  }
  std::printf("(OpenBLAS kernels %s, %d thread%s)\n%s\n", xgrad::blas_info().core.c_str(), xgrad::blas_info().threads,
              xgrad::blas_info().threads == 1 ? "" : "s", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
