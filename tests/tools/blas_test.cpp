// The BLAS kernels: blas_info() on this machine and on a forced core, `xgrad info`, the
// library's one warning, and use_best_blas_kernels() restarting on a CPU OpenBLAS does not know
// (a preloaded openblas_get_corename that answers "Prescott", tests/tools/blas_fallback_shim.cpp).
#include "../check.hpp"
#include "sandbox.hpp"

extern "C" char* openblas_get_corename(void);

namespace {

using namespace xgrad::test;

// The tool's run, with the environment given (sh syntax) before it. The sanitizers' runtime must
// come first among the libraries, unless told that a preloaded one may go before it.
Run tool_with(const Sandbox& box, const std::string& env, const std::string& args) {
  return box.shell("ASAN_OPTIONS=verify_asan_link_order=0 " + env + " exec '" XGRAD_TOOL "' " + args);
}

std::string line_of(const std::string& text, const std::string& start) {
  const auto at = text.find("\n" + start);
  if (at == std::string::npos) return text.rfind(start, 0) == 0 ? text.substr(0, text.find('\n')) : "";
  return text.substr(at + 1, text.find('\n', at + 1) - at - 1);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(blas)

BOOST_AUTO_TEST_CASE(core_levels_follow_openblas_kernels) {
  BOOST_TEST((openblas_core_level("Prescott") == SimdLevel::sse3));
  BOOST_TEST((openblas_core_level("Nehalem") == SimdLevel::sse3));
  BOOST_TEST((openblas_core_level("Sandybridge") == SimdLevel::avx));
  BOOST_TEST((openblas_core_level("Haswell") == SimdLevel::avx2));
  BOOST_TEST((openblas_core_level("Zen") == SimdLevel::avx2));
  BOOST_TEST((openblas_core_level("SkylakeX") == SimdLevel::avx512));
  BOOST_TEST((openblas_core_level("Cooperlake") == SimdLevel::avx512));
  BOOST_TEST((openblas_core_level("an unknown core") == SimdLevel::sse3));
  BlasInfo info;
  info.cpu_level = SimdLevel::avx512;
  info.core_level = SimdLevel::sse3;
  BOOST_TEST(info.fallback());
  info.core_level = SimdLevel::avx512;
  BOOST_TEST(!info.fallback());
}

BOOST_AUTO_TEST_CASE(blas_info_reports_this_process) {
  const BlasInfo info = blas_info();
  BOOST_TEST(info.library == "OpenBLAS");
  BOOST_TEST(info.version == "0.3.21");  // Debian 12's
  BOOST_TEST(info.core == openblas_get_corename());
  BOOST_TEST(info.config.find(info.core) != std::string::npos);
  BOOST_TEST(info.threads >= 1);
  BOOST_TEST((info.core_level == openblas_core_level(info.core)));
  // x86-64 has SSE3 everywhere xgrad runs; each level needs the features below it.
  const auto has = [&](const char* f) {
    return std::find(info.cpu_features.begin(), info.cpu_features.end(), f) != info.cpu_features.end();
  };
  BOOST_TEST(has("sse3"));
  if (info.cpu_level >= SimdLevel::avx2) BOOST_TEST((has("avx2") && has("fma")));
  if (info.cpu_level == SimdLevel::avx512) BOOST_TEST((has("avx512f") && has("avx512bw") && info.best_core == "SkylakeX"));
  BOOST_TEST(info.cpu.find("family") != std::string::npos, info.cpu);
  const std::string report = blas_report(info);
  BOOST_TEST(report.find("core:       " + info.core + " (") != std::string::npos, report);
  BOOST_TEST((report.rfind("warning:", 0) == 0) == info.fallback(), report);
}

BOOST_AUTO_TEST_CASE(the_tool_runs_on_the_best_kernels_and_never_overrides_the_user) {
  const BlasInfo here = blas_info();
  if (here.cpu_level == SimdLevel::sse3) return;  // no better kernels to run: nothing to check
  Sandbox box;
  // As it starts: on this machine's kernels, or the best ones if OpenBLAS fell back.
  const Run plain = tool_with(box, "", "info");
  BOOST_TEST(plain.rc == 0);
  BOOST_TEST(plain.out.rfind("BLAS:       OpenBLAS 0.3.21\n", 0) == 0, plain.out);
  BOOST_TEST(plain.err.empty(), plain.err);
  // A CPU OpenBLAS does not know: the tool runs again with OPENBLAS_CORETYPE set, says so, and
  // its commands run on those kernels (no warning from their products).
  const Run unknown = tool_with(box, "LD_PRELOAD='" XGRAD_BLAS_SHIM "'", "info");
  BOOST_TEST(unknown.rc == 0);
  BOOST_TEST(line_of(unknown.out, "core:") == "core:       " + here.best_core + " (" +
                                                  simd_level_name(here.cpu_level) + ", OPENBLAS_CORETYPE=" +
                                                  here.best_core + ", set by use_best_blas_kernels)",
             unknown.out);
  BOOST_TEST(unknown.out.find("warning:") == std::string::npos, unknown.out);
  const Run example = tool_with(box, "LD_PRELOAD='" XGRAD_BLAS_SHIM "'", "example");
  BOOST_TEST(example.rc == 0);
  BOOST_TEST(example.err.empty(), example.err);
  // A core the user chose is kept, with the warning in the report and once from the products.
  const Run forced = tool_with(box, "OPENBLAS_CORETYPE=Prescott", "info");
  BOOST_TEST(forced.rc == 0);
  BOOST_TEST(line_of(forced.out, "core:") == "core:       Prescott (SSE3, OPENBLAS_CORETYPE=Prescott)", forced.out);
  BOOST_TEST(forced.out.rfind(std::string("warning: OpenBLAS runs its Prescott kernels (SSE3) on a CPU with ") +
                                  simd_level_name(here.cpu_level) + "; OPENBLAS_CORETYPE=Prescott asks for them",
                              0) == 0,
             forced.out);
  const Run slow = tool_with(box, "OPENBLAS_CORETYPE=Prescott", "example");
  BOOST_TEST(slow.rc == 0);
  BOOST_TEST(slow.err == std::string("xgrad: warning: OpenBLAS 0.3.21 runs its Prescott kernels (SSE3) on a CPU with ") +
                             simd_level_name(here.cpu_level) +
                             ", several times slower; OPENBLAS_CORETYPE=Prescott asks for them (docs/performance.md; "
                             "XGRAD_BLAS_WARNING=0 silences this)\n",
             slow.err);
  const Run quiet = tool_with(box, "OPENBLAS_CORETYPE=Prescott XGRAD_BLAS_WARNING=0", "example");
  BOOST_TEST(quiet.rc == 0);
  BOOST_TEST(quiet.err.empty(), quiet.err);
  BOOST_TEST(quiet.out == slow.out);  // the same results on other kernels (the example's checks pass)
}

BOOST_AUTO_TEST_SUITE_END()
