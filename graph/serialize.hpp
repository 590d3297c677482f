// The JSON graph format (version 1), structurally: graph/ writes and reads nodes, values and
// names; the ops come from a factory the caller passes (ops/registry in practice).
//
//   {"format": "xgrad-graph", "version": 1, "dtype": "float64",
//    "nodes": [{"id": 0, "op": "input", "name": "q", "role": "input", "inputs": [], "attrs": {},
//               "shape": [2, 1], "value": {"shape": [2, 1], "data": [0.6931471805599453, 0.0]}},
//              {"id": 4, "op": "scale", "name": "", "role": "forward", "inputs": [3],
//               "attrs": {"alpha": 1.0}, "shape": [2, 2]},
//              {"id": 10, ..., "role": "backward", "grad_of": 2, ...}, ...],
//    "outputs": {"out": 6}, "grads": {"k": 14, "q": 11, "v": 9}}
//
// Every node has id (its position), op, name, role, inputs, attrs and shape; "grad_of" when it
// holds the gradient of an earlier node (Node::grad_of); "value" ({"shape", "data" in row-major
// order}) as exported.
// Non-finite numbers are the strings "nan", "inf", "-inf". Nesting is at most 5 levels deep.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// Which node values an export holds: none, the leaves' (enough to replay), or all.
enum class ExportValues { none, inputs, all };
const char* values_name(ExportValues values);  // "none", "inputs", "all"

// The dtype of a graph in the format, "float32" or "float64"; throws xgrad::error otherwise.
std::string graph_json_dtype(const Json& json);

// `diagnostics`, when given, is written under "diagnostics": data derived from the values (see
// lib/diagnostics.hpp), which an import checks for form only (a JSON array) and ignores.
template <class T>
Json graph_to_json(const Graph<T>& graph, ExportValues values, std::optional<Json> diagnostics = std::nullopt);

// Makes the op named `op` from its attributes; nullptr if no op has that name. Throws
// xgrad::error naming attrs.path() for bad attributes.
using OpFactory = std::function<std::shared_ptr<const Op>(const std::string& op, const JsonCursor& attrs)>;

// Rebuilds a graph from the format into `graph`, which must be empty. Leaves take their stored
// values (zeros of their shape when none are stored); every other node is recomputed, so stored
// values of non-leaf nodes are validated but not used (see stored_values). Throws xgrad::error
// naming the JSON path of the first problem. Every node is read and checked before any runs: the
// nodes together may hold at most max_elements elements (axes of length 0 counted as 1), and
// their forwards may cost at most max_work element visits (Op::work), so that a small file can
// make an import neither allocate nor compute without bound.
template <class T>
void graph_from_json(const Json& json, const OpFactory& make_op, Graph<T>& graph,
                     std::size_t max_elements = max_array_elements, double max_work = max_import_work);

// The values stored in an export, by node id (empty where none is stored), validated as by
// graph_from_json. For comparing a replay with the file.
template <class T>
std::vector<std::optional<xt::xarray<T>>> stored_values(const Json& json);

}  // namespace xgrad
