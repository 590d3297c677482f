// The memory of a JSON export of a graph of many nodes, streamed or through a DOM. One
// measurement per process:
//   xgrad_export_rss --nodes N --mode stream|dom [--out FILE] [--max-extra-mib M]
// builds a chain of N nodes (x (1, 4), then N - 1 softmax nodes: a graph of N values of 4
// doubles), then exports it with its leaves' values to FILE (default: a file in /tmp, removed
// after): `stream` with save_json (write_json a node at a time), `dom` as exports were written
// before it (to_json(g).dump() and the text written whole). Prints the resident set of the graph,
// the export's peak above it (VmHWM, reset before the export), the file's size and the seconds.
// With --max-extra-mib, exits 1 when the peak above the graph exceeds M MiB (a ctest guards the
// streamed export's bound so). tools/setup bench runs both at N = 300,000 and the streamed one at
// N = 2,000,000 (the DOM would need some 13 GiB there).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <xgrad/xgrad.hpp>

#include "memory.hpp"

namespace {

using xgrad::bench::restart_peak;
using xgrad::bench::status_mib;

int usage() {
  std::fprintf(stderr, "usage: xgrad_export_rss --nodes N --mode stream|dom [--out FILE] [--max-extra-mib M]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t nodes = 0;
  std::string mode, out = (std::filesystem::temp_directory_path() / "xgrad_export_rss.json").string();
  double max_extra = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string option = argv[i], value = argv[i + 1];
    if (option == "--nodes") nodes = std::strtoul(value.c_str(), nullptr, 10);
    else if (option == "--mode") mode = value;
    else if (option == "--out") out = value;
    else if (option == "--max-extra-mib") max_extra = std::strtod(value.c_str(), nullptr);
    else return usage();
  }
  if (argc % 2 != 1 || nodes < 1 || (mode != "stream" && mode != "dom")) return usage();

  xgrad::Graph<double> g;
  xgrad::Var<double> y = g.input("x", xt::xarray<double>{{0.5, -1.0, 2.0, 0.25}});
  for (std::size_t i = 1; i < nodes; ++i) y = xgrad::softmax(y);
  g.set_output("y", y);
  if (!restart_peak()) {
    std::fprintf(stderr, "xgrad_export_rss: cannot reset the peak RSS (/proc/self/clear_refs)\n");
    return 1;
  }
  const double graph = status_mib("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  if (mode == "stream") {
    xgrad::save_json(out, g, xgrad::ExportValues::inputs);
  } else {
    xgrad::write_file_atomically(out, xgrad::to_json(g, xgrad::ExportValues::inputs).dump() + "\n");
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double extra = status_mib("VmHWM") - graph;
  const double file = static_cast<double>(std::filesystem::file_size(out)) / (1 << 20);
  std::printf("mode %-6s  nodes %zu  graph_rss_MiB %.1f  export_extra_MiB %.1f  file_MiB %.1f  seconds %.2f\n",
              mode.c_str(), nodes, graph, extra, file, seconds);
  std::filesystem::remove(out);
  if (max_extra >= 0 && extra > max_extra) {
    std::fprintf(stderr, "xgrad_export_rss: the export took %.1f MiB above the graph, more than --max-extra-mib %.1f\n", extra, max_extra);
    return 1;
  }
  return 0;
}
