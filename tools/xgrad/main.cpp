// xgrad: the command-line tool. `xgrad <command> [options]`, `xgrad <command> --help`.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <xgrad/xgrad.hpp>

#include "commands.hpp"

namespace {

using xgrad::tool::Command;

const Command* const commands[] = {&xgrad::tool::example_command, &xgrad::tool::attention_command,
                                   &xgrad::tool::gradcheck_command, &xgrad::tool::export_command,
                                   &xgrad::tool::replay_command, &xgrad::tool::inspect_command,
                                   &xgrad::tool::saturation_command};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: xgrad <command> [options]   (xgrad <command> --help for its options)\n\n"
                    "commands:\n");
  for (const Command* c : commands) std::fprintf(out, "  %-12s %s\n", c->name, c->summary);
  std::fprintf(out, "\nexit status: 0 success, 1 a check failed, 2 bad usage or input\n");
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    print_usage(stderr);
    return 2;
  }
  if (args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_usage(stdout);
    return 0;
  }
  for (const Command* c : commands) {
    if (args[0] != c->name) continue;
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    int status = 2;
    try {
      status = c->run(rest);
    } catch (const xgrad::tool::help_requested&) {
      std::fputs(c->help, stdout);
      status = 0;
    } catch (const xgrad::tool::usage_error& e) {
      std::fprintf(stderr, "xgrad %s: %s (see xgrad %s --help)\n", c->name, e.what(), c->name);
      return 2;
    } catch (const std::bad_alloc&) {
      std::fprintf(stderr, "xgrad %s: out of memory\n", c->name);
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "xgrad %s: %s\n", c->name, e.what());
      return 2;
    }
    // A script must not read success from output that never arrived (a full disk, a closed pipe).
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "xgrad %s: cannot write to standard output\n", c->name);
      return 2;
    }
    return status;
  }
  std::fprintf(stderr, "xgrad: unknown command '%s'\n", args[0].c_str());
  print_usage(stderr);
  return 2;
}
