#include "cli.hpp"

#include <climits>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include <xgrad/xgrad.hpp>

namespace xgrad::tool {

Options::Options(const std::vector<std::string>& args, std::initializer_list<OptionSpec> specs,
                 std::size_t max_positional) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw help_requested{};
    if (a.size() > 1 && a[0] == '-') {
      const OptionSpec* spec = nullptr;
      for (const auto& s : specs) {
        if (a == s.name) spec = &s;
      }
      if (!spec) throw usage_error("unknown option '" + a + "'");
      if (has(a) && !spec->repeatable) throw usage_error("option " + a + " given twice");
      if (spec->takes_value) {
        if (i + 1 >= args.size()) throw usage_error("option " + a + " needs a value");
        m_values[a] = args[++i];
        if (spec->repeatable) m_repeated[a].push_back(args[i]);
      } else {
        m_values[a] = "";
      }
    } else {
      if (m_positional.size() == max_positional) throw usage_error("unexpected argument '" + a + "'");
      m_positional.push_back(a);
    }
  }
}

GraphFile read_graph_file(const std::string& path) {
  const std::string text = read_text_file(path);
  GraphFile f;
  try {
    f.json = parse_graph_json(text);
    f.dtype = graph_json_dtype(f.json);
  } catch (const error& e) {
    const std::string what = e.what();
    throw error(path + ": " + (what.rfind("graph JSON", 0) == 0 ? "" : "graph JSON: ") + what);
  }
  return f;
}

std::vector<std::string> Options::all(const std::string& name) const {
  const auto it = m_repeated.find(name);
  return it == m_repeated.end() ? std::vector<std::string>{} : it->second;
}

std::uint64_t parse_integer(const std::string& option, const std::string& text, std::uint64_t min, std::uint64_t max) {
  const auto refuse = [&] {
    return usage_error(option + " needs an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                       ", not '" + text + "'");
  };
  if (text.empty()) throw refuse();
  std::uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') throw refuse();
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (max - digit) / 10) throw refuse();  // v * 10 + digit > max, without wrapping
    v = v * 10 + digit;
  }
  if (v < min) throw refuse();
  return v;
}

std::vector<std::uint64_t> parse_integers(const std::string& option, const std::string& text, std::uint64_t min,
                                          std::uint64_t max) {
  std::vector<std::uint64_t> values;
  std::size_t start = 0;
  for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
    values.push_back(parse_integer(option, text.substr(start, comma - start), min, max));
  }
  values.push_back(parse_integer(option, text.substr(start), min, max));
  return values;
}

double parse_real(const std::string& option, const std::string& text, const Interval& range) {
  // The grammar first, so that strtod's extras (spaces, '+', inf, nan, hex, a locale's comma)
  // never get through.
  std::size_t i = 0, mantissa_digits = 0;
  const auto digits = [&] {
    std::size_t n = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) ++n;
    return n;
  };
  if (i < text.size() && text[i] == '-') ++i;
  mantissa_digits += digits();
  if (i < text.size() && text[i] == '.') {
    ++i;
    mantissa_digits += digits();
  }
  bool ok = mantissa_digits > 0;
  if (ok && i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) ++i;
    ok = digits() > 0;
  }
  const double v = ok && i == text.size() ? std::strtod(text.c_str(), nullptr) : std::nan("");
  const bool above_min = range.min_open ? v > range.min : v >= range.min;
  const bool below_max = range.max_open ? v < range.max : v <= range.max;
  if (!(std::isfinite(v) && above_min && below_max)) {
    char bounds[96];
    std::snprintf(bounds, sizeof bounds, "%c%g, %g%c", range.min_open ? '(' : '[', range.min, range.max,
                  range.max_open ? ')' : ']');
    throw usage_error(option + " needs a number in " + bounds + ", not '" + text + "'");
  }
  return v;
}

std::uint64_t Options::integer(const std::string& name, std::uint64_t min, std::uint64_t max,
                               std::uint64_t fallback) const {
  const auto text = get(name);
  return text ? parse_integer(name, *text, min, max) : fallback;
}

double Options::real(const std::string& name, const Interval& range, double fallback) const {
  const auto text = get(name);
  return text ? parse_real(name, *text, range) : fallback;
}

std::optional<std::string> Options::get(const std::string& name) const {
  const auto it = m_values.find(name);
  if (it == m_values.end()) return std::nullopt;
  return it->second;
}

std::string Options::first_positional(const std::string& what) const {
  if (m_positional.empty()) throw usage_error("missing " + what);
  return m_positional[0];
}

std::string Options::required(const std::string& name, const std::string& what) const {
  const auto value = get(name);
  if (!value) throw usage_error("missing " + name + " " + what);
  return *value;
}

std::string Options::choice(const std::string& name, std::initializer_list<const char*> choices,
                            const std::string& fallback) const {
  const auto value = get(name);
  if (!value) return fallback;
  std::string list;
  for (const char* c : choices) {
    if (*value == c) return *value;
    list += std::string(list.empty() ? "" : "|") + c;
  }
  throw usage_error(name + " must be " + list + ", not '" + *value + "'");
}

AttentionInputs attention_inputs(const Options& o, bool allow_shape) {
  AttentionInputs in;
  const bool files = o.has("--q") || o.has("--k") || o.has("--v");
  if (allow_shape && o.has("--shape")) {
    if (files) throw usage_error("give either --q --k --v or --shape, not both");
    const std::string text = *o.get("--shape");
    const std::vector<std::uint64_t> dims = parse_integers("--shape", text, 0, max_shape_axis);
    if (dims.size() != 4) throw usage_error("--shape needs TQ,TK,DK,DV (four integers), got '" + text + "'");
    NormalStream normal(o.integer("--seed", 0, UINT64_MAX, 0));
    const Phase phase("drawing the inputs of --shape " + text);
    // One engine, the distribution started afresh for each array.
    in.q = normal.array<double>({dims[0], dims[2]});
    normal.reset();
    in.k = normal.array<double>({dims[1], dims[2]});
    normal.reset();
    in.v = normal.array<double>({dims[1], dims[3]});
    in.dtype = "float64";
    in.origin = "--shape " + text;
  } else {
    if (o.has("--seed")) throw usage_error("--seed goes with --shape");
    for (const char* name : {"--q", "--k", "--v"}) {
      if (!o.has(name)) {
        throw usage_error(std::string("missing ") + name + (allow_shape ? " (give --q --k --v, or --shape)" : ""));
      }
    }
    std::string dtypes;
    for (auto [name, target] : {std::pair{"--q", &in.q}, std::pair{"--k", &in.k}, std::pair{"--v", &in.v}}) {
      const std::string path = *o.get(name);
      const Phase phase("reading " + path);
      StoredArray a = read_array(path);
      *target = std::move(a.values);
      in.files.push_back(path);
      in.origin += (in.origin.empty() ? "" : ", ") + path;
      if (in.dtype.empty()) in.dtype = a.dtype;
      else if (in.dtype != a.dtype && !o.has("--dtype")) {
        throw error(path + ": is " + a.dtype + " but the inputs before it are " + in.dtype +
                    "; pass --dtype to compute in one");
      }
    }
  }
  in.dtype = o.choice("--dtype", {"float32", "float64"}, in.dtype);
  in.impl = o.choice("--impl", {"composed", "fused"}, "composed") == "fused" ? AttentionImpl::fused : AttentionImpl::composed;
  // The T_q x T_k arrays the composed graph will hold, and the fused one compute tile by tile,
  // before anything allocates them.
  if (in.q.dimension() >= 2 && in.k.dimension() >= 2) {
    Shape scores(in.q.shape().begin(), in.q.shape().end() - 1);
    scores.push_back(in.k.shape()[in.k.dimension() - 2]);
    if (!bounded_size(scores, max_scores_elements)) {
      throw error(in.origin + ": attention would build " + shape_str(scores) + " score arrays, more than the " +
                  std::to_string(max_scores_elements) + " elements the tool allows");
    }
  }
  return in;
}

template <class T>
xt::xarray<T> to_dtype(const xt::xarray<double>& values, const std::string& what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double x = values.data()[i];
    if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<T>::max())) {
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", x);
      throw error(what + ": the value " + text + " at " + index_str(unravel_index(i, values.shape())) +
                  " is outside the range of " + dtype_name<T>());
    }
  }
  return xt::cast<T>(values);
}

template <class T>
void build_attention(const AttentionInputs& in, AttentionGraph<T>& a) {
  const auto& files = in.files;
  const auto name = [&](std::size_t i, const char* fallback) { return i < files.size() ? files[i] : std::string(fallback); };
  const Phase phase("building the graph of " + in.origin);
  a.q = a.graph.input("q", to_dtype<T>(in.q, name(0, "q")));
  a.k = a.graph.input("k", to_dtype<T>(in.k, name(1, "k")));
  a.v = a.graph.input("v", to_dtype<T>(in.v, name(2, "v")));
  a.out = naming(in.origin, [&] { return attention(a.q, a.k, a.v, in.impl); });
}

template xt::xarray<float> to_dtype(const xt::xarray<double>&, const std::string&);
template xt::xarray<double> to_dtype(const xt::xarray<double>&, const std::string&);
template void build_attention(const AttentionInputs&, AttentionGraph<float>&);
template void build_attention(const AttentionInputs&, AttentionGraph<double>&);

namespace {

// What exit_out_of_memory reads: fixed buffers, filled and cleared without allocating there.
char phase_text[max_phase_text + 1] = "starting";

void copy_text(char* to, const char* from, std::size_t capacity) {
  const std::size_t n = std::min(std::strlen(from), capacity - 1);
  std::memcpy(to, from, n);
  to[n] = '\0';
}

}  // namespace

Phase::Phase(const std::string& what) {
  copy_text(m_previous, phase_text, sizeof m_previous);
  copy_text(phase_text, what.c_str(), sizeof phase_text);
}

Phase::~Phase() { copy_text(phase_text, m_previous, sizeof phase_text); }

void exit_out_of_memory(const char* command) noexcept {
  char line[max_phase_text + 128];
  std::size_t n = 0;
  for (const char* part : {"xgrad", *command ? " " : "", command, ": out of memory while ", static_cast<const char*>(phase_text), "\n"}) {
    const std::size_t len = std::min(std::strlen(part), sizeof line - n);
    std::memcpy(line + n, part, len);
    n += len;
  }
  const ssize_t written = ::write(STDERR_FILENO, line, n);
  (void)written;  // nothing more can be done about a failing stderr
  remove_temporary_files();
  _exit(2);
}

void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs) {
  // The library's writer (lib/files.hpp), after every path is checked; each file in its phase.
  for (const auto& [path, write] : files) check_output_path(path, inputs);
  std::vector<std::pair<std::string, FileWriter>> writers;
  for (const auto& [path, write] : files) {
    writers.emplace_back(path, [&path = path, &write = write](std::ostream& out) {
      const Phase phase("writing " + path);
      write(out);
    });
  }
  const Phase phase("writing " + (files.empty() ? std::string() : files.front().first));
  xgrad::write_files_atomically(writers, inputs);
}

}  // namespace xgrad::tool
