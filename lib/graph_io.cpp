#include <xgrad/lib/graph_io.hpp>

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include <xgrad/lib/diagnostics.hpp>
#include <xgrad/lib/files.hpp>
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

// An export's "diagnostics" come with values: the softmax diagnostics, with the per-row
// statistics when there are at most max_diagnostic_rows rows.
template <class T>
bool diagnostics_per_row(const Graph<T>& graph) {
  return softmax_row_count(graph) <= max_diagnostic_rows;
}

}  // namespace

template <class T>
Json to_json(const Graph<T>& graph, ExportValues values) {
  graph.require_values("export");
  if (values == ExportValues::none) return detail::graph_to_json(graph, values);
  const bool per_row = diagnostics_per_row(graph);
  return detail::graph_to_json(graph, values, diagnostics_to_json(softmax_diagnostics(graph, 0.99, per_row), per_row));
}

template <class T>
void write_json(std::ostream& out, const Graph<T>& graph, ExportValues values) {
  graph.require_values("export");
  if (values == ExportValues::none) return detail::write_graph_json(out, graph, values);
  const bool per_row = diagnostics_per_row(graph);
  detail::write_graph_json(out, graph, values, [&](std::ostream& o) {
    o << '[';
    bool first = true;
    for_each_softmax_diagnostics(graph, 0.99, per_row, std::nullopt, [&](const SoftmaxDiagnostics& d) {
      if (!first) o << ',';
      first = false;
      const std::string text = diagnostics_to_json(std::vector<SoftmaxDiagnostics>{d}, per_row).dump();
      o.write(text.data() + 1, static_cast<std::streamsize>(text.size() - 2));  // the element, without [ and ]
    });
    o << ']';
  });
}

template <class T>
void save_json(const std::string& path, const Graph<T>& graph, ExportValues values, const std::vector<std::string>& inputs) {
  write_file_atomically(path, [&](std::ostream& out) {
    write_json(out, graph, values);
    out << '\n';
  }, inputs);
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

namespace {

// True if the node's scope is `scope` or nested in it ("enc.l1" holds "enc.l1" and "enc.l1.attn",
// not "enc.l10").
bool in_scope(const std::string& node_scope, const std::string& scope) {
  return node_scope.size() >= scope.size() && node_scope.compare(0, scope.size(), scope) == 0 &&
         (node_scope.size() == scope.size() || node_scope[scope.size()] == '.');
}

// The scope a scope is nested in: "enc.l1" of "enc.l1.attn", "" of "enc".
std::string parent_scope(const std::string& scope) {
  const std::size_t dot = scope.rfind('.');
  return dot == std::string::npos ? std::string() : scope.substr(0, dot);
}

// The nodes to_dot draws: those every filter of `o` lets through.
template <class T>
std::vector<char> drawn_nodes(const Graph<T>& g, const DotOptions& o) {
  std::vector<char> drawn(g.size(), 1);
  if (!o.scope.empty()) {
    bool any = false;
    std::set<std::string> scopes;
    for (std::size_t i = 0; i < g.size(); ++i) {
      drawn[i] = in_scope(g.node(i).scope, o.scope);
      any = any || drawn[i];
      if (!g.node(i).scope.empty()) scopes.insert(g.node(i).scope);
    }
    if (!any) {
      std::string known;
      for (const auto& s : scopes) {
        if (known.size() > 300) {
          known += ", ...";
          break;
        }
        known += (known.empty() ? "" : ", ") + s;
      }
      throw error("to_dot: no node is in scope '" + o.scope + "'; " +
                  (known.empty() ? std::string("the graph has no named scopes") : "its scopes: " + known));
    }
  }
  if (o.around) {
    if (*o.around >= g.size()) {
      throw error("to_dot: no node " + std::to_string(*o.around) + " to draw around: the graph has " +
                  std::to_string(g.size()) + " nodes (0 to " + std::to_string(g.size() - 1) + ")");
    }
    // Breadth first over the edges in both directions, up to `depth` of them.
    std::vector<std::vector<std::size_t>> next(g.size());
    for (std::size_t i = 0; i < g.size(); ++i) {
      for (const Slot& in : g.node(i).inputs) {
        next[i].push_back(in.node);
        next[in.node].push_back(i);
      }
    }
    std::vector<std::size_t> distance(g.size(), std::size_t(-1));
    std::vector<std::size_t> queue = {*o.around};
    distance[*o.around] = 0;
    for (std::size_t at = 0; at < queue.size(); ++at) {
      const std::size_t i = queue[at];
      if (distance[i] == o.depth) continue;
      for (std::size_t j : next[i]) {
        if (distance[j] != std::size_t(-1)) continue;
        distance[j] = distance[i] + 1;
        queue.push_back(j);
      }
    }
    for (std::size_t i = 0; i < g.size(); ++i) drawn[i] = drawn[i] && distance[i] != std::size_t(-1);
  }
  if (o.forward_only) {
    for (std::size_t i = 0; i < g.size(); ++i) drawn[i] = drawn[i] && !g.node(i).in_backward();
  }
  return drawn;
}

}  // namespace

template <class T>
bool dot_collapses_scopes(const Graph<T>& g, const DotOptions& o) {
  if (o.collapse != DotOptions::Collapse::automatic) return o.collapse == DotOptions::Collapse::always;
  if (!o.scope.empty() || o.around) return false;
  const std::vector<char> drawn = drawn_nodes(g, o);
  return static_cast<std::size_t>(std::count(drawn.begin(), drawn.end(), 1)) > o.collapse_above;
}

template <class T>
std::string to_dot(const Graph<T>& g, const DotOptions& o) {
  g.require_values("to_dot");
  const std::vector<char> drawn = drawn_nodes(g, o);
  const bool collapse = dot_collapses_scopes(g, o);
  std::ostringstream out;
  out << "digraph xgrad {\n"
         "  rankdir=TB;\n"
         "  node [shape=box, style=\"rounded,filled\", fillcolor=white, fontname=\"Helvetica\", fontsize=10];\n"
         "  edge [color=\"#555555\"];\n";
  // softmax node -> saturated fraction of its rows (or of its worst group), and its label
  std::map<std::size_t, double> saturated;
  std::map<std::size_t, std::string> saturation_label;
  for (const auto& d : softmax_diagnostics(g, 0.99, false, o.group_axis)) {
    if (d.in_backward && !o.backward_softmax) continue;
    const auto percent = [](double f) { return std::to_string(static_cast<int>(std::lround(100 * f))) + "%"; };
    const SoftmaxGroup* worst = worst_group(d);
    saturated[d.node] = worst ? worst->saturated_fraction : d.saturated_fraction;
    saturation_label[d.node] = "saturated " + percent(d.saturated_fraction);
    if (worst) {
      saturation_label[d.node] += "\n[" + std::to_string(*d.group_axis) + "] = " + std::to_string(worst->index) +
                                  ": " + percent(worst->saturated_fraction) + " (worst)";
    }
  }

  // Where each drawn node goes: its own box "n<i>", or, collapsed, the box of its scope (and
  // pass) "c<k>". A scoped node's box when collapsed: one per (scope, backward).
  struct Box {
    std::string scope;
    bool backward = false;
    std::size_t nodes = 0;
    std::optional<double> worst;  // the most saturated softmax in it
  };
  std::vector<Box> boxes;
  std::map<std::pair<std::string, bool>, std::size_t> box_of_scope;
  std::vector<std::string> id(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!drawn[i]) continue;
    const Node<T>& n = g.node(i);
    if (!collapse || n.scope.empty()) {
      id[i] = "n" + std::to_string(i);
      continue;
    }
    const auto key = std::make_pair(n.scope, n.in_backward());
    auto [it, fresh] = box_of_scope.emplace(key, boxes.size());
    if (fresh) boxes.push_back({n.scope, n.in_backward(), 0, std::nullopt});
    Box& b = boxes[it->second];
    ++b.nodes;
    const auto s = saturated.find(i);
    if (s != saturated.end()) b.worst = std::max(b.worst.value_or(0.0), s->second);
    id[i] = "c" + std::to_string(it->second);
  }

  const auto node_box = [&](std::size_t i, const std::string& indent) {
    const Node<T>& n = g.node(i);
    std::string label = n.op_name();
    if (!n.name.empty()) label += "\n" + n.name;
    if (n.op && !attrs_line(n.op->attrs()).empty()) label += "\n" + attrs_line(n.op->attrs());
    for (std::size_t k = 0; k < n.output_count(); ++k) label += "\n" + shape_str(n.shape(k));
    const auto s = saturated.find(i);
    if (s != saturated.end()) label += "\n" + saturation_label[i];
    out << indent << "n" << i << " [label=\"" << dot_escape(label) << "\"";
    if (n.is_leaf()) out << ", fillcolor=\"#dbe9f6\"";
    if (s != saturated.end()) out << ", fillcolor=\"" << saturation_colour(s->second) << "\"";
    out << "];\n";
  };
  const auto scope_box = [&](std::size_t k, const std::string& indent) {
    const Box& b = boxes[k];
    std::string label = b.scope + (b.backward ? " (backward)" : "") + "\n" + std::to_string(b.nodes) + " nodes";
    if (b.worst) label += "\nsaturated " + std::to_string(static_cast<int>(std::lround(100 * *b.worst))) + "% (worst softmax)";
    out << indent << "c" << k << " [label=\"" << dot_escape(label) << "\", shape=box3d, fillcolor=\""
        << (b.worst ? saturation_colour(*b.worst) : std::string("#eeeeee")) << "\"];\n";
  };

  // One pass (forward or backward) as a cluster, its nodes in nested clusters by scope.
  int clusters = 0;
  const auto pass = [&](bool backward) {
    std::map<std::string, std::vector<std::size_t>> by_scope;  // scope -> its own drawn nodes
    for (std::size_t i = 0; i < g.size(); ++i) {
      if (drawn[i] && g.node(i).in_backward() == backward && id[i][0] == 'n') by_scope[g.node(i).scope].push_back(i);
    }
    std::map<std::string, std::vector<std::size_t>> boxes_by_scope;
    for (std::size_t k = 0; k < boxes.size(); ++k) {
      if (boxes[k].backward == backward) boxes_by_scope[parent_scope(boxes[k].scope)].push_back(k);
    }
    if (by_scope.empty() && boxes_by_scope.empty()) return;
    // Every scope with nodes, and the scopes it is nested in, each a cluster in its parent's.
    std::set<std::string> scopes;
    for (const auto& [scope, nodes] : by_scope) {
      for (std::string s = scope; !s.empty(); s = parent_scope(s)) scopes.insert(s);
    }
    for (const auto& [scope, ks] : boxes_by_scope) {
      for (std::string s = scope; !s.empty(); s = parent_scope(s)) scopes.insert(s);
    }
    std::function<void(const std::string&, const std::string&)> emit = [&](const std::string& scope,
                                                                          const std::string& indent) {
      for (std::size_t i : by_scope[scope]) node_box(i, indent);
      for (std::size_t k : boxes_by_scope[scope]) scope_box(k, indent);
      for (const std::string& child : scopes) {
        if (parent_scope(child) != scope) continue;
        out << indent << "subgraph cluster_" << clusters++ << " {\n"
            << indent << "  label=\"" << dot_escape(child) << "\"; style=\"rounded,dashed\"; color=\"#777777\";\n";
        emit(child, indent + "  ");
        out << indent << "}\n";
      }
    };
    if (backward) {
      out << "  subgraph cluster_backward {\n"
             "    label=\"backward\"; style=filled; fillcolor=\"#fdf1e4\"; color=\"#e6a15c\";\n";
    } else {
      out << "  subgraph cluster_forward {\n    label=\"forward\"; color=\"#999999\";\n";
    }
    emit("", "    ");
    out << "  }\n";
  };
  pass(false);
  pass(true);

  // Inputs from nodes not drawn: a stub each, named by node, op and scope.
  std::set<std::size_t> stubs;
  std::set<std::pair<std::string, std::string>> edges, grad_edges;
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (!drawn[i]) continue;
    for (const Slot& in : g.node(i).inputs) {
      std::string from = id[in.node];
      if (from.empty()) {
        stubs.insert(in.node);
        from = "s" + std::to_string(in.node);
      }
      if (from != id[i]) edges.insert({from, id[i]});
    }
    for (const auto& output : g.node(i).outputs) {
      if (output.grad_of && !id[output.grad_of->node].empty() && id[output.grad_of->node] != id[i]) {
        grad_edges.insert({id[i], id[output.grad_of->node]});
      }
    }
  }
  for (std::size_t j : stubs) {
    const Node<T>& n = g.node(j);
    std::string label = "node " + std::to_string(j) + ": " + n.op_name() + (n.name.empty() ? "" : " " + n.name);
    if (!n.scope.empty()) label += "\n" + n.scope;
    out << "  s" << j << " [label=\"" << dot_escape(label)
        << "\", style=\"rounded,dashed\", color=\"#999999\", fontcolor=\"#777777\"];\n";
  }
  // Edges in a fixed order: by source and target as drawn (ids as text).
  for (const auto& [from, to] : edges) out << "  " << from << " -> " << to << ";\n";
  for (const auto& [from, to] : grad_edges) {
    out << "  " << from << " -> " << to << " [style=dashed, color=\"#e6a15c\", arrowhead=empty, constraint=false];\n";
  }
  // Named outputs and gradients: a plain label tied to its box by a dotted line, one per box
  // and kind ("grad w_q\nw_k": a collapsed scope holds many).
  const auto names = [&](const std::map<std::string, Slot>& m, const std::string& kind) {
    std::map<std::string, std::string> label_of;  // box -> its names
    for (const auto& [name, slot] : m) {
      if (id[slot.node].empty()) continue;
      std::string& label = label_of[id[slot.node]];
      label += (label.empty() ? kind + " " : "\n") + name;
    }
    for (const auto& [box, text] : label_of) {
      const std::string label = dot_escape(text);
      out << "  \"" << label << "\" [shape=plaintext, style=\"\"];\n  " << box << " -> \"" << label
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
  template void write_json(std::ostream&, const Graph<T>&, ExportValues);     \
  template void save_json(const std::string&, const Graph<T>&, ExportValues, const std::vector<std::string>&); \
  template std::unique_ptr<Graph<T>> graph_from_parsed_json<T>(const Json&, std::size_t, double); \
  template std::unique_ptr<Graph<T>> graph_from_parsed_json<T>(const Json&, const ImportOptions&); \
  template std::unique_ptr<Graph<T>> graph_from_json<T>(std::string_view, std::size_t, double);    \
  template std::unique_ptr<Graph<T>> graph_from_json<T>(std::string_view, const ImportOptions&);   \
  template std::string to_dot(const Graph<T>&, const DotOptions&);                                 \
  template bool dot_collapses_scopes(const Graph<T>&, const DotOptions&);
XGRAD_INSTANTIATE_GRAPH_IO(float)
XGRAD_INSTANTIATE_GRAPH_IO(double)
#undef XGRAD_INSTANTIATE_GRAPH_IO

}  // namespace xgrad
