// xgrad replay: import an exported graph, re-run it, and compare with the values it stores.
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad replay GRAPH.json\n"
    "\n"
    "Imports a graph written by `xgrad export` (or to_json), re-runs every node from the stored\n"
    "leaf values, and compares each value stored in the file with the recomputed one, bit for bit\n"
    "(-0.0 differs from 0.0; any NaN equals any NaN, as the format stores NaN as \"nan\").\n"
    "\n"
    "exit status: 0 every stored value is reproduced, 1 one differs (the first is named),\n"
    "             2 bad usage or input (one line on stderr naming the file and the JSON path)\n"
    "             or out of memory\n"
    "\n"
    "A product split over several threads can differ in its last bits from one on a single thread:\n"
    "replay with the OPENBLAS_NUM_THREADS the export was made with (1 for bits that repeat).\n";

template <class T>
int run_replay(const std::string& path, const Json& json) {
  const Phase phase("replaying " + path);
  const std::unique_ptr<Graph<T>> g = naming(path, [&] { return graph_from_parsed_json<T>(json); });
  const auto stored = naming(path, [&] { return stored_values<T>(json); });
  // The import has run every node's forward once, from the stored leaves: that is the replay.
  std::size_t compared = 0;
  for (std::size_t id = 0; id < stored.size(); ++id) {
    const Node<T>& n = g->node(id);
    for (std::size_t k = 0; k < stored[id].size(); ++k) {
      if (!stored[id][k]) continue;
      const xt::xarray<T>& replayed = n.value(k);
      for (std::size_t i = 0; i < replayed.size(); ++i) {
        const T s = stored[id][k]->data()[i], r = replayed.data()[i];
        if (!same_bits_any_nan(s, r)) {
          const std::string output = n.output_count() > 1 ? " output " + std::to_string(k) : "";
          std::printf("%s: node %zu%s (%s%s%s) differs at %s: stored %.17g, replayed %.17g\n", path.c_str(), id,
                      output.c_str(), n.op_name().c_str(), n.name.empty() ? "" : " ", n.name.c_str(),
                      index_str(unravel_index(i, replayed.shape())).c_str(), static_cast<double>(s),
                      static_cast<double>(r));
          return 1;
        }
      }
      ++compared;
    }
  }
  std::printf("%s: replayed %zu nodes (%s); %zu stored values reproduced bit for bit\n", path.c_str(), g->size(),
              dtype_name<T>(), compared);
  return 0;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {}, 1);
  const std::string path = o.first_positional("GRAPH.json");
  const Phase reading("reading " + path);
  const GraphFile file = read_graph_file(path);
  return with_dtype(file.dtype, [&](auto tag) { return run_replay<decltype(tag)>(path, file.json); });
}

}  // namespace

const Command replay_command = {"replay", "re-run an exported graph and compare with its stored values", help, run};

}  // namespace xgrad::tool
