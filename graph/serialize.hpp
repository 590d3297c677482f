// The JSON graph format (version 2; docs/graph-format.md), structurally: graph/ writes and reads
// nodes, values and names; the ops come from a factory the caller passes. Internal: programs
// include lib/graph_io.hpp, the one entry point, which passes the op registry (and a factory of
// the program's own ops) and adds the diagnostics.
//
//   {"format": "xgrad-graph", "version": 2, "dtype": "float64",
//    "nodes": [{"id": 0, "op": "input", "name": "q", "role": "input", "inputs": [], "attrs": {},
//               "outputs": [{"shape": [2, 1], "data": [0.6931471805599453, 0.0]}]},
//              {"id": 3, "op": "scale", "name": "", "role": "forward", "inputs": [[0, 0]],
//               "attrs": {"alpha": 1.0}, "outputs": [{"shape": [2, 1]}]},
//              {"id": 10, ..., "role": "backward", "outputs": [{"shape": [2, 2], "grad_of": [2, 0]}]}, ...],
//    "outputs": {"out": [7, 0]}, "grads": {"k": [14, 0], "q": [15, 0], "v": [10, 0]}}
//
// Every node has id (its position), op, name, role, inputs ([node, output] pairs), attrs and
// outputs: per output its shape, "grad_of" ([node, output]) when it holds the gradient of an
// earlier node's output (Output::grad_of), and "data" (row-major) as exported. An index leaf
// (op "indices", role "input") has integer data. Non-finite numbers are the strings "nan",
// "inf", "-inf". After "dtype", the graph's run state where it differs from the defaults:
// "step" (an integer, default 0) and "training" (a boolean, default true), which the import
// sets before any node runs (dropout's mask depends on them). Nesting is at most 6 levels deep. Version 1 (one output a node, "shape" and
// "value" on the node, inputs and names as ids) still imports.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/graph/names.hpp>

namespace xgrad {

// Which node values an export holds: none, the leaves' (enough to replay), or all.
enum class ExportValues { none, inputs, all };
inline constexpr EnumName<ExportValues> export_values_names[] = {
    {ExportValues::none, "none"}, {ExportValues::inputs, "inputs"}, {ExportValues::all, "all"}};
inline const char* values_name(ExportValues values) { return name_in(export_values_names, values); }

// The dtype of a graph in the format, "float32" or "float64"; throws xgrad::error otherwise.
std::string graph_json_dtype(const Json& json);

// Makes the op named `op` from its attributes; nullptr if it knows no op of that name. Throws
// xgrad::error naming attrs.path() for bad attributes.
using OpFactory = std::function<std::shared_ptr<const Op>(const std::string& op, const JsonCursor& attrs)>;

// The values stored in an export, by node id and output (empty where none is stored; an index
// leaf's output is always empty here), validated as an import validates them. For comparing a
// replay with the file.
template <class T>
std::vector<std::vector<std::optional<xt::xarray<T>>>> stored_values(const Json& json);

namespace detail {

// `diagnostics`, when given, is written under "diagnostics": data derived from the values (see
// lib/diagnostics.hpp), which an import checks for form only (a JSON array) and ignores.
template <class T>
Json graph_to_json(const Graph<T>& graph, ExportValues values, std::optional<Json> diagnostics = std::nullopt);

// graph_to_json(graph, values, diagnostics).dump(), written to `out` a node at a time: the same
// bytes, with one node's JSON in memory at once (a stored value's numbers in chunks of 4096).
// `diagnostics`, when given, writes the text of the "diagnostics" array itself, streamed too.
template <class T>
void write_graph_json(std::ostream& out, const Graph<T>& graph, ExportValues values,
                      const std::function<void(std::ostream&)>& diagnostics = nullptr);

// Rebuilds a graph from the format (version 2 or 1) into `graph`, which must be empty. Leaves
// take their stored values (zeros of their shape when none are stored); every other node is
// recomputed, so stored values of non-leaf nodes are validated but not used (see
// stored_values). Throws xgrad::error naming the JSON path of the first problem. Every node is
// read and checked before any runs: the nodes together may hold at most max_elements elements
// (axes of length 0 counted as 1), and their forwards may cost at most max_work element visits
// (Op::work), so that a small file can make an import neither allocate nor compute without bound.
template <class T>
void graph_from_json(const Json& json, const OpFactory& make_op, Graph<T>& graph,
                     std::size_t max_elements = max_array_elements, double max_work = max_import_work);

}  // namespace detail

}  // namespace xgrad
