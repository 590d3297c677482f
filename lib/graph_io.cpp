#include <xgrad/lib/graph_io.hpp>

#include <cmath>
#include <cstdio>
#include <sstream>

#include <xgrad/lib/diagnostics.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

const std::string what = "graph JSON";

// A DOT double-quoted string: quotes and backslashes escaped, line breaks as \n.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

// One line of attributes: "alpha=0.707107", "axis=-1", "transpose_b" (true flags by name only).
std::string attrs_line(const Json& attrs) {
  std::string line;
  for (const auto& item : attrs.items()) {
    const Json& v = item.value();
    if (v.is_boolean() && !v.get<bool>()) continue;
    if (!line.empty()) line += ", ";
    line += item.key();
    if (v.is_boolean()) continue;
    if (v.is_number_float()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v.get<double>());
      line += std::string("=") + buf;
    } else {
      line += "=" + v.dump();
    }
  }
  return line;
}

// White for no saturated row, through pink, to red (#d62728) for all rows saturated.
std::string saturation_colour(double fraction) {
  const auto mix = [&](int to) { return static_cast<int>(std::lround(255 - fraction * (255 - to))); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", mix(0xd6), mix(0x27), mix(0x28));
  return buf;
}

}  // namespace

template <class T>
Json to_json(const Graph<T>& graph, ExportValues values) {
  graph.require_values("export");
  if (values == ExportValues::none) return detail::graph_to_json(graph, values);
  // The per-row statistics come along when there are at most max_diagnostic_rows rows.
  const bool per_row = softmax_row_count(graph) <= max_diagnostic_rows;
  return detail::graph_to_json(graph, values, diagnostics_to_json(softmax_diagnostics(graph, 0.99, per_row), per_row));
}

Json parse_graph_json(std::string_view text) { return parse_json(text, JsonLimits::max_depth, what); }

template <class T>
std::unique_ptr<Graph<T>> graph_from_parsed_json(const Json& json, const ImportOptions& options) {
  // The registry first, then the caller's factory for the ops it does not know.
  const OpFactory ops = [&](const std::string& name, const JsonCursor& attrs) {
    std::shared_ptr<const Op> op = make_op(name, attrs);
    if (!op && options.ops) op = options.ops(name, attrs);
    return op;
  };
  auto graph = std::make_unique<Graph<T>>();
  with_context([] { return what + ": "; },
               [&] { detail::graph_from_json(json, ops, *graph, options.max_elements, options.max_work); });
  return graph;
}

template <class T>
std::unique_ptr<Graph<T>> graph_from_parsed_json(const Json& json, std::size_t max_elements, double max_work) {
  return graph_from_parsed_json<T>(json, ImportOptions{nullptr, max_elements, max_work});
}

template <class T>
std::unique_ptr<Graph<T>> graph_from_json(std::string_view text, const ImportOptions& options) {
  return graph_from_parsed_json<T>(parse_graph_json(text), options);
}

template <class T>
std::unique_ptr<Graph<T>> graph_from_json(std::string_view text, std::size_t max_elements, double max_work) {
  return graph_from_parsed_json<T>(parse_graph_json(text), ImportOptions{nullptr, max_elements, max_work});
}

template <class T>
std::string to_dot(const Graph<T>& g) {
  g.require_values("to_dot");
  std::ostringstream out;
  out << "digraph xgrad {\n"
         "  rankdir=TB;\n"
         "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=10];\n"
         "  edge [color=\"#555555\"];\n";
  std::map<std::size_t, double> saturated;  // softmax node -> saturated fraction of its rows
  for (const auto& d : softmax_diagnostics(g, 0.99, false)) saturated[d.node] = d.saturated_fraction;
  const auto box = [&](std::size_t i) {
    const Node<T>& n = g.node(i);
    std::string label = n.op_name();
    if (!n.name.empty()) label += "\n" + n.name;
    if (n.op && !attrs_line(n.op->attrs()).empty()) label += "\n" + attrs_line(n.op->attrs());
    for (std::size_t k = 0; k < n.output_count(); ++k) label += "\n" + shape_str(n.shape(k));
    const auto s = saturated.find(i);
    if (s != saturated.end()) label += "\nsaturated " + std::to_string(static_cast<int>(std::lround(100 * s->second))) + "%";
    out << "    n" << i << " [label=\"" << dot_escape(label) << "\"";
    if (n.is_leaf()) out << ", fillcolor=\"#dbe9f6\"";
    if (s != saturated.end()) out << ", fillcolor=\"" << saturation_colour(s->second) << "\"";
    out << "];\n";
  };
  out << "  subgraph cluster_forward {\n    label=\"forward\"; color=\"#999999\";\n";
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!g.node(i).in_backward()) box(i);
  }
  out << "  }\n  subgraph cluster_backward {\n"
         "    label=\"backward\"; style=filled; fillcolor=\"#fdf1e4\"; color=\"#e6a15c\";\n";
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (g.node(i).in_backward()) box(i);
  }
  out << "  }\n";
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (const Slot& in : g.node(i).inputs) out << "  n" << in.node << " -> n" << i << ";\n";
  }
  for (std::size_t i = 0; i < g.size(); ++i) {
    for (const auto& o : g.node(i).outputs) {
      if (!o.grad_of) continue;
      out << "  n" << i << " -> n" << o.grad_of->node
          << " [style=dashed, color=\"#e6a15c\", arrowhead=empty, constraint=false];\n";
    }
  }
  // Named outputs and gradients: a plain label tied to the node by a dotted line.
  const auto names = [&](const std::map<std::string, Slot>& m, const std::string& kind) {
    for (const auto& [name, slot] : m) {
      const std::size_t id = slot.node;
      const std::string label = dot_escape(kind + " " + name);
      out << "  \"" << label << "\" [shape=plaintext, style=\"\"];\n  n" << id << " -> \"" << label
          << "\" [style=dotted, arrowhead=none];\n";
    }
  };
  names(g.outputs(), "output");
  names(g.grads(), "grad");
  out << "}\n";
  return out.str();
}

#define XGRAD_INSTANTIATE_GRAPH_IO(T)                                          \
  template Json to_json(const Graph<T>&, ExportValues);                       \
  template std::unique_ptr<Graph<T>> graph_from_parsed_json<T>(const Json&, std::size_t, double); \
  template std::unique_ptr<Graph<T>> graph_from_parsed_json<T>(const Json&, const ImportOptions&); \
  template std::unique_ptr<Graph<T>> graph_from_json<T>(std::string_view, std::size_t, double);    \
  template std::unique_ptr<Graph<T>> graph_from_json<T>(std::string_view, const ImportOptions&);   \
  template std::string to_dot(const Graph<T>&);
XGRAD_INSTANTIATE_GRAPH_IO(float)
XGRAD_INSTANTIATE_GRAPH_IO(double)
#undef XGRAD_INSTANTIATE_GRAPH_IO

}  // namespace xgrad
