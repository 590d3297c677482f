// The readers' parse time on documents as large as their limits allow, where Json's own
// insertion (a linear search per key) once made them quadratic (issue 37: 200,000 metadata
// entries ran past 20 s): a safetensors header of 200,000 metadata entries, a safetensors file of
// 100,000 tensors, an .npz whose __metadata__.json has 200,000 entries, a graph JSON of 100,000
// named outputs, and a (10000, 100) JSON array. Per case: the median seconds, the ratio to a
// linear scan of the same bytes (std::count of one byte: the least a reader can do), and the
// ratio of the time at 2N to the time at N (about 2 when linear, 4 when quadratic).
//   xgrad_parse_bench [--scale S] [--runs R] [--limit SECONDS]
// --scale multiplies every N (default 1); --limit makes the program exit 1 if a case at its N
// takes longer (the ctest passes 3, three times the bound of 1 s: a guard, not a timing).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <xgrad/xgrad.hpp>

#include "timing.hpp"

namespace {

using xgrad::bench::median;
using xgrad::bench::median_seconds;

struct Case {
  const char* name;
  std::size_t n;
  std::function<std::string(std::size_t)> make;                 // the document of n entries
  std::function<std::size_t(const std::string&)> read;          // reads it; returns its entry count
};

xgrad::CheckpointMetadata metadata_of(std::size_t n) {
  xgrad::CheckpointMetadata m;
  for (std::size_t i = 0; i < n; ++i) m["key" + std::to_string(i)] = "value " + std::to_string(i);
  return m;
}

std::string metadata_file(std::size_t n, xgrad::CheckpointFormat format) {
  const std::map<std::string, xt::xarray<float>> one = {{"w", xt::xarray<float>{1.0f}}};
  return xgrad::checkpoint_bytes(one, metadata_of(n), format, "bench");
}

std::string tensors_file(std::size_t n) {
  std::map<std::string, xt::xarray<float>> t;
  for (std::size_t i = 0; i < n; ++i) t.emplace("layer." + std::to_string(i) + ".weight", xt::xarray<float>{float(i), 1.0f});
  return xgrad::checkpoint_bytes(t, {}, xgrad::CheckpointFormat::safetensors, "bench");
}

std::string outputs_graph(std::size_t n) {
  xgrad::Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{1.0, 2.0});
  const auto y = xgrad::neg(x);
  for (std::size_t i = 0; i < n; ++i) g.set_output("out" + std::to_string(i), y);
  return xgrad::to_json(g).dump();
}

std::string json_array(std::size_t n) {
  std::string text = "[";
  for (std::size_t i = 0; i < n; ++i) {
    text += i ? ",[" : "[";
    for (std::size_t j = 0; j < 100; ++j) text += (j ? ",0." : "0.") + std::to_string((i + j) % 1000);
    text += "]";
  }
  return text + "]";
}

std::size_t positive(const char* option, const char* text) {
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  if (!*text || *end || !(v > 0)) {
    std::fprintf(stderr, "xgrad_parse_bench: %s needs a positive number, not '%s'\n", option, text);
    std::exit(2);
  }
  return static_cast<std::size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  double scale = 1, limit = 0;
  std::size_t runs = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "usage: xgrad_parse_bench [--scale S] [--runs R] [--limit SECONDS]\n");
      return 2;
    }
    if (a == "--scale") scale = std::strtod(argv[++i], nullptr);
    else if (a == "--runs") runs = positive("--runs", argv[++i]);
    else if (a == "--limit") limit = std::strtod(argv[++i], nullptr);
    else {
      std::fprintf(stderr, "usage: xgrad_parse_bench [--scale S] [--runs R] [--limit SECONDS]\n");
      return 2;
    }
  }
  if (!(scale > 0)) {
    std::fprintf(stderr, "xgrad_parse_bench: --scale needs a positive number\n");
    return 2;
  }
  using xgrad::CheckpointFormat;
  const std::vector<Case> cases = {
      {"safetensors metadata entries", 200000, [](std::size_t n) { return metadata_file(n, CheckpointFormat::safetensors); },
       [](const std::string& b) { return xgrad::parse_checkpoint(b, CheckpointFormat::safetensors, "b").metadata.size(); }},
      {"safetensors tensors", 100000, tensors_file,
       [](const std::string& b) { return xgrad::parse_checkpoint(b, CheckpointFormat::safetensors, "b").tensors.size(); }},
      {"npz metadata entries", 200000, [](std::size_t n) { return metadata_file(n, CheckpointFormat::npz); },
       [](const std::string& b) { return xgrad::parse_checkpoint(b, CheckpointFormat::npz, "b").metadata.size(); }},
      {"graph JSON named outputs", 100000, outputs_graph,
       [](const std::string& b) { return xgrad::graph_from_json<double>(b)->outputs().size(); }},
      {"JSON array rows (n x 100)", 10000, json_array,
       [](const std::string& b) { return xgrad::parse_json_array(b, "b").values.shape()[0]; }},
  };
  std::printf("%-30s %8s %9s %10s %12s %10s\n", "case", "N", "MB", "seconds", "x scan", "t(2N)/t(N)");
  bool within = true;
  for (const Case& c : cases) {
    const std::size_t n = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(c.n) * scale));
    const std::string doc = c.make(n), doc2 = c.make(2 * n);
    if (c.read(doc) != n || c.read(doc2) != 2 * n) {
      std::fprintf(stderr, "xgrad_parse_bench: %s: the reader did not give back %zu entries\n", c.name, n);
      return 1;
    }
    volatile std::size_t sink = 0;
    const double scan = median_seconds(runs, [&] { sink = sink + static_cast<std::size_t>(std::count(doc.begin(), doc.end(), '"')); });
    const double t = median_seconds(runs, [&] { sink = sink + c.read(doc); });
    const double t2 = median_seconds(runs, [&] { sink = sink + c.read(doc2); });
    std::printf("%-30s %8zu %9.2f %10.4f %12.0f %10.2f\n", c.name, n, static_cast<double>(doc.size()) / 1e6, t, t / scan, t2 / t);
    if (limit > 0 && t > limit) within = false;
  }
  if (!within) {
    std::printf("a case took longer than --limit %.2f s\n", limit);
    return 1;
  }
  return 0;
}
