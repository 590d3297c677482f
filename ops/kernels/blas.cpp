#include <xgrad/ops/kernels/blas.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <sstream>

extern "C" char* openblas_get_corename(void);
extern "C" char* openblas_get_config(void);
extern "C" int openblas_get_num_threads(void);

namespace xgrad {

namespace {

// OPENBLAS_CORETYPE as the process started: read at static initialisation, before main could
// change it (use_best_blas_kernels sets it only for the program it executes again).
const std::string start_coretype = [] {
  const char* v = std::getenv("OPENBLAS_CORETYPE");
  return std::string(v ? v : "");
}();

// Set in the environment of the program use_best_blas_kernels executes again: "kernels" when it
// set OPENBLAS_CORETYPE, "threads" when it set only OPENBLAS_NUM_THREADS.
constexpr const char* restarted_variable = "XGRAD_BLAS_RESTARTED";

bool restarted_for_kernels() {
  const char* v = std::getenv(restarted_variable);
  return v != nullptr && std::string(v) == "kernels";
}

std::string trim(const std::string& s) {
  const auto a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, name, family, model;
  while (std::getline(in, line) && (name.empty() || family.empty() || model.empty())) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon)), value = trim(line.substr(colon + 1));
    if (key == "model name" && name.empty()) name = value;
    if (key == "cpu family" && family.empty()) family = value;
    if (key == "model" && model.empty()) model = value;
  }
  if (name.empty()) return "unknown CPU";
  return name + (family.empty() ? "" : " (family " + family + ", model " + model + ")");
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::avx512: return "AVX-512";
    case SimdLevel::avx2: return "AVX2";
    case SimdLevel::avx: return "AVX";
    case SimdLevel::sse3: break;
  }
  return "SSE3";
}

SimdLevel openblas_core_level(const std::string& core) {
  // OpenBLAS 0.3.21's x86-64 DYNAMIC_ARCH cores (driver/others/dynamic.c), by their kernels.
  static const std::map<std::string, SimdLevel> levels = {
      {"SkylakeX", SimdLevel::avx512},   {"Cooperlake", SimdLevel::avx512},  {"SapphireRapids", SimdLevel::avx512},
      {"Haswell", SimdLevel::avx2},      {"Zen", SimdLevel::avx2},           {"Sandybridge", SimdLevel::avx},
      {"Bulldozer", SimdLevel::avx},     {"Piledriver", SimdLevel::avx},     {"Steamroller", SimdLevel::avx},
      {"Excavator", SimdLevel::avx}};
  const auto it = levels.find(core);
  return it == levels.end() ? SimdLevel::sse3 : it->second;
}

BlasInfo blas_info() {
  BlasInfo info;
  info.library = "OpenBLAS";
  info.config = trim(openblas_get_config());
  std::istringstream words(info.config);
  std::string first, version;
  words >> first >> version;
  info.version = first == "OpenBLAS" ? version : "unknown";
  info.core = trim(openblas_get_corename());
  info.threads = openblas_get_num_threads();
  info.coretype = start_coretype;
  info.cpu = cpu_name();
  __builtin_cpu_init();
  const std::pair<const char*, bool> features[] = {
      {"sse3", __builtin_cpu_supports("sse3")},         {"ssse3", __builtin_cpu_supports("ssse3")},
      {"sse4.1", __builtin_cpu_supports("sse4.1")},     {"sse4.2", __builtin_cpu_supports("sse4.2")},
      {"avx", __builtin_cpu_supports("avx")},           {"fma", __builtin_cpu_supports("fma")},
      {"avx2", __builtin_cpu_supports("avx2")},         {"avx512f", __builtin_cpu_supports("avx512f")},
      {"avx512dq", __builtin_cpu_supports("avx512dq")}, {"avx512bw", __builtin_cpu_supports("avx512bw")},
      {"avx512vl", __builtin_cpu_supports("avx512vl")}, {"avx512bf16", __builtin_cpu_supports("avx512bf16")}};
  std::map<std::string, bool> has;
  for (const auto& [name, supported] : features) {
    has[name] = supported;
    if (supported) info.cpu_features.push_back(name);
  }
  // SkylakeX's kernels need AVX-512 F, DQ, BW and VL; Haswell's AVX2 and FMA.
  if (has["avx512f"] && has["avx512dq"] && has["avx512bw"] && has["avx512vl"]) {
    info.cpu_level = SimdLevel::avx512;
  } else if (has["avx2"] && has["fma"]) {
    info.cpu_level = SimdLevel::avx2;
  } else if (has["avx"]) {
    info.cpu_level = SimdLevel::avx;
  }
  static const char* const best[] = {"", "Sandybridge", "Haswell", "SkylakeX"};
  info.best_core = best[static_cast<int>(info.cpu_level)];
  info.core_level = openblas_core_level(info.core);
  return info;
}

std::string blas_report(const BlasInfo& info) {
  std::ostringstream s;
  if (info.fallback()) {
    s << "warning: OpenBLAS runs its " << info.core << " kernels (" << simd_level_name(info.core_level)
      << ") on a CPU with " << simd_level_name(info.cpu_level) << "; "
      << (info.coretype.empty() ? "set OPENBLAS_CORETYPE=" + info.best_core + " before the program starts"
                                : "OPENBLAS_CORETYPE=" + info.coretype + " asks for them; " + info.best_core +
                                      " would match the CPU")
      << "\n";
  }
  s << "BLAS:       " << info.library << " " << info.version << "\n"
    << "config:     " << info.config << "\n"
    << "core:       " << info.core << " (" << simd_level_name(info.core_level) << ", "
    << (info.coretype.empty()              ? std::string("chosen by OpenBLAS for this CPU")
        : restarted_for_kernels()         ? "OPENBLAS_CORETYPE=" + info.coretype + ", set by use_best_blas_kernels"
                                          : "OPENBLAS_CORETYPE=" + info.coretype)
    << ")\n"
    << "best core:  " << (info.best_core.empty() ? "-" : info.best_core) << " (the CPU supports "
    << simd_level_name(info.cpu_level) << ")\n"
    << "threads:    " << info.threads << "\n"
    << "CPU:        " << info.cpu << "\n"
    << "features:  ";
  for (const auto& f : info.cpu_features) s << " " << f;
  s << "\n";
  return s.str();
}

void use_best_blas_kernels() {
  if (std::getenv(restarted_variable) != nullptr) return;
  const BlasInfo info = blas_info();
  const bool kernels = start_coretype.empty() && info.fallback() && !info.best_core.empty();
  rlimit limit{};
  const bool one_thread =
      info.threads > 1 && getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
  if (!kernels && !one_thread) return;
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
  std::vector<std::string> args;
  for (std::size_t at = 0; at < cmdline.size();) {
    const std::size_t end = cmdline.find('\0', at);
    args.push_back(cmdline.substr(at, end - at));
    at = end == std::string::npos ? cmdline.size() : end + 1;
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const char* const saved_threads = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string threads = saved_threads ? saved_threads : "";
  if (args.empty() || (kernels && setenv("OPENBLAS_CORETYPE", info.best_core.c_str(), 1) != 0) ||
      (one_thread && setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0) ||
      setenv(restarted_variable, kernels ? "kernels" : "threads", 1) != 0) {
    return;
  }
  if (one_thread) {
    std::fprintf(stderr,
                 "xgrad: an address-space limit (ulimit -v) is set: OpenBLAS runs on one thread, not %d (its "
                 "threads hang when they cannot map their work buffers: OpenBLAS issue 5289)\n",
                 info.threads);
  }
  std::fflush(nullptr);
  execv("/proc/self/exe", argv.data());
  const int failure = errno;  // still here: run on as before
  if (kernels) unsetenv("OPENBLAS_CORETYPE");
  if (one_thread && saved_threads) setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
  if (one_thread && !saved_threads) unsetenv("OPENBLAS_NUM_THREADS");
  unsetenv(restarted_variable);
  std::fprintf(stderr, "xgrad: could not restart %s (%s)\n",
               kernels ? ("on OpenBLAS's " + info.best_core + " kernels").c_str() : "on one thread",
               std::strerror(failure));
}

void warn_if_blas_fallback() {
  static std::once_flag once;
  std::call_once(once, [] {
    const char* quiet = std::getenv("XGRAD_BLAS_WARNING");
    if (quiet && std::string(quiet) == "0") return;
    const BlasInfo info = blas_info();
    if (!info.fallback()) return;
    std::fprintf(stderr,
                 "xgrad: warning: OpenBLAS %s runs its %s kernels (%s) on a CPU with %s, several times slower; %s "
                 "(docs/performance.md; XGRAD_BLAS_WARNING=0 silences this)\n",
                 info.version.c_str(), info.core.c_str(), simd_level_name(info.core_level),
                 simd_level_name(info.cpu_level),
                 info.coretype.empty()
                     ? ("set OPENBLAS_CORETYPE=" + info.best_core +
                        " before the program starts, or call xgrad::use_best_blas_kernels() first in main")
                           .c_str()
                     : ("OPENBLAS_CORETYPE=" + info.coretype + " asks for them").c_str());
  });
}

}  // namespace xgrad
