// The ONNX importer's rules (lib/onnx_import.hpp is the public side): one ImportRule per ONNX op
// type, in family files beside this one (elementwise, shape, slice, reduce, nn, logic), looked up once
// per node. A rule reads its node through a NodeReader: attributes, inputs as values known at
// import (OnnxTensor) or as Vars of the graph, and the outputs it defines. Internal to xgrad_onnx.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/op.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/ops/reshape.hpp>

namespace xgrad::onnx_rules {

using onnx::TensorProto;

// Integers wide enough for the counts of Range and Slice over any int64 bounds (GCC and Clang).
__extension__ using wide = __int128;

// ---- Element types and values known at import (lib/onnx/tensors.cpp) ----

// ONNX element types: name, bytes in raw_data.
struct ElemType {
  int code;
  const char* name;
  std::size_t bytes;
};
const ElemType* find_elem_type(int code);
const ElemType* find_elem_type(const std::string& name);
std::string elem_type_name(int code);
bool is_float_name(const std::string& dtype);
template <class T>
const char* dtype_of() {
  return sizeof(T) == 4 ? "float32" : "float64";
}
std::string number_str(double x);
std::string ints_str(const std::vector<std::int64_t>& v);
// Rounds float32 values held in doubles, as an ONNX float32 computation would; wraps integers to
// their type's width, as ONNX's integer arithmetic does.
void round_to_type(OnnxTensor& t);
// A TensorProto's values. model_path is where external data is looked for ("" refuses it).
OnnxTensor tensor_from_proto(const TensorProto& p, const std::string& model_path, std::size_t max_elements,
                             const std::string& what);
// numpy's broadcast of two shapes; nullopt if they do not broadcast.
std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b);

// y = a[idx[0][i0], idx[1][i1], ...]: the elements at the given indices of each axis.
template <class E>
xt::xarray<E> take(const xt::xarray<E>& a, const std::vector<std::vector<std::size_t>>& idx) {
  Shape out_shape;
  for (const auto& v : idx) out_shape.push_back(v.size());
  auto out = xt::xarray<E>::from_shape(out_shape);
  const std::size_t rank = idx.size(), count = out.size();
  if (count == 0) return out;
  std::vector<std::size_t> stride(rank, 1), pos(rank, 0);
  for (std::size_t k = rank; k-- > 1;) stride[k - 1] = stride[k] * a.shape()[k];
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t src = 0;
    for (std::size_t k = 0; k < rank; ++k) src += idx[k][pos[k]] * stride[k];
    out.data()[i] = a.data()[src];
    for (std::size_t k = rank; k-- > 0;) {
      if (++pos[k] < out_shape[k]) break;
      pos[k] = 0;
    }
  }
  return out;
}

// f applied to the tensor's values, whichever kind they are.
template <class F>
void visit(OnnxTensor& t, F&& f) {
  if (t.is_float()) f(t.real);
  else f(t.ints);
}

// ---- One ONNX value, as the import holds it ----

template <class T>
struct Value {
  std::optional<OnnxTensor> known;
  Var<T> var;
  bool dynamic = false;           // var depends on a graph input or a parameter
  bool constant_only = false;     // var is computed from values known at import only
  bool from_int_input = false;    // known, but read from an integer graph input at import
  std::string index_input;        // an integer graph input: its name (an index leaf, made on use)
  bool is_bool = false;           // var holds a bool tensor as 0 and 1 (a bool graph input, moved)
};

template <class T>
class NodeReader;

// How one ONNX op type imports. build maps the node onto xgrad ops (false: this form of the op
// is not supported); fold computes it at import when every input is known (false: build it
// instead); an op with fold only is computed at import only. read_at_import lists the inputs
// read at import (shapes, axes, indices, conditions, exponents) rather than differentiated:
// every other input is data, so a float initializer that reaches the outputs through it is a
// parameter with a gradient (the safe default, as tinygrad's required_input_python_consts).
enum RuleFlags : unsigned {
  shape_only = 1,        // fold reads its inputs' shapes only, known even when the values are not
  keeps_bool = 2,        // moves or combines a bool run-time value: its outputs stay bool
  legacy_broadcast = 4,  // takes the `broadcast` attribute of opsets before 7 (refused when set)
  makes_bool = 8,        // its output built at run time is bool (a comparison's mask)
};
template <class T>
struct ImportRule {
  const char* op_type;
  std::int64_t since;  // the first opset of ai.onnx that has the op
  std::set<std::size_t> read_at_import;
  bool (*build)(NodeReader<T>&);
  bool (*fold)(NodeReader<T>&);
  unsigned flags;
};

// The ONNX ops that are one xgrad elementwise row each (ops/elementwise.def), one line each in
// lib/onnx/elementwise.cpp: the op type, the first opset of ai.onnx that has it as the row
// computes it, the row's function, and the fold of values known at import (or none).
// elementwise_rules gives each its rule.
template <class T>
struct RowImport {
  const char* op_type;
  std::int64_t since;
  Var<T> (*row)(const Var<T>&);
  bool (*fold)(NodeReader<T>&);
};
template <class T>
const std::vector<RowImport<T>>& row_imports();

// The rules of each family, and every rule by op type (lib/onnx/rules.cpp; throws if an op type
// has two rules).
template <class T> std::vector<ImportRule<T>> elementwise_rules();
template <class T> std::vector<ImportRule<T>> shape_rules();
template <class T> std::vector<ImportRule<T>> slice_rules();
template <class T> std::vector<ImportRule<T>> reduce_rules();
template <class T> std::vector<ImportRule<T>> nn_rules();
template <class T> std::vector<ImportRule<T>> logic_rules();
template <class T>
const std::map<std::string, ImportRule<T>>& import_rules();
template <class T>
const ImportRule<T>* find_rule(const std::string& op_type);

// ---- The import's state, as the rule of one node reads and writes it ----

template <class T>
class NodeReader {
 public:
  NodeReader(const std::string& path, const std::string& data_path, const OnnxImportOptions& options, Graph<T>& g)
      : m_path(path), m_data_path(data_path), m_options(options), m_g(g),
        m_budget(options.max_work, "raise it with OnnxImportOptions::max_work (xgrad import --max-work N)") {}

  // Imports one node: its rule (fold or build) defines its outputs (lib/onnx/rules.cpp).
  void run_node(const onnx::NodeProto& n, std::size_t index);

  // ---- The node ----
  const onnx::NodeProto& node() const { return m_ctx->n; }
  const std::string& op() const { return m_ctx->n.op_type(); }
  std::int64_t opset() const { return m_opset; }
  Graph<T>& graph() { return m_g; }
  const OnnxImportOptions& options() const { return m_options; }
  const std::string& model_float() const { return m_model_float; }
  [[noreturn]] void fail(const std::string& problem) const { throw error(m_ctx->where + ": " + problem); }

  // ---- Attributes ----
  static const onnx::AttributeProto* find_attr(const onnx::NodeProto& n, const std::string& name) {
    for (const auto& a : n.attribute()) {
      if (a.name() == name) return &a;
    }
    return nullptr;
  }
  const onnx::AttributeProto* attr(const std::string& name, onnx::AttributeProto::AttributeType type) const {
    const onnx::AttributeProto* a = find_attr(m_ctx->n, name);
    if (a && a->type() != type && !(a->type() == onnx::AttributeProto::UNDEFINED)) {
      fail("attribute '" + name + "' has type " + onnx::AttributeProto::AttributeType_Name(a->type()) + ", expected " +
           onnx::AttributeProto::AttributeType_Name(type));
    }
    if (a && !a->ref_attr_name().empty()) fail("attribute '" + name + "' refers to a function attribute");
    return a;
  }
  std::int64_t attr_int(const std::string& name, std::int64_t fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::INT);
    return a ? a->i() : fallback;
  }
  std::optional<std::int64_t> attr_int(const std::string& name) const {
    const auto* a = attr(name, onnx::AttributeProto::INT);
    return a ? std::optional<std::int64_t>(a->i()) : std::nullopt;
  }
  double attr_float(const std::string& name, double fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::FLOAT);
    return a ? static_cast<double>(a->f()) : fallback;
  }
  std::optional<std::vector<std::int64_t>> attr_ints(const std::string& name) const {
    const auto* a = attr(name, onnx::AttributeProto::INTS);
    if (!a) return std::nullopt;
    return std::vector<std::int64_t>(a->ints().begin(), a->ints().end());
  }
  std::string attr_string(const std::string& name, const std::string& fallback) const {
    const auto* a = attr(name, onnx::AttributeProto::STRING);
    return a ? a->s() : fallback;
  }
  OnnxTensor tensor_attr(const onnx::AttributeProto& a) const {
    return tensor_from_proto(a.t(), m_data_path, m_options.max_elements, m_ctx->where + ": attribute '" + a.name() + "'");
  }

  // ---- Inputs ----
  std::size_t input_count() const { return static_cast<std::size_t>(m_ctx->n.input_size()); }
  std::size_t output_count() const { return static_cast<std::size_t>(m_ctx->n.output_size()); }
  bool has_input(std::size_t k) const { return k < input_count() && !m_ctx->n.input(static_cast<int>(k)).empty(); }
  const std::string& input_name(std::size_t k) const { return m_ctx->n.input(static_cast<int>(k)); }
  Value<T>& input(std::size_t k) {
    if (!has_input(k)) fail("input " + std::to_string(k) + " is missing");
    return m_values.at(input_name(k));
  }
  std::string input_desc(std::size_t k) const { return "input " + std::to_string(k) + " '" + input_name(k) + "'"; }
  bool is_known(std::size_t k) {
    if (!has_input(k)) return true;
    const Value<T>& v = m_values.at(input_name(k));
    return v.known.has_value() || v.constant_only;
  }
  // Input k as a value known at import; a copy of it.
  const OnnxTensor& known(std::size_t k);
  OnnxTensor known_copy(std::size_t k) { return known(k); }
  // Input k known at import, read as values (indices, a condition, an exponent): not computed
  // from an integer graph input, whose new values a replay would not see.
  const OnnxTensor& known_value(std::size_t k, const std::string& what);
  // A scalar or 1-element value known at import, and a 1-D integer one.
  double known_scalar(std::size_t k, const std::string& what);
  std::vector<std::int64_t> known_ints(std::size_t k, const std::string& what);
  Shape shape_of_input(std::size_t k) {
    Value<T>& v = input(k);
    return v.var.valid() ? v.var.shape() : v.known->shape();
  }
  std::string dtype_of_input(std::size_t k) {
    Value<T>& v = input(k);
    return v.var.valid() ? std::string(dtype_of<T>()) : v.known->dtype;
  }
  bool any_from_int_input() {
    for (std::size_t k = 0; k < input_count(); ++k) {
      if (has_input(k) && m_values.at(input_name(k)).from_int_input) return true;
    }
    return false;
  }
  // Input k as a Var: known float values become a constant leaf (one per ONNX name).
  Var<T> var(std::size_t k);
  // Input k as ids for embedding over `rows` rows, and the shape to view them in: an integer
  // graph input's index leaf (which may be viewed reshaped), or ids known at import as a
  // constant (negative ones counted from the end).
  std::pair<Var<T>, Shape> ids_of(std::size_t k, std::size_t rows, const std::string& what);
  // Gather's indices from input k, known at import, in [0, dim) (negative ones count from the end).
  xt::xarray<std::int64_t> gather_ids(std::size_t k, std::size_t dim);

  // ---- New values ----
  Var<T> constant(const std::string& name, const xt::xarray<double>& values) {
    return m_g.constant(m_ctx->n.name().empty() ? name : m_ctx->n.name() + "/" + name, to_t(values));
  }
  Var<T> scalar(double s) { return constant("scalar", xt::xarray<double>(s)); }
  xt::xarray<T> to_t(const xt::xarray<double>& a) const { return xt::cast<T>(a); }
  // Output k as a Var, or as a value known at import (index_input: the output is an integer
  // graph input's ids in another shape, same order). Outputs the node does not name are dropped.
  void set_output(std::size_t k, Var<T> v);
  void set_output(std::size_t k, OnnxTensor t, bool from_int_input, const std::string& index_input = "");

  // ---- Checks ----
  // An axis in [-rank, rank), and a list of distinct ones.
  std::size_t axis_of(std::int64_t axis, std::size_t rank, const std::string& what) const;
  std::vector<std::size_t> axes_of(const std::vector<std::int64_t>& axes, std::size_t rank, const std::string& what) const;
  void check_size(const Shape& s) const {
    if (!bounded_size(s, m_options.max_elements)) {
      fail("shape " + shape_str(s) + " has more than " + std::to_string(m_options.max_elements) + " elements");
    }
  }
  // Charges work computed at import (not by a graph node) to the budget.
  void charge(double work) {
    if (!m_budget.add(work)) fail(m_budget.refusal(m_ctx->n.op_type() + " computed at import", work));
  }
  void count_elements(const Shape& shape, const std::string& what);

 protected:
  struct NodeCtx {
    const onnx::NodeProto& n;
    std::size_t index;
    std::string where;  // "m.onnx: node 3 'name' (Op, domain ai.onnx, opset 13)"
  };
  void define(std::size_t k, Value<T> v);
  void mark_bool_outputs(const ImportRule<T>& rule);

  const std::string& m_path;
  const std::string m_data_path;  // where external data is looked for: "" refuses it
  const OnnxImportOptions& m_options;
  Graph<T>& m_g;
  std::int64_t m_opset = 0;
  std::string m_model_float;
  std::map<std::string, Value<T>> m_values;
  std::size_t m_elements = 0;
  WorkBudget m_budget;
  bool m_inputs_known = false;  // every input of the node being imported is known at import
  const NodeCtx* m_ctx = nullptr;
};

// ---- Shared by several families ----

// Reshape unless the shape is the same.
template <class T>
Var<T> reshape_to(const Var<T>& x, const Shape& s) {
  return x.shape() == s ? x : reshape(x, s);
}
// Concat's axis: required from opset 4, 1 by default before.
template <class T>
std::int64_t concat_axis(const NodeReader<T>& r) {
  const auto a = r.attr_int("axis");
  if (!a && r.opset() >= 4) r.fail("attribute 'axis' is required");
  return a.value_or(1);
}
// The fold of a binary elementwise op, comparison or logic op on known values (numpy
// broadcasting; comparisons give bool; integer arithmetic wraps as ONNX Runtime's).
template <class T>
OnnxTensor fold_binary(const NodeReader<T>& r, const std::string& op, OnnxTensor a, OnnxTensor b);

}  // namespace xgrad::onnx_rules
