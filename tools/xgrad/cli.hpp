// What the subcommands share: option parsing, the attention inputs (files or --shape), and
// output files written atomically.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <xtensor/xarray.hpp>

#include "commands.hpp"

namespace xgrad::tool {

struct OptionSpec {
  const char* name;  // "--q", "-o"
  bool takes_value;
};

// Parsed command-line options. Throws usage_error for an unknown option, a missing value, an
// option given twice, or more positional arguments than allowed.
class Options {
 public:
  Options(const std::vector<std::string>& args, std::initializer_list<OptionSpec> specs,
          std::size_t max_positional = 0);
  bool has(const std::string& name) const { return m_values.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  // The value of one of `choices`, or `fallback` when the option is absent.
  std::string choice(const std::string& name, std::initializer_list<const char*> choices,
                     const std::string& fallback) const;
  const std::vector<std::string>& positional() const { return m_positional; }

 private:
  std::map<std::string, std::string> m_values;
  std::vector<std::string> m_positional;
};

// q, k, v as float64 with the dtype to compute in, from --q --k --v files (.npy or .json) or,
// where allowed, from --shape TQ,TK,DK,DV [--seed N] (independent standard normal entries).
// The dtype is --dtype if given, else that of the files (float64 for --shape and for JSON).
struct AttentionInputs {
  std::string dtype;
  xt::xarray<double> q, k, v;
  std::vector<std::string> files;  // the input files read, never to be overwritten
};
AttentionInputs attention_inputs(const Options& options, bool allow_shape);

// The options attention_inputs reads.
inline constexpr std::initializer_list<OptionSpec> input_options = {
    {"--q", true}, {"--k", true}, {"--v", true}, {"--shape", true}, {"--seed", true}, {"--dtype", true}};

// Writes `path` through a temporary file in the same directory, renamed into place once
// complete, so a failure never leaves a half-written file. Refuses (xgrad::error) to write over
// any of `inputs`.
void write_file_atomically(const std::string& path, const std::vector<std::string>& inputs,
                           const std::function<void(const std::string& temp_path)>& write);

// Calls f(float{}) or f(double{}) for dtype "float32" or "float64": f(auto tag) computes in
// decltype(tag).
template <class F>
int with_dtype(const std::string& dtype, F&& f) {
  if (dtype == "float32") return f(float{});
  return f(double{});
}

}  // namespace xgrad::tool
