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

// Numbers on the command line, one rule for every option: the whole text is the number, with
// no spaces, no sign and no other base; out of range is refused with the range in the message
// (usage_error "--seed needs an integer from 0 to 18446744073709551615, not '-1'"), never wrapped.
std::uint64_t parse_integer(const std::string& option, const std::string& text, std::uint64_t min, std::uint64_t max);
// A comma-separated list of integers, each as parse_integer ("1,4,16").
std::vector<std::uint64_t> parse_integers(const std::string& option, const std::string& text, std::uint64_t min,
                                          std::uint64_t max);
// Reals: decimal, [-]digits[.digits][e[+-]digits] with a digit before or after the point (0.5,
// .5, 1e-3), inside `range` ("--threshold needs a number in (0, 1], not ' 0.5'"); no inf, nan, hex.
struct Interval {
  double min, max;
  bool min_open, max_open;
};
double parse_real(const std::string& option, const std::string& text, const Interval& range);

struct OptionSpec {
  const char* name;  // "--q", "-o"
  bool takes_value;
  bool repeatable = false;  // may be given more than once (all() gives every value)
};

// Parsed command-line options. Throws help_requested for --help or -h in an option's place,
// usage_error for an unknown option, a missing value, an option given twice (unless repeatable), or more positional
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
  // The first positional argument; usage_error "missing <what>" without one.
  std::string first_positional(const std::string& what) const;
  // The option's value; usage_error "missing <name> <what>" when it is absent.
  std::string required(const std::string& name, const std::string& what) const;
  // Every value of a repeatable option, in the order given.
  std::vector<std::string> all(const std::string& name) const;
  // The option's value through parse_integer / parse_real, or `fallback` when it is absent.
  std::uint64_t integer(const std::string& name, std::uint64_t min, std::uint64_t max, std::uint64_t fallback) const;
  double real(const std::string& name, const Interval& range, double fallback) const;

 private:
  std::map<std::string, std::string> m_values;
  std::map<std::string, std::vector<std::string>> m_repeated;
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

// The largest axis --shape takes.
inline constexpr std::uint64_t max_shape_axis = std::uint64_t(1) << 16;

// The options attention_inputs reads, and their lines in the --help of the commands that take them all.
inline constexpr std::initializer_list<OptionSpec> input_options = {
    {"--q", true}, {"--k", true}, {"--v", true}, {"--shape", true}, {"--seed", true}, {"--dtype", true}, {"--impl", true}};
inline constexpr const char* input_options_help =
    "  --q Q --k K --v V   input arrays, .npy or .json\n"
    "  --shape TQ,TK,DK,DV random inputs q (TQ, DK), k (TK, DK), v (TK, DV), standard normal;\n"
    "                      each 0 to 65536\n"
    "  --seed N            seed of the random inputs, 0 to 2^64 - 1 (default 0)\n"
    "  --dtype D           float32 or float64 (default: the inputs' dtype; float64 for --shape)\n"
    "  --impl I            composed (default): the spec's nodes, every intermediate kept; fused: one\n"
    "                      flash_attention node, memory O((T_q + T_k) d), no scores or weights kept\n";

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

// Runs f; an xgrad::error it throws is rethrown with "<what>: " in front (graph/error.hpp's
// with_context).
template <class F>
auto naming(const std::string& what, F&& f) {
  return with_context([&] { return what + ": "; }, std::forward<F>(f));
}

// A graph file as `xgrad export` writes it, parsed, and its dtype; errors name the file
// ("g.json: graph JSON: top level: ...").
struct GraphFile {
  Json json;
  std::string dtype;
};
GraphFile read_graph_file(const std::string& path);

// Writes each (path, writer) as xgrad::write_files_atomically (lib/files.hpp) does: every path
// checked first (check_output_path with `inputs`: none may be an input, a directory, a device),
// then each file made by its writer into a temporary (the phase "writing PATH"), then all
// renamed into place, so a failure leaves none half-written and replaces none, and its message
// names the path, never the temporary. A symbolic link is followed: the file it points to is
// replaced and the link stays; a link to nothing is refused. At most max_output_files files.
inline constexpr std::size_t max_output_files = max_atomic_files;
void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs);

// Out of memory. The tool's new-handler (main.cpp) must not allocate or unwind (nlohmann/json
// allocates in its destructors), so what it needs is kept in fixed buffers here: the phase the
// command is in, named by a Phase for its lifetime ("replaying g.json"); the temporary files
// write_files_atomically has open are the library's to remove (remove_temporary_files).
inline constexpr std::size_t max_phase_text = 480;
class Phase {
 public:
  explicit Phase(const std::string& what);  // longer texts are cut to max_phase_text bytes
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  char m_previous[max_phase_text + 1];
};
// Writes "xgrad <command>: out of memory while <phase>" to stderr, removes the temporary files
// and calls _exit(2): nothing allocates, nothing unwinds, stdout's buffer is dropped.
[[noreturn]] void exit_out_of_memory(const char* command) noexcept;

// Calls f(float{}) or f(double{}) for dtype "float32" or "float64": f(auto tag) computes in
// decltype(tag).
template <class F>
int with_dtype(const std::string& dtype, F&& f) {
  if (dtype == "float32") return f(float{});
  return f(double{});
}

}  // namespace xgrad::tool
