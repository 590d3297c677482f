// Graph export and import: JSON (docs/graph-format.md, version 2; version 1 files import too)
// and Graphviz DOT. The one entry point for both: graph/serialize.hpp is the internal layer.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/serialize.hpp>

namespace xgrad {

// The graph, forward and backward nodes alike, with the values asked for. dump() it for text:
// numbers are written in their shortest round-trip form. When values are exported, the
// softmax diagnostics (lib/diagnostics.hpp, threshold 0.99) come along under "diagnostics", with
// their per-row arrays when the softmax nodes have at most max_diagnostic_rows rows in all.
template <class T>
Json to_json(const Graph<T>& graph, ExportValues values = ExportValues::inputs);

// to_json(graph, values).dump(), written to `out` as it is made, a node at a time: the same
// bytes, without the document in memory (a DOM takes many times its text: docs/export.md). It
// holds one node's JSON at once, a stored value's numbers 4096 at a time, and of the softmax
// diagnostics one node's (for_each_softmax_diagnostics).
template <class T>
void write_json(std::ostream& out, const Graph<T>& graph, ExportValues values = ExportValues::inputs);

// write_json's text and a newline, written to `path` as write_file_atomically writes a file
// (whole or not at all; never over one of `inputs`), streamed: a graph of millions of nodes
// exports in little more memory than the graph holds.
template <class T>
void save_json(const std::string& path, const Graph<T>& graph, ExportValues values = ExportValues::inputs,
               const std::vector<std::string>& inputs = {});

// How an import makes ops and what it may cost. `ops` is asked, after the op registry
// (ops/registry.hpp), for an op the registry does not know: an op a program built with
// Graph::apply and exports (its name() and attrs()) imports again through it. nullptr from
// it, or no factory, and the op is unknown.
struct ImportOptions {
  OpFactory ops = nullptr;
  std::size_t max_elements = max_array_elements;
  double max_work = max_import_work;
};

// Parses and rebuilds an exported graph. Leaves take their stored values (zeros when the export
// had values = none); every other node is recomputed from them, so export -> import -> replay ->
// export gives the same string when the values were exported. Throws xgrad::error naming the
// JSON path of the first problem ("graph JSON: nodes[4].inputs[1][0]: refers to node 7, which is
// not before node 4"); the one pass of nlohmann's SAX parser refuses nesting deeper than the
// format and repeated keys as it reads.
// Every node is checked before any runs: the nodes may hold max_elements elements in all, and
// their forwards cost max_work element visits (Op::work; see graph/serialize.hpp).
template <class T>
std::unique_ptr<Graph<T>> graph_from_json(std::string_view text, std::size_t max_elements = max_array_elements,
                                          double max_work = max_import_work);
template <class T>
std::unique_ptr<Graph<T>> graph_from_json(std::string_view text, const ImportOptions& options);

// The same in two steps: parse_graph_json (one SAX pass with the depth cap), after which
// graph_json_dtype(json) tells which T to rebuild with graph_from_parsed_json<T>(json).
Json parse_graph_json(std::string_view text);
template <class T>
std::unique_ptr<Graph<T>> graph_from_parsed_json(const Json& json, std::size_t max_elements = max_array_elements,
                                                 double max_work = max_import_work);
template <class T>
std::unique_ptr<Graph<T>> graph_from_parsed_json(const Json& json, const ImportOptions& options);

// The values stored in an export (see stored_values in graph/serialize.hpp: by node id and
// output), for comparing a replay with its file; ExportValues, values_name, graph_json_dtype and
// OpFactory come from there too.

// What to_dot draws. The filters combine (a node is drawn when each lets it through); the inputs
// of a drawn node that are not drawn appear as dashed stubs naming their node, op and scope.
struct DotOptions {
  bool forward_only = false;          // leave out the backward nodes (Node::in_backward)
  std::string scope;                  // "" (all), or only the nodes of this scope and the scopes in it
  std::optional<std::size_t> around;  // only the nodes within `depth` edges of this one (either way)
  std::size_t depth = 2;
  // Each named scope as one box (its node count and worst saturation), per pass: automatic does
  // it when no scope or around filter is set and more than collapse_above nodes are drawn.
  enum class Collapse { automatic, never, always };
  Collapse collapse = Collapse::automatic;
  std::size_t collapse_above = 150;
  // Shade each softmax node by its most saturated group along this axis (worst_group of
  // softmax_diagnostics' group_axis: for (B, H, T_q, T_k) scores, 1 is the heads) rather than
  // by all its rows pooled; nodes without such an axis keep the pooled fraction.
  std::optional<std::size_t> group_axis;
  // Shade the softmax nodes made by a VJP too (SoftmaxDiagnostics::in_backward): by default
  // only the model's own are shaded.
  bool backward_softmax = false;
};

// Graphviz DOT: one box per node (op, name, attributes, shape), inputs as edges, forward nodes
// in one cluster and backward nodes in another (shaded), each holding a nested cluster per named
// scope (Graph::scope), a dashed edge from each gradient to the node it is the gradient of
// (grad_of). Each softmax node of the model (not made by a VJP, unless backward_softmax) is
// shaded from white to red by the fraction of its rows that are saturated (max weight >= 0.99;
// with group_axis, of its worst group), which its label gives. Collapsed (dot_collapses_scopes), the
// nodes of each scope are one box instead, shaded by its worst softmax; nodes of no scope keep
// their own. Render with `dot -Tsvg`. Throws xgrad::error naming the graph's scopes if `scope`
// holds no node, and its node count if `around` is not a node.
template <class T>
std::string to_dot(const Graph<T>& graph, const DotOptions& options = {});

// Whether to_dot(graph, options) draws each scope as one box.
template <class T>
bool dot_collapses_scopes(const Graph<T>& graph, const DotOptions& options = {});

}  // namespace xgrad
