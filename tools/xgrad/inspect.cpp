// xgrad inspect: the softmax saturation diagnostics of an exported graph.
#include <cstdarg>
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad inspect GRAPH.json [--threshold X] [--format table|json|csv]\n"
    "\n"
    "Imports a graph written by `xgrad export` (values inputs or all), recomputes it, and prints\n"
    "for every softmax node the statistics of its rows p (length n, along its axis): the max\n"
    "weight; the entropy H = -sum p log p in nats and H / log n; the effective support exp(H);\n"
    "the Frobenius norm of the softmax Jacobian diag(p) - p p^T; the fraction of saturated rows\n"
    "(max weight >= X); and, when the graph holds its backward pass, the gradient gain\n"
    "||grad w.r.t. the softmax input|| / ||grad w.r.t. its output|| of each row. Rows with n = 1\n"
    "have H = 0 and a gain of 0.\n"
    "\n"
    "  --threshold X   the saturation threshold, in (0, 1] (default 0.99)\n"
    "  --format F      table (default): one line per softmax node, min/mean/max of each quantity;\n"
    "                  json: the diagnostics with per-row arrays; csv: one line per node\n"
    "\n"
    "exit status: 0 success, 2 bad usage or input, out of memory or a failed write (one line on stderr)\n";

// printf onto the end of `out`.
__attribute__((format(printf, 2, 3))) void appendf(std::string& out, const char* format, ...) {
  std::va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  const int n = std::vsnprintf(nullptr, 0, format, args);
  va_end(args);
  const std::size_t at = out.size();
  out.resize(at + static_cast<std::size_t>(n) + 1);
  std::vsnprintf(&out[at], static_cast<std::size_t>(n) + 1, format, again);
  va_end(again);
  out.pop_back();
}

std::string mmm(const Summary& s) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g/%.3g/%.3g", s.min, s.mean, s.max);
  return buf;
}

template <class T>
int run_inspect(const std::string& path, const Json& json, double threshold, const std::string& format) {
  const Phase importing("importing " + path);
  const auto g = naming(path, [&] { return graph_from_parsed_json<T>(json); });
  // A leaf's stored value: "data" of its output (version 2), "value" (version 1).
  const bool version_1 = json["version"] == 1;
  for (std::size_t i = 0; i < g->size(); ++i) {
    const Json& n = json["nodes"][i];
    if (g->node(i).is_leaf() && !(version_1 ? n.contains("value") : n["outputs"][0].contains("data"))) {
      throw error(path + ": node " + std::to_string(i) + " ('" + g->node(i).name +
                  "') has no stored value; export with --values inputs or all");
    }
  }
  // Per-row statistics only for --format json, and only as many rows as the library keeps.
  const Phase diagnosing("computing the softmax diagnostics of " + path);
  if (format == "json") {
    const std::size_t rows = softmax_row_count(*g);
    if (rows > max_diagnostic_rows) {
      throw error(path + ": the softmax nodes have " + std::to_string(rows) + " rows in all, more than the " +
                  std::to_string(max_diagnostic_rows) + " that --format json lists row by row; --format table or csv "
                  "summarises them");
    }
    std::printf("%s\n", diagnostics_to_json(softmax_diagnostics(*g, threshold, true), true).dump().c_str());
    return 0;
  }
  // The table or CSV as one string, written at once: no partial output if memory runs out.
  const auto diagnostics = softmax_diagnostics(*g, threshold, false);
  std::string out;
  if (format == "csv") {
    appendf(out, "node,axis,n,rows,threshold,saturated_fraction");
    for (const char* q : {"max_weight", "entropy", "normalized_entropy", "effective_support", "jacobian_norm", "gradient_gain"}) {
      appendf(out, ",%s_min,%s_mean,%s_max", q, q, q);
    }
    appendf(out, "\n");
    for (const auto& d : diagnostics) {
      appendf(out, "%zu,%zu,%zu,%zu,%.17g,%.17g", d.node, d.axis, d.n, d.row_count, d.threshold, d.saturated_fraction);
      for (const Summary* s : {&d.max_weight, &d.entropy, &d.normalized_entropy, &d.effective_support, &d.jacobian_norm}) {
        appendf(out, ",%.17g,%.17g,%.17g", s->min, s->mean, s->max);
      }
      if (d.gradient_gain) appendf(out, ",%.17g,%.17g,%.17g\n", d.gradient_gain->min, d.gradient_gain->mean, d.gradient_gain->max);
      else appendf(out, ",,,\n");
    }
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  appendf(out, "%s: %zu softmax node%s (%s), saturated: max weight >= %g; min/mean/max over rows\n", path.c_str(),
              diagnostics.size(), diagnostics.size() == 1 ? "" : "s", dtype_name<T>(), threshold);
  appendf(out, "%5s %8s %5s %-20s %-20s %-20s %-20s %9s %s\n", "node", "rows", "n", "max weight", "H / log n",
              "exp(H)", "|J|_F", "saturated", "gradient gain");
  for (const auto& d : diagnostics) {
    appendf(out, "%5zu %8zu %5zu %-20s %-20s %-20s %-20s %8.1f%% %s\n", d.node, d.row_count, d.n,
                mmm(d.max_weight).c_str(), mmm(d.normalized_entropy).c_str(), mmm(d.effective_support).c_str(),
                mmm(d.jacobian_norm).c_str(), 100 * d.saturated_fraction,
                d.gradient_gain ? (mmm(*d.gradient_gain) + " (node " + std::to_string(*d.vjp_node) + ")").c_str()
                                : "- (no backward pass)");
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--threshold", true}, {"--format", true}}, 1);
  if (o.positional().empty()) throw usage_error("missing GRAPH.json");
  const std::string format = o.choice("--format", {"table", "json", "csv"}, "table");
  const double threshold = o.real("--threshold", {0, 1, true, false}, 0.99);
  const std::string path = o.positional()[0];
  const Phase reading("reading " + path);
  const std::string text = read_text_file(path);  // its errors name the file already
  const Json json = naming(path, [&] { return parse_graph_json(text); });
  const std::string dtype = naming(path + ": graph JSON", [&] { return graph_json_dtype(json); });
  return with_dtype(dtype, [&](auto tag) { return run_inspect<decltype(tag)>(path, json, threshold, format); });
}

}  // namespace

const Command inspect_command = {"inspect", "softmax saturation diagnostics of an exported graph", help, run};

}  // namespace xgrad::tool
