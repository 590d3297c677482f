// The xgrad tool's subcommands, one file each. Exit codes: 0 success, 1 a check failed,
// 2 bad usage or input (one line on stderr).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace xgrad::tool {

// Bad command-line usage: main prints "xgrad <command>: <message>" and exits 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --help or -h among a command's options: main prints the command's help and exits 0.
struct help_requested {};

struct Command {
  const char* name;
  const char* summary;
  const char* help;  // the full --help text
  int (*run)(const std::vector<std::string>& args);
};

extern const Command example_command;
extern const Command attention_command;
extern const Command gradcheck_command;
extern const Command export_command;
extern const Command replay_command;
extern const Command inspect_command;
extern const Command saturation_command;
extern const Command params_command;
extern const Command info_command;
extern const Command import_command;
extern const Command onnx_command;

}  // namespace xgrad::tool
