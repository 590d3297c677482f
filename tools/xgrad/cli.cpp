#include "cli.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
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
      if (has(a)) throw usage_error("option " + a + " given twice");
      if (spec->takes_value) {
        if (i + 1 >= args.size()) throw usage_error("option " + a + " needs a value");
        m_values[a] = args[++i];
      } else {
        m_values[a] = "";
      }
    } else {
      if (m_positional.size() == max_positional) throw usage_error("unexpected argument '" + a + "'");
      m_positional.push_back(a);
    }
  }
}

std::optional<std::string> Options::get(const std::string& name) const {
  const auto it = m_values.find(name);
  if (it == m_values.end()) return std::nullopt;
  return it->second;
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

namespace {

std::uint64_t parse_unsigned(const std::string& option, const std::string& text, std::uint64_t max) {
  std::uint64_t v = 0;
  if (text.empty()) throw usage_error(option + " needs a non-negative integer, got ''");
  for (char c : text) {
    if (c < '0' || c > '9') throw usage_error(option + " needs a non-negative integer, got '" + text + "'");
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (v > (max - digit) / 10) throw usage_error(option + " value '" + text + "' is larger than " + std::to_string(max));
    v = v * 10 + digit;
  }
  return v;
}

xt::xarray<double> normal_array(std::size_t rows, std::size_t cols, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  xt::xarray<double> a = xt::xarray<double>::from_shape({rows, cols});
  for (auto& x : a) x = normal(rng);
  return a;
}

}  // namespace

AttentionInputs attention_inputs(const Options& o, bool allow_shape) {
  AttentionInputs in;
  const bool files = o.has("--q") || o.has("--k") || o.has("--v");
  if (allow_shape && o.has("--shape")) {
    if (files) throw usage_error("give either --q --k --v or --shape, not both");
    const std::string text = *o.get("--shape");
    std::vector<std::size_t> dims;
    std::size_t start = 0;
    for (std::size_t comma; (comma = text.find(',', start)) != std::string::npos; start = comma + 1) {
      dims.push_back(parse_unsigned("--shape", text.substr(start, comma - start), 1 << 16));
    }
    dims.push_back(parse_unsigned("--shape", text.substr(start), 1 << 16));
    if (dims.size() != 4) throw usage_error("--shape needs TQ,TK,DK,DV (four integers), got '" + text + "'");
    const std::uint64_t seed = o.has("--seed") ? parse_unsigned("--seed", *o.get("--seed"), UINT64_MAX) : 0;
    std::mt19937_64 rng(seed);
    in.q = normal_array(dims[0], dims[2], rng);
    in.k = normal_array(dims[1], dims[2], rng);
    in.v = normal_array(dims[1], dims[3], rng);
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
  a.q = a.graph.input("q", to_dtype<T>(in.q, name(0, "q")));
  a.k = a.graph.input("k", to_dtype<T>(in.k, name(1, "k")));
  a.v = a.graph.input("v", to_dtype<T>(in.v, name(2, "v")));
  a.out = naming(in.origin, [&] { return attention(a.q, a.k, a.v, in.impl); });
}

template xt::xarray<float> to_dtype(const xt::xarray<double>&, const std::string&);
template xt::xarray<double> to_dtype(const xt::xarray<double>&, const std::string&);
template void build_attention(const AttentionInputs&, AttentionGraph<float>&);
template void build_attention(const AttentionInputs&, AttentionGraph<double>&);

void write_files_atomically(const std::vector<std::pair<std::string, FileWriter>>& files,
                            const std::vector<std::string>& inputs) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& [path, writer] : files) {
    for (const auto& input : inputs) {
      if (fs::exists(path, ec) && fs::equivalent(path, input, ec)) {
        throw error(path + ": is an input file; refusing to overwrite it");
      }
    }
  }
  std::vector<std::string> temps;
  const auto discard = [&] {
    for (const auto& t : temps) fs::remove(t, ec);
  };
  try {
    for (const auto& [path, writer] : files) {
      const fs::path target(path);
      std::string temp = (target.parent_path() / ("." + target.filename().string() + ".XXXXXX")).string();
      const int fd = mkstemp(temp.data());
      if (fd < 0) throw error(path + ": cannot create a file in its directory");
      close(fd);
      temps.push_back(temp);
      writer(temp);
      const mode_t mask = umask(0);  // mkstemp made it 0600; give it the usual umask-based mode
      umask(mask);
      fs::permissions(temp, static_cast<fs::perms>(0666 & ~mask));
    }
    for (std::size_t i = 0; i < files.size(); ++i) fs::rename(temps[i], files[i].first);
  } catch (const fs::filesystem_error& e) {
    discard();
    throw error(std::string(e.path1().c_str()) + ": cannot write it: " + e.code().message());
  } catch (...) {
    discard();
    throw;
  }
}

}  // namespace xgrad::tool
