// The BLAS under xgrad's matrix products: which library, which kernels, and whether they are the
// best this CPU can run (docs/performance.md, "BLAS kernels").
#pragma once

#include <string>
#include <vector>

namespace xgrad {

// An x86-64 instruction-set level, as OpenBLAS's kernels use them.
enum class SimdLevel { sse3 = 0, avx = 1, avx2 = 2, avx512 = 3 };

// "SSE3", "AVX", "AVX2", "AVX-512".
const char* simd_level_name(SimdLevel level);

struct BlasInfo {
  std::string library;   // "OpenBLAS"
  std::string version;   // "0.3.21"
  std::string config;    // openblas_get_config(): the build's options ("DYNAMIC_ARCH ...")
  std::string core;      // the kernels OpenBLAS runs: "Prescott", "Haswell", "SkylakeX", ...
  int threads = 1;       // OpenBLAS's threads now (OPENBLAS_NUM_THREADS, openblas_set_num_threads)
  std::string coretype;  // OPENBLAS_CORETYPE as the process started with it, "" when unset
  std::string cpu;       // /proc/cpuinfo's model name, family and model
  std::vector<std::string> cpu_features;  // of sse3 ssse3 sse4.1 sse4.2 avx fma avx2 avx512f ...
  SimdLevel cpu_level = SimdLevel::sse3;   // the best level the CPU (and the OS) supports
  SimdLevel core_level = SimdLevel::sse3;  // the level of `core`'s kernels
  // The core to ask for on this CPU: "SkylakeX" (AVX-512), "Haswell" (AVX2), "Sandybridge"
  // (AVX), "" for SSE3.
  std::string best_core;
  // The kernels are below what the CPU supports: OpenBLAS did not know the CPU model (Debian 12's
  // 0.3.21 runs Prescott kernels on Intel Xeon family 6 model 207, 4x slower in sgemm) or
  // OPENBLAS_CORETYPE asked for less.
  bool fallback() const { return core_level < cpu_level; }
};

// What the process runs on now. A core OpenBLAS names that xgrad does not know counts as SSE3.
BlasInfo blas_info();

// The level of an OpenBLAS core name ("Prescott" -> SSE3, "Zen" -> AVX2, "Cooperlake" -> AVX-512).
SimdLevel openblas_core_level(const std::string& core);

// The multi-line report `xgrad info` prints, a warning line first among its lines when the
// kernels are a fallback.
std::string blas_report(const BlasInfo& info);

// Runs the process on the kernels the CPU supports: when OpenBLAS chose a fallback core and the
// user did not set OPENBLAS_CORETYPE, sets it to best_core and executes the program again (the
// same /proc/self/exe, the same arguments from /proc/self/cmdline, the same environment
// otherwise): OpenBLAS reads the variable only when it loads. Under an address-space limit
// (RLIMIT_AS, ulimit -v) with OpenBLAS on more than one thread, it also sets
// OPENBLAS_NUM_THREADS=1 for that restart and says so in one line on stderr: OpenBLAS's threads
// map work buffers of their own, and one that cannot retries its mmap forever (OpenBLAS issue
// 5289), a hang. Returns (doing nothing) when neither applies (OPENBLAS_CORETYPE set by the user
// is never overridden) and when the program runs again after such a restart; if executing
// fails, prints why and returns. Call it first in main, before threads start or files open: the
// one line a program needs (the xgrad tool, the examples and the benchmarks have it).
void use_best_blas_kernels();

// Prints, once per process and only when the kernels are a fallback, one warning on stderr
// naming the core, the CPU's level and the fix; every matrix product (detail::gemm) calls it.
// XGRAD_BLAS_WARNING=0 in the environment silences it.
void warn_if_blas_fallback();

// Flush-to-zero, as torch.set_flush_denormal: with on = true, results that would be subnormal
// (|y| below 2^-126 in float32, 2^-1022 in float64) are 0 (of their sign) and subnormal inputs
// read as 0 (the MXCSR's FTZ and DAZ bits), on the calling thread and on xgrad's worker threads
// (each takes the mode at its next job). Many x86 CPUs take tens of cycles per operation on
// subnormals, and collapsed attention makes many (weights that underflow: docs/performance.md,
// "Subnormals"). Off by default: IEEE arithmetic, the mode the bit-exact results of the tests
// assume. Call it on each thread that runs graphs; OpenBLAS's own threads (a product OpenBLAS
// splits itself) keep their mode. Returns whether the mode is now as asked: false for on = true
// where the CPU has no such mode (not x86-64).
bool set_flush_denormal(bool on);
// Whether flush-to-zero is on for xgrad's worker threads (set_flush_denormal's last setting).
bool flush_denormal();

}  // namespace xgrad
