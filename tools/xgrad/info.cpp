// xgrad info: the BLAS under the matrix products, its kernels and the CPU's.
#include <cstdio>
#include <string>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad info\n"
    "\n"
    "Prints the BLAS library xgrad's matrix products run on, its version and build options, the\n"
    "kernels it runs (its core) and what chose them, the best core for this CPU, its thread count,\n"
    "the CPU and its vector features:\n"
    "  BLAS:       OpenBLAS 0.3.21\n"
    "  config:     OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY Cooperlake MAX_THREADS=64\n"
    "  core:       Cooperlake (AVX-512, chosen by OpenBLAS for this CPU)\n"
    "  best core:  SkylakeX (the CPU supports AVX-512)\n"
    "  threads:    2\n"
    "  CPU:        AMD EPYC (family 25, model 17)\n"
    "  features:   sse3 ssse3 sse4.1 sse4.2 avx fma avx2 avx512f avx512dq avx512bw avx512vl avx512bf16\n"
    "A first line starting `warning:` says that the core is a fallback below what the CPU supports\n"
    "(OpenBLAS did not know the CPU model, or OPENBLAS_CORETYPE asks for less). The xgrad tool\n"
    "itself then runs again on the best core, unless OPENBLAS_CORETYPE is set: `xgrad info` reports\n"
    "the kernels its commands run on.\n"
    "\n"
    "exit status: 0, or 2 for bad usage\n";

int run(const std::vector<std::string>& args) {
  const Options options(args, {});
  const std::string report = blas_report(blas_info());
  std::fwrite(report.data(), 1, report.size(), stdout);
  return 0;
}

}  // namespace

const Command info_command = {"info", "the BLAS library, its kernels, threads and the CPU's features", help, run};

}  // namespace xgrad::tool
