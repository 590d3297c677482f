// xgrad: the command-line tool. `xgrad <command> [options]`, `xgrad <command> --help`.
#include <cstdio>
#include <exception>
#include <new>
#include <stdio_ext.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <algorithm>
#include <string>
#include <vector>

#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/xgrad.hpp>

#include "cli.hpp"
#include "commands.hpp"

extern "C" void openblas_set_num_threads(int);

namespace {

using xgrad::tool::Command;

const Command* const commands[] = {&xgrad::tool::example_command, &xgrad::tool::attention_command,
                                   &xgrad::tool::gradcheck_command, &xgrad::tool::export_command,
                                   &xgrad::tool::replay_command, &xgrad::tool::inspect_command,
                                   &xgrad::tool::saturation_command, &xgrad::tool::params_command, &xgrad::tool::import_command, &xgrad::tool::onnx_command,
                                   &xgrad::tool::info_command};

// The command for the out-of-memory line; "xgrad" before one is chosen.
const char* running = "";

// operator new found no memory: one line and exit 2 at once, before anything unwinds (nlohmann/json
// allocates in its noexcept destructors, which would end in std::terminate).
void out_of_memory() { xgrad::tool::exit_out_of_memory(running); }

// OpenBLAS maps its work buffer (128 MiB in Debian's build, 129 MiB with its alignment) at the
// first GEMM large enough to need it, and when that mmap fails it retries forever (OpenBLAS
// issue 5289) instead of failing. So the buffer is mapped at start, after a probe of its size plus a margin: without that much
// address space the tool stops at once with the out-of-memory line, and with it, running out of
// memory later is an operator new failure the handler reports. Single-threaded OpenBLAS reuses
// this one buffer, but its worker threads (and xgrad's pool's threads) map their own on their
// first job and would hang there: under a finite address-space limit (ulimit -v)
// use_best_blas_kernels has started the tool again on one thread; should that restart have
// failed, the products still run on one.
void map_blas_buffer(const char* command) {
  rlimit limit{};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) openblas_set_num_threads(1);
  constexpr std::size_t probe = std::size_t(130) << 20;  // OpenBLAS maps 129 MiB
  void* p = mmap(nullptr, probe, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    const xgrad::tool::Phase phase("starting (OpenBLAS needs a 128 MiB work buffer)");
    xgrad::tool::exit_out_of_memory(command);
  }
  munmap(p, probe);
  constexpr std::size_t n = 128;  // the smallest size that uses the buffer (smaller ones do not)
  std::vector<double> a(n * n, 0.0), c(n * n);
  xgrad::detail::gemm(false, false, n, n, n, 1.0, a.data(), n, a.data(), n, 0.0, c.data(), n);
}

// Flushes and closes stdout: false if the output did not all get there (a full disk, a closed
// pipe, an error that only close reports).
bool close_stdout() { return !std::ferror(stdout) && std::fclose(stdout) == 0; }

bool print(const char* text) { return std::fputs(text, stdout) >= 0 && close_stdout(); }

std::string usage() {
  std::string text = "usage: xgrad <command> [options]   (xgrad <command> --help for its options)\n\ncommands:\n";
  for (const Command* c : commands) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-12s %s\n", c->name, c->summary);
    text += line;
  }
  return text + "\nexit status: 0 success, 1 a check failed, 2 bad usage or input, out of memory or a failed write\n"
                "(one line on stderr)\n";
}

// Exit 2 with "xgrad[ <command>]: cannot write to standard output".
int stdout_failed(const char* command) {
  std::fprintf(stderr, "xgrad%s%s: cannot write to standard output\n", *command ? " " : "", command);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU, unless OPENBLAS_CORETYPE is set
  std::set_new_handler(out_of_memory);
  xgrad::ignore_file_size_signal();  // past a file-size limit write() fails with EFBIG, which is reported
  // Output stays in this buffer until the command has finished, so an error or running out of
  // memory prints nothing half; the commands write larger outputs in one call.
  static char stdout_buffer[1 << 20];
  std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fputs(usage().c_str(), stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    return print(usage().c_str()) ? 0 : stdout_failed("");
  }
  for (const Command* c : commands) {
    if (args[0] != c->name) continue;
    running = c->name;
    const xgrad::tool::Phase phase(std::string("running xgrad ") + c->name);
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    // --help and info need no BLAS (nor the memory of its buffer).
    if (c != &xgrad::tool::info_command &&
        std::none_of(rest.begin(), rest.end(), [](const std::string& a) { return a == "--help" || a == "-h"; })) {
      map_blas_buffer(c->name);
    }
    int status = 2;
    try {
      status = c->run(rest);
    } catch (const xgrad::tool::help_requested&) {
      __fpurge(stdout);
      return print(c->help) ? 0 : stdout_failed(c->name);
    } catch (const xgrad::tool::usage_error& e) {
      __fpurge(stdout);
      std::fprintf(stderr, "xgrad %s: %s (see xgrad %s --help)\n", c->name, e.what(), c->name);
      return 2;
    } catch (const std::bad_alloc&) {
      // A bad_alloc the handler did not see (thrown by a library itself).
      xgrad::tool::exit_out_of_memory(c->name);
    } catch (const std::exception& e) {
      __fpurge(stdout);
      std::fprintf(stderr, "xgrad %s: %s\n", c->name, e.what());
      return 2;
    }
    // A script must not read success from output that never arrived (a full disk, a closed pipe).
    if (!close_stdout()) return stdout_failed(c->name);
    return status;
  }
  std::fprintf(stderr, "xgrad: unknown command '%s'\n%s", args[0].c_str(), usage().c_str());
  return 2;
}
