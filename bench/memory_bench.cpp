// The variant ops of issue 31 beside memory speed: the time of one replay of a graph holding only
// the op's node over the time of a std::memcpy of as many bytes as the op must touch, in the same
// process. A copy reads and writes each byte once, so the op's reference is a memcpy of
// (bytes read + bytes written) / 2: its ratio is 1 if it streams its operands at memcpy's speed.
//
// Benchmarks, named memory/<op>/<dtype>/<N>/threads:1, every input and output of N elements as an
// R x C array (the concat's inputs and the split's outputs R x C/4):
//   where        where(cond, a, b), cond a random mask of 1 and 0     reads 3N, writes N
//   pow_2        pow(x, 2.0): x * x, no libm call (x = 0.5 + |N(0, 1)|)  reads N, writes N
//   pow_3        pow(x, 3.0): std::pow per element                     reads N, writes N
//   pow_0.5      pow(x, 0.5): std::pow per element                     reads N, writes N
//   less, equal  less(a, b), equal(a, b) (a comparison makes a mask)   reads 2N, writes N
//   logical_and  logical_and(m1, m2), two random masks of 1 and 0      reads 2N, writes N
//   split        chunk(x, 4, -1): one node, four R x C/4 outputs       reads N, writes N
//   concat       concat of four R x C/4 inputs along the last axis     reads N, writes N
//   scale        scale(x, 1.0): a copy as a node makes it              reads N, writes N
// The memcpy runs in pieces of at most 16 MiB: glibc copies larger blocks (from 127 MiB here,
// x86_non_temporal_threshold) with non-temporal stores, which skip reading the destination into
// the cache; the ops store through the cache, and so does the reference then, at every size.
// Sizes: N = 65536 (256 x 256; 256 KiB to 2 MiB touched per call: in or about the 1 MiB L2 of
// the CPU this was written on), timed in batches of 64 calls after an untimed one, so the data is
// as warm as it gets; N = 16777216 (4096 x 4096: 64 MiB per float32 array, far beyond every
// cache), timed call by call. Times are the thread's CPU time (on a shared machine it varies
// less than the wall time: a preempted call does not count its wait; reading it is a system
// call of several us in a VM, hence the batches).
// Counters: `ratio` = the median time of the replay over the median time of the memcpy, both
// timed alternately in the same iterations, so noise hits both; `bytes_per_second` = bytes read
// + written over the replay's median time; `copy_bytes_per_second` the same bytes over the
// memcpy's median time; `seconds_per_call` = the replay's median time. The benchmark's own time
// (manual time) is that of the timed replays of an iteration: a batch at N = 65536, one call else.
// One thread (xgrad's pool follows OpenBLAS's count). Run with repetitions for medians:
//   build/bench/xgrad_memory_bench --benchmark_repetitions=9 --benchmark_report_aggregates_only=true
#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include <xgrad/xgrad.hpp>

#include "main.hpp"
#include "timing.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

using xgrad::bench::median;

enum class Kind { where, pow_2, pow_3, pow_half, less, equal, logical_and, split, concat, scale };

// What an input holds: any real, a positive (pow's x: std::pow of a negative x to 0.5 is NaN),
// or a mask of 1 and 0 (where's cond, logical_and's operands).
enum class Data { real, positive, mask };

struct Case {
  const char* name;
  Kind kind;
  std::vector<Data> inputs;
  std::size_t parts;  // the inputs are R x C/parts (concat), else R x C
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"where", Kind::where, {Data::mask, Data::real, Data::real}, 1},
      {"pow_2", Kind::pow_2, {Data::positive}, 1},
      {"pow_3", Kind::pow_3, {Data::positive}, 1},
      {"pow_0.5", Kind::pow_half, {Data::positive}, 1},
      {"less", Kind::less, {Data::real, Data::real}, 1},
      {"equal", Kind::equal, {Data::real, Data::real}, 1},
      {"logical_and", Kind::logical_and, {Data::mask, Data::mask}, 1},
      {"split", Kind::split, {Data::real}, 1},
      {"concat", Kind::concat, {Data::real, Data::real, Data::real, Data::real}, 4},
      {"scale", Kind::scale, {Data::real}, 1},
  };
  return all;
}

template <class T>
xt::xarray<T> values(const xgrad::Shape& shape, Data data, std::uint64_t seed) {
  xt::xarray<T> v = xgrad::random_array<T>(shape, seed);
  for (T& e : v) {
    if (data == Data::positive) e = T(0.5) + std::abs(e);
    if (data == Data::mask) e = e > T(0) ? T(1) : T(0);
  }
  return v;
}

template <class T>
void build(Kind kind, const std::vector<xgrad::Var<T>>& x) {
  switch (kind) {
    case Kind::where: xgrad::where(x[0], x[1], x[2]); break;
    case Kind::pow_2: xgrad::pow(x[0], 2.0); break;
    case Kind::pow_3: xgrad::pow(x[0], 3.0); break;
    case Kind::pow_half: xgrad::pow(x[0], 0.5); break;
    case Kind::less: xgrad::less(x[0], x[1]); break;
    case Kind::equal: xgrad::equal(x[0], x[1]); break;
    case Kind::logical_and: xgrad::logical_and(x[0], x[1]); break;
    case Kind::split: xgrad::chunk(x[0], 4, -1); break;
    case Kind::concat: xgrad::concat(x, -1); break;
    case Kind::scale: xgrad::scale(x[0], 1.0); break;
  }
}

// This thread's CPU time in seconds.
double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

template <class T>
void run(benchmark::State& state, const Case& c, std::size_t rows, std::size_t cols, std::size_t batch) {
  openblas_set_num_threads(1);
  xgrad::Graph<T> g;
  std::vector<xgrad::Var<T>> x;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    x.push_back(g.input("x" + std::to_string(i), values<T>({rows, cols / c.parts}, c.inputs[i], i + 1)));
  }
  build(c.kind, x);
  const std::size_t n = rows * cols;
  const std::size_t touched = (c.inputs.size() * n / c.parts + n) * sizeof(T);  // bytes read + written
  // The reference: a memcpy of half the bytes (it reads and writes each), pages touched beforehand.
  std::vector<char> src(touched / 2, 1), dst(touched / 2, 0);
  const auto copy = [&] {
    constexpr std::size_t piece = std::size_t(16) << 20;
    for (std::size_t at = 0; at < src.size(); at += piece) {
      std::memcpy(dst.data() + at, src.data() + at, std::min(piece, src.size() - at));
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  };
  g.replay();  // untimed: the buffers are written once before the timed calls
  copy();
  std::vector<double> own, reference;
  for (auto _ : state) {
    if (batch > 1) g.replay();  // untimed: the batch starts warm
    const double t0 = thread_seconds();
    for (std::size_t i = 0; i < batch; ++i) g.replay();
    const double t1 = thread_seconds();
    if (batch > 1) copy();
    const double t2 = thread_seconds();
    for (std::size_t i = 0; i < batch; ++i) copy();
    const double t3 = thread_seconds();
    own.push_back((t1 - t0) / double(batch));
    reference.push_back((t3 - t2) / double(batch));
    state.SetIterationTime(t1 - t0);
  }
  state.counters["seconds_per_call"] = median(own);
  state.counters["ratio"] = median(own) / median(reference);
  state.counters["bytes_per_second"] = double(touched) / median(own);
  state.counters["copy_bytes_per_second"] = double(touched) / median(reference);
}

template <class T>
void register_all(const char* dtype) {
  struct Size {
    std::size_t rows, cols;
    std::size_t batch;  // calls per timing
  };
  for (const Size& s : {Size{256, 256, 64}, Size{4096, 4096, 1}}) {
    for (const Case& c : cases()) {
      const std::string name = std::string("memory/") + c.name + "/" + dtype + "/" + std::to_string(s.rows * s.cols) +
                               "/threads:1";
      benchmark::RegisterBenchmark(name.c_str(), [&c, s](benchmark::State& st) { run<T>(st, c, s.rows, s.cols, s.batch); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return xgrad::bench::run_benchmarks(argc, argv, register_all<float>, register_all<double>);
}
