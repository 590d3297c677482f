// xgrad inspect: the softmax saturation diagnostics of an exported graph.
#include <algorithm>
#include <cstdarg>
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad inspect GRAPH.json [--by-axis K] [--all] [--threshold X] [--format table|json|csv]\n"
    "\n"
    "Imports a graph written by `xgrad export` (values inputs or all), recomputes it, and prints\n"
    "for every softmax node the statistics of its rows p (length n, along its axis): the max\n"
    "weight; the entropy H = -sum p log p in nats and H / log n; the effective support exp(H);\n"
    "the Frobenius norm of the softmax Jacobian diag(p) - p p^T; the fraction of saturated rows\n"
    "(max weight >= X); and, when the graph holds its backward pass, the gradient gain\n"
    "||grad w.r.t. the softmax input|| / ||grad w.r.t. its output|| of each row. Rows with n = 1\n"
    "have H = 0 and a gain of 0. A row with every key masked (all weights 0) is counted as masked\n"
    "and left out of the statistics; a row whose incoming gradient is exactly 0 (no loss reaches\n"
    "it, a padded query say) is counted as without gradient and left out of the gain.\n"
    "\n"
    "  --by-axis K     one line per index along axis K of each softmax node (K counted from 0, an\n"
    "                  axis other than the softmax axis): for (B, H, T_q, T_k) scores, K = 1 gives\n"
    "                  one line per head; nodes without such an axis keep one line\n"
    "  --all           also the softmax nodes made by a backward pass (inside log_softmax's VJP,\n"
    "                  say), which are not the model's own and are left out by default\n"
    "  --threshold X   the saturation threshold, in (0, 1] (default 0.99)\n"
    "  --format F      table (default): one line per softmax node (or group), min/mean/max of each\n"
    "                  quantity, with the node's scope; json: the diagnostics with per-row arrays\n"
    "                  (docs/saturation.md); csv: one line per node (or group)\n"
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

// One line per node, or per group of a grouped node: the node, its group (or none) and the
// statistics to print.
struct Line {
  const SoftmaxDiagnostics* node;
  const SoftmaxGroup* group;
  const SoftmaxStats& stats() const { return group ? static_cast<const SoftmaxStats&>(*group) : *node; }
};

std::vector<Line> lines_of(const std::vector<SoftmaxDiagnostics>& diagnostics) {
  std::vector<Line> lines;
  for (const auto& d : diagnostics) {
    if (d.groups.empty()) lines.push_back({&d, nullptr});
    for (const auto& group : d.groups) lines.push_back({&d, &group});
  }
  return lines;
}

template <class T>
int run_inspect(const std::string& path, const Json& json, double threshold, const std::string& format,
                std::optional<std::size_t> by_axis, bool all) {
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
  const bool per_row = format == "json";
  if (per_row) {
    const std::size_t rows = softmax_row_count(*g);
    if (rows > max_diagnostic_rows) {
      throw error(path + ": the softmax nodes have " + std::to_string(rows) + " rows in all, more than the " +
                  std::to_string(max_diagnostic_rows) + " that --format json lists row by row; --format table or csv "
                  "summarises them");
    }
  }
  std::vector<SoftmaxDiagnostics> diagnostics =
      naming("--by-axis", [&] { return softmax_diagnostics(*g, threshold, per_row, by_axis); });
  const auto backward = std::count_if(diagnostics.begin(), diagnostics.end(), [](const auto& d) { return d.in_backward; });
  if (!all) {
    diagnostics.erase(std::remove_if(diagnostics.begin(), diagnostics.end(), [](const auto& d) { return d.in_backward; }),
                      diagnostics.end());
  }
  if (per_row) {
    std::printf("%s\n", diagnostics_to_json(diagnostics, true).dump().c_str());
    return 0;
  }
  const std::vector<Line> lines = lines_of(diagnostics);
  const auto scope_of = [&](const Line& l) -> std::string {
    const std::string& scope = g->node(l.node->node).scope;
    return scope.empty() ? "-" : scope;
  };
  // The table or CSV as one string, written at once: no partial output if memory runs out.
  std::string out;
  if (format == "csv") {
    appendf(out, "node,axis,n,rows,threshold,saturated_fraction");
    for (const char* q : {"max_weight", "entropy", "normalized_entropy", "effective_support", "jacobian_norm", "gradient_gain"}) {
      appendf(out, ",%s_min,%s_mean,%s_max", q, q, q);
    }
    appendf(out, ",scope,group_axis,index,masked_rows,rows_without_gradient,in_backward\n");
    for (const Line& l : lines) {
      const SoftmaxDiagnostics& d = *l.node;
      const SoftmaxStats& s = l.stats();
      appendf(out, "%zu,%zu,%zu,%zu,%.17g,%.17g", d.node, d.axis, d.n, s.row_count, d.threshold, s.saturated_fraction);
      for (const Summary* q : {&s.max_weight, &s.entropy, &s.normalized_entropy, &s.effective_support, &s.jacobian_norm}) {
        appendf(out, ",%.17g,%.17g,%.17g", q->min, q->mean, q->max);
      }
      if (s.gradient_gain) appendf(out, ",%.17g,%.17g,%.17g", s.gradient_gain->min, s.gradient_gain->mean, s.gradient_gain->max);
      else appendf(out, ",,,");
      // A scope's name holds no quote (scope_name_fault): one with a comma is quoted whole.
      std::string scope = g->node(d.node).scope;
      if (scope.find(',') != std::string::npos) scope = '"' + scope + '"';
      appendf(out, ",%s,%s,%s,%zu,%s,%d\n", scope.c_str(), d.group_axis ? std::to_string(*d.group_axis).c_str() : "",
              l.group ? std::to_string(l.group->index).c_str() : "", s.masked_rows,
              s.gradient_gain ? std::to_string(s.rows_without_gradient).c_str() : "", d.in_backward ? 1 : 0);
    }
    std::fputs(out.c_str(), stdout);
    return 0;
  }
  appendf(out, "%s: %zu softmax node%s (%s), saturated: max weight >= %g; min/mean/max over rows", path.c_str(),
          diagnostics.size(), diagnostics.size() == 1 ? "" : "s", dtype_name<T>(), threshold);
  if (by_axis) appendf(out, "; one line per index along axis %zu", *by_axis);
  appendf(out, "\n");
  int scope_width = 5;
  for (const Line& l : lines) scope_width = std::max(scope_width, static_cast<int>(scope_of(l).size()));
  appendf(out, "%5s %-*s", "node", scope_width, "scope");
  if (by_axis) appendf(out, " %6s", ("[" + std::to_string(*by_axis) + "]").c_str());
  appendf(out, " %8s %5s %-20s %-20s %-20s %-20s %9s %s\n", "rows", "n", "max weight", "H / log n", "exp(H)",
          "|J|_F", "saturated", "gradient gain");
  for (const Line& l : lines) {
    const SoftmaxDiagnostics& d = *l.node;
    const SoftmaxStats& s = l.stats();
    appendf(out, "%5zu %-*s", d.node, scope_width, scope_of(l).c_str());
    if (by_axis) appendf(out, " %6s", l.group ? std::to_string(l.group->index).c_str() : "-");
    std::string gain = "- (no backward pass)";
    if (s.gradient_gain) {
      gain = s.rows_without_gradient + s.masked_rows == s.row_count ? std::string("- (no row has a gradient)")
                                                                    : mmm(*s.gradient_gain);
      gain += " (node " + std::to_string(*d.vjp_node) + ")";
    }
    if (d.in_backward) gain += " [in a backward pass]";
    std::string rows_note;
    if (s.masked_rows) rows_note += "; " + std::to_string(s.masked_rows) + " rows masked";
    if (s.gradient_gain && s.rows_without_gradient) {
      rows_note += "; " + std::to_string(s.rows_without_gradient) + " rows without gradient";
    }
    appendf(out, " %8zu %5zu %-20s %-20s %-20s %-20s %8.1f%% %s%s\n", s.row_count, d.n, mmm(s.max_weight).c_str(),
            mmm(s.normalized_entropy).c_str(), mmm(s.effective_support).c_str(), mmm(s.jacobian_norm).c_str(),
            100 * s.saturated_fraction, gain.c_str(), rows_note.c_str());
  }
  if (backward && !all) {
    appendf(out, "(%zu softmax node%s made by a backward pass left out; --all lists %s)\n", static_cast<std::size_t>(backward),
            backward == 1 ? "" : "s", backward == 1 ? "it" : "them");
  }
  std::fputs(out.c_str(), stdout);
  return 0;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--threshold", true}, {"--format", true}, {"--by-axis", true}, {"--all", false}}, 1);
  const std::string path = o.first_positional("GRAPH.json");
  const std::string format = o.choice("--format", {"table", "json", "csv"}, "table");
  const double threshold = o.real("--threshold", {0, 1, true, false}, 0.99);
  std::optional<std::size_t> by_axis;
  if (o.has("--by-axis")) by_axis = o.integer("--by-axis", 0, 63, 0);
  const bool all = o.has("--all");
  const Phase reading("reading " + path);
  const std::string text = read_text_file(path);  // its errors name the file already
  const Json json = naming(path, [&] { return parse_graph_json(text); });
  const std::string dtype = naming(path + ": graph JSON", [&] { return graph_json_dtype(json); });
  return with_dtype(dtype,
                    [&](auto tag) { return run_inspect<decltype(tag)>(path, json, threshold, format, by_axis, all); });
}

}  // namespace

const Command inspect_command = {"inspect", "softmax saturation diagnostics of an exported graph", help, run};

}  // namespace xgrad::tool
