// The import of one node (lib/onnx/reader.hpp): its rule looked up once, its inputs read and its
// outputs defined.
#include <xgrad/lib/onnx/reader.hpp>

#include <algorithm>

#include <xgrad/lib/format.hpp>

namespace xgrad::onnx_rules {

template <class T>
const std::map<std::string, ImportRule<T>>& import_rules() {
  static const std::map<std::string, ImportRule<T>> rules = [] {
    std::map<std::string, ImportRule<T>> all;
    for (auto family : {elementwise_rules<T>, shape_rules<T>, slice_rules<T>, reduce_rules<T>, nn_rules<T>, logic_rules<T>}) {
      for (ImportRule<T>& rule : family()) {
        if (!all.emplace(rule.op_type, rule).second) {
          throw error(std::string("ONNX import: two rules for op ") + rule.op_type);
        }
      }
    }
    return all;
  }();
  return rules;
}

template <class T>
const ImportRule<T>* find_rule(const std::string& op_type) {
  const auto& rules = import_rules<T>();
  const auto it = rules.find(op_type);
  return it == rules.end() ? nullptr : &it->second;
}

template <class T>
void NodeReader<T>::run_node(const onnx::NodeProto& n, std::size_t index) {
  const std::string domain = n.domain().empty() ? "ai.onnx" : n.domain();
  NodeCtx ctx{n, index,
              m_path + ": node " + std::to_string(index) + " '" + n.name() + "' (" + n.op_type() + ", domain " + domain +
                  ", opset " + std::to_string(m_opset) + ")"};
  m_ctx = &ctx;
  if (domain != "ai.onnx") fail("domain not supported (only the default ONNX domain, ai.onnx)");
  const ImportRule<T>* rule = find_rule<T>(n.op_type());
  if (!rule) fail("op not supported");
  if (m_opset < rule->since) {
    fail("op not in the default domain at opset " + std::to_string(m_opset) + " (it is from opset " +
         std::to_string(rule->since) + ")");
  }
  if ((rule->flags & legacy_broadcast) && m_opset < 7 && attr_int("broadcast", 0) != 0) {
    fail("the broadcast attribute of opsets before 7 (broadcasting from an axis) is not supported");
  }
  for (std::size_t k = 0; k < input_count(); ++k) {
    if (has_input(k) && !m_values.count(input_name(k))) {
      fail(input_desc(k) + " is produced by no earlier node, initializer or graph input");
    }
  }
  bool all_known = true;
  for (std::size_t k = 0; k < input_count(); ++k) all_known = all_known && is_known(k);
  m_inputs_known = all_known;
  if (all_known) {  // a fold reads its inputs
    double reads = 0;
    for (std::size_t k = 0; k < input_count(); ++k) {
      if (has_input(k) && m_values.at(input_name(k)).known) reads += Op::element_count(m_values.at(input_name(k)).known->shape());
    }
    charge(reads);
  }
  const std::size_t before = m_g.size();
  try {
    const bool folded = (all_known || (rule->flags & shape_only)) && rule->fold && rule->fold(*this);
    if (!folded) {
      if (!rule->build) {
        for (std::size_t k = 0; k < input_count(); ++k) known(k);  // names the input computed at run time
      }
      if (!rule->build || !rule->build(*this)) fail("op not supported");
    }
  } catch (const error& e) {
    const std::string what = e.what();
    if (what.rfind(m_path, 0) == 0) throw;
    fail(what);
  }
  for (std::size_t id = before; id < m_g.size(); ++id) {
    const Node<T>& node = m_g.node(id);
    for (std::size_t k = 0; k < node.output_count(); ++k) count_elements(node.shape(k), ctx.where);
  }
  mark_bool_outputs(*rule);
  for (int k = 0; k < n.output_size(); ++k) {
    if (!n.output(k).empty() && !m_values.count(n.output(k))) fail("output " + std::to_string(k) + " is not supported");
  }
  m_ctx = nullptr;
}

// A comparison of run-time values is a condition, and so stays a bool run-time value moved or
// combined by a shape op, a cast to bool or logic (its outputs are bool too).
template <class T>
void NodeReader<T>::mark_bool_outputs(const ImportRule<T>& rule) {
  const bool makes = (rule.flags & makes_bool) != 0;
  if (!makes && (!has_input(0) || !input(0).is_bool)) return;
  bool stays = makes || (rule.flags & keeps_bool) != 0;
  if (op() == "Cast") stays = attr_int("to", 0) == TensorProto::BOOL;
  if (!stays) return;
  for (const std::string& o : m_ctx->n.output()) {
    if (!o.empty() && m_values.count(o) && m_values.at(o).var.valid()) m_values.at(o).is_bool = true;
  }
}

template <class T>
const OnnxTensor& NodeReader<T>::known(std::size_t k) {
  Value<T>& v = input(k);
  if (!v.known && v.constant_only) {
    // Computed in the graph from constants only (an op not computed at import, such as Sqrt of
    // a dimension): its value is known at import.
    OnnxTensor t;
    t.dtype = m_model_float;
    t.real = xt::cast<double>(v.var.value());
    round_to_type(t);
    v.known = std::move(t);
  }
  if (!v.known) {
    if (v.dynamic) {
      fail(input_desc(k) + " must be known at import (a shape, axes, indices or a condition), but it is computed "
           "at run time (from graph inputs or parameters)");
    }
    // A parameter leaf: reading its value here would freeze it (training changes it) and
    // drop its gradient through this input.
    fail(input_desc(k) + " is a parameter (an initializer the outputs depend on through float computations); "
         "xgrad does not read a parameter at import, as a shape, exponent, index or condition");
  }
  return *v.known;
}

template <class T>
const OnnxTensor& NodeReader<T>::known_value(std::size_t k, const std::string& what) {
  const OnnxTensor& t = known(k);
  const Value<T>& v = input(k);
  if (v.from_int_input && v.index_input.empty()) {
    fail(input_desc(k) + " (" + what + ") is computed at import from an integer graph input; xgrad reads an "
         "integer graph input only as Gather's indices as it is, or as shapes");
  }
  return t;
}

template <class T>
double NodeReader<T>::known_scalar(std::size_t k, const std::string& what) {
  const OnnxTensor& t = known_value(k, what);
  if (t.shape().size() > 1 || (t.is_float() ? t.real.size() : t.ints.size()) != 1) {
    fail(input_desc(k) + " (" + what + ") must be a scalar, it has shape " + shape_str(t.shape()));
  }
  return t.is_float() ? t.real.data()[0] : static_cast<double>(t.ints.data()[0]);
}

template <class T>
std::vector<std::int64_t> NodeReader<T>::known_ints(std::size_t k, const std::string& what) {
  const OnnxTensor& t = known(k);
  if (t.is_float()) fail(input_desc(k) + " (" + what + ") must be integers, it is " + t.dtype);
  if (t.ints.dimension() > 1) fail(input_desc(k) + " (" + what + ") must be 1-D, it has shape " + shape_str(t.shape()));
  return std::vector<std::int64_t>(t.ints.begin(), t.ints.end());
}

template <class T>
Var<T> NodeReader<T>::var(std::size_t k) {
  Value<T>& v = input(k);
  if (v.var.valid()) return v.var;
  const OnnxTensor& t = *v.known;
  if (v.from_int_input) {
    fail(input_desc(k) + " is computed from the integer graph input '" + v.index_input +
         "', which xgrad reads only as Gather's indices or as shapes");
  }
  if (!t.is_float()) fail(input_desc(k) + " is " + t.dtype + ", where the op computes in floats");
  v.var = m_g.constant(input_name(k), to_t(t.real));
  return v.var;
}

template <class T>
std::pair<Var<T>, Shape> NodeReader<T>::ids_of(std::size_t k, std::size_t rows, const std::string& what) {
  Value<T>& iv = input(k);
  if (!iv.index_input.empty()) {
    // The index leaf of the integer graph input (its own shape); this input may view its ids
    // in another shape (a Reshape of it), which the result's shape follows.
    Value<T>& leaf = m_values.at(iv.index_input);
    if (!leaf.var.valid()) leaf.var = m_g.indices(iv.index_input, leaf.known->ints);
    return {leaf.var, iv.known->shape()};
  }
  known_value(k, what);
  const xt::xarray<std::int64_t> known_ids = gather_ids(k, rows);
  return {constant(what, xt::cast<double>(known_ids)), shape_of(known_ids)};
}

template <class T>
xt::xarray<std::int64_t> NodeReader<T>::gather_ids(std::size_t k, std::size_t dim) {
  const OnnxTensor& t = known(k);
  if (t.is_float()) fail(input_desc(k) + " (indices) must be integers, it is " + t.dtype);
  xt::xarray<std::int64_t> ids = t.ints;
  for (std::int64_t& i : ids) {
    const std::int64_t original = i;
    if (i < 0) i += static_cast<std::int64_t>(dim);
    if (i < 0 || i >= static_cast<std::int64_t>(dim)) {
      fail("index " + std::to_string(original) + " is out of range for an axis of " + std::to_string(dim));
    }
  }
  return ids;
}

template <class T>
void NodeReader<T>::set_output(std::size_t k, Var<T> v) {
  if (k >= output_count() || m_ctx->n.output(static_cast<int>(k)).empty()) return;
  Value<T> out;
  out.var = v;
  out.constant_only = m_inputs_known;
  out.dynamic = !m_inputs_known;
  define(k, std::move(out));
}

template <class T>
void NodeReader<T>::set_output(std::size_t k, OnnxTensor t, bool from_int_input, const std::string& index_input) {
  if (k >= output_count() || m_ctx->n.output(static_cast<int>(k)).empty()) return;
  round_to_type(t);
  Value<T> out;
  count_elements(t.shape(), m_ctx->where + ": output '" + m_ctx->n.output(static_cast<int>(k)) + "'");
  charge(Op::element_count(t.shape()));
  out.known = std::move(t);
  out.from_int_input = from_int_input;
  out.index_input = index_input;
  define(k, std::move(out));
}

template <class T>
void NodeReader<T>::define(std::size_t k, Value<T> v) {
  const std::string& name = m_ctx->n.output(static_cast<int>(k));
  if (m_values.count(name)) fail("output '" + name + "' is already defined (ONNX values are assigned once)");
  m_values.emplace(name, std::move(v));
}

template <class T>
std::size_t NodeReader<T>::axis_of(std::int64_t axis, std::size_t rank, const std::string& what) const {
  const auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) {
    fail(what + " " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

template <class T>
std::vector<std::size_t> NodeReader<T>::axes_of(const std::vector<std::int64_t>& axes, std::size_t rank,
                                                const std::string& what) const {
  std::vector<std::size_t> out;
  for (std::int64_t a : axes) {
    const std::size_t k = axis_of(a, rank, what);
    if (std::find(out.begin(), out.end(), k) != out.end()) fail(what + " names axis " + std::to_string(k) + " twice");
    out.push_back(k);
  }
  return out;
}

template <class T>
void NodeReader<T>::count_elements(const Shape& shape, const std::string& what) {
  const std::optional<std::size_t> n = bounded_size(shape, m_options.max_elements);
  if (!n || *n > m_options.max_elements - std::min(m_options.max_elements, m_elements)) {
    throw error(what + ": the model's values would hold more than " + std::to_string(m_options.max_elements) +
                " elements in all, the most an import may");
  }
  m_elements += *n;
}

template class NodeReader<float>;
template class NodeReader<double>;
template const std::map<std::string, ImportRule<float>>& import_rules<float>();
template const std::map<std::string, ImportRule<double>>& import_rules<double>();
template const ImportRule<float>* find_rule<float>(const std::string&);
template const ImportRule<double>* find_rule<double>(const std::string&);

}  // namespace xgrad::onnx_rules
