// The Google Benchmark programs' one main: the benchmarks of both dtypes registered, then run.
#pragma once

#include <benchmark/benchmark.h>

#include <xgrad/ops/kernels/blas.hpp>

namespace xgrad::bench {

// Registers the float32 and the float64 benchmarks (each function given its dtype's name, "f32"
// or "f64") and runs them with Google Benchmark's command line, on OpenBLAS's best kernels for
// this CPU (docs/performance.md); exit 2 for an argument it does not know.
inline int run_benchmarks(int argc, char** argv, void (*register_f32)(const char*), void (*register_f64)(const char*)) {
  xgrad::use_best_blas_kernels();
  register_f32("f32");
  register_f64("f64");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace xgrad::bench
