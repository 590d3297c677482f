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

#include <xgrad/xgrad.hpp>

#include "commands.hpp"

namespace xgrad::tool {

struct OptionSpec {
  const char* name;  // "--q", "-o"
  bool takes_value;
};

// Parsed command-line options. Throws help_requested for --help or -h in an option's place,
// usage_error for an unknown option, a missing value, an option given twice, or more positional
// arguments than allowed.
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

// The most elements of one T_q x T_k array (times the batch) the tool builds: 2^26, 256 MiB of
// float32, so that a small input file cannot make it allocate without bound.
inline constexpr std::size_t max_scores_elements = std::size_t(1) << 26;

// q, k, v as float64 with the dtype to compute in, from --q --k --v files (.npy or .json) or,
// where allowed, from --shape TQ,TK,DK,DV [--seed N] (independent standard normal entries).
// The dtype is --dtype if given, else that of the files (float64 for --shape and for JSON).
struct AttentionInputs {
  std::string dtype;
  xt::xarray<double> q, k, v;
  std::vector<std::string> files;  // q, k, v files read, never to be overwritten
  AttentionImpl impl = AttentionImpl::composed;  // --impl composed|fused

  // "q.json, k.json, v.json" or "--shape 2,3,4,5": where the inputs came from, for messages.
  std::string origin;
};
AttentionInputs attention_inputs(const Options& options, bool allow_shape);

// The options attention_inputs reads.
inline constexpr std::initializer_list<OptionSpec> input_options = {
    {"--q", true}, {"--k", true}, {"--v", true}, {"--shape", true}, {"--seed", true}, {"--dtype", true}, {"--impl", true}};

// `values` in T; xgrad::error naming `what` if a finite value is outside T's range.
template <class T>
xt::xarray<T> to_dtype(const xt::xarray<double>& values, const std::string& what);

template <class T>
struct AttentionGraph {
  Graph<T> graph;
  Var<T> q, k, v, out;
};
// Builds q, k, v inputs (named so) and out = attention(q, k, v, in.impl) in `a`; errors name the inputs'
// origin: "q.json, k.json, v.json: attention: d_k differs: ...".
template <class T>
void build_attention(const AttentionInputs& in, AttentionGraph<T>& a);

// Runs f; an xgrad::error it throws is rethrown with "<what>: " in front.
template <class F>
auto naming(const std::string& what, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    throw error(what + ": " + e.what());
  }
}

// Writes each (path, writer) through a temporary file in the path's directory; once all are
// complete they are renamed into place, so a failure leaves none half-written and replaces
// none. Refuses (xgrad::error) to write over any of `inputs`.
using FileWriter = std::function<void(const std::string& temp_path)>;
void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs);

// Calls f(float{}) or f(double{}) for dtype "float32" or "float64": f(auto tag) computes in
// decltype(tag).
template <class F>
int with_dtype(const std::string& dtype, F&& f) {
  if (dtype == "float32") return f(float{});
  return f(double{});
}

}  // namespace xgrad::tool
