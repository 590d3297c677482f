// The xgrad binary run in a fresh directory, for the suites of tests/tools/ (cli, params_cli).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <boost/test/unit_test.hpp>

namespace xgrad::test {

namespace fs = std::filesystem;

// What one run of the tool gave.
struct Run {
  int rc;
  std::string out, err;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh directory per test case, removed at the end.
struct Sandbox {
  fs::path dir;
  Sandbox() {
    // Named after the suite and the case, and this process: suites of one case name (cli and
    // params_cli) run at once under ctest -j.
    std::string name = boost::unit_test::framework::current_test_case().full_name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir = fs::temp_directory_path() / ("xgrad_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    // The documented example as JSON files.
    write_text(dir / "q.json", "[[0.6931471805599453], [0]]");
    write_text(dir / "k.json", "[[1], [0]]");
    write_text(dir / "v.json", "[[3, 0], [0, 6]]");
  }
  ~Sandbox() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }

  // Runs `xgrad <args>` in the sandbox directory.
  Run xgrad(const std::string& args) const { return shell("exec '" XGRAD_TOOL "' " + args); }
  // Runs `xgrad <args>` with at most `kib` KiB of address space (ulimit -v, in the child only),
  // OpenBLAS started on `threads` threads, and 60 s to finish (OpenBLAS has hung in an mmap
  // retry loop).
  Run xgrad_limited(const std::string& args, long kib, int threads = 1) const {
    return shell("OPENBLAS_NUM_THREADS=" + std::to_string(threads) + " exec timeout 60 sh -c 'ulimit -v " +
                 std::to_string(kib) + " && exec \"$0\" \"$@\"' '" XGRAD_TOOL "' " + args);
  }
  // Runs the sh command line `command` in the sandbox directory.
  Run shell(const std::string& command) const {
    const std::string cmd = "cd '" + dir.string() + "' && (" + command + ") > .stdout 2> .stderr";
    const int status = std::system(cmd.c_str());
    Run r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_text(dir / ".stdout"), read_text(dir / ".stderr")};
    fs::remove(dir / ".stdout");
    fs::remove(dir / ".stderr");
    return r;
  }
  std::size_t files() const { return entries().size(); }
  // The names in the sandbox (or in its subdirectory `sub`), hidden ones included.
  std::set<std::string> entries(const std::string& sub = "") const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir / sub)) names.insert(e.path().filename().string());
    return names;
  }
};

// True if s is one line, ending in its only newline.
inline bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace xgrad::test
