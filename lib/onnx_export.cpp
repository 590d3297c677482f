// ONNX export: the protobuf writer behind graph/onnx.hpp's emitter. Each op writes its own nodes
// (Op::to_onnx, in ops/); this file writes leaves, names, outputs and the model around them.
#include <xgrad/lib/onnx_export.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include <onnx/onnx_pb.h>

#include <xgrad/graph/error.hpp>
#include <xgrad/lib/files.hpp>

namespace xgrad {

namespace {

template <class T>
constexpr int float_elem_type() {
  return std::is_same_v<T, float> ? onnx::TensorProto::FLOAT : onnx::TensorProto::DOUBLE;
}

void set_type(onnx::ValueInfoProto& v, int elem_type, const Shape& shape) {
  onnx::TypeProto_Tensor* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  onnx::TensorShapeProto* s = t->mutable_shape();
  for (std::size_t d : shape) s->add_dim()->set_dim_value(static_cast<std::int64_t>(d));
}

// The emitter: nodes and initializers into one GraphProto, every name unique. Initializers of
// equal type, shape and bytes are written once.
template <class T>
class Writer final : public OnnxEmitter {
 public:
  explicit Writer(onnx::GraphProto& graph) : m_graph(graph) {}

  // A name no value or node has yet: base, or base_1, base_2, ...
  std::string fresh(const std::string& base) {
    std::string name = base;
    for (std::size_t k = 1; m_used.count(name); ++k) name = base + "_" + std::to_string(k);
    m_used.insert(name);
    return name;
  }
  bool used(const std::string& name) const { return m_used.count(name) != 0; }
  void reserve(const std::string& name) { m_used.insert(name); }

  // The node being lowered: its scope and id name the ONNX nodes and values it writes
  // ("n12.MatMul", "enc.l1.attn/n12.MatMul"), and its description is their doc_string.
  void begin_node(std::size_t id, const std::string& scope, std::string doc) {
    m_prefix = (scope.empty() ? "" : scope + "/") + "n" + std::to_string(id) + ".";
    m_doc = std::move(doc);
  }

  std::vector<std::string> emit(const std::string& op_type, const std::vector<std::string>& inputs,
                                const std::vector<OnnxAttr>& attrs, std::size_t outputs) override {
    onnx::NodeProto* node = m_graph.add_node();
    const std::string name = fresh(m_prefix + op_type);
    node->set_name(name);
    node->set_op_type(op_type);
    if (!m_doc.empty()) node->set_doc_string(m_doc);
    for (const auto& in : inputs) node->add_input(in);
    std::vector<std::string> names;
    for (std::size_t k = 0; k < outputs; ++k) {
      names.push_back(k == 0 ? name : fresh(name + ":" + std::to_string(k)));
      node->add_output(names.back());
    }
    for (const OnnxAttr& a : attrs) add_attr(*node, a);
    return names;
  }

  std::string int64s(const std::vector<std::int64_t>& values, const Shape& shape) override {
    return initializer(onnx::TensorProto::INT64, shape, little_endian_bytes(values.data(), values.size()), "");
  }
  std::string floats(const std::vector<double>& values, const Shape& shape) override {
    std::vector<T> v(values.begin(), values.end());
    return initializer(float_elem_type<T>(), shape, little_endian_bytes(v.data(), v.size()), "");
  }
  bool float32() const override { return std::is_same_v<T, float>; }

  // An initializer of a leaf's values under `name` (already reserved).
  void leaf(const std::string& name, const xt::xarray<T>& value) {
    initializer(float_elem_type<T>(), shape_of(value), little_endian_bytes(value.data(), value.size()), name);
  }

  // Identity(from) -> to, for a named output.
  void identity(const std::string& from, const std::string& to) {
    onnx::NodeProto* node = m_graph.add_node();
    node->set_name(fresh("output." + to));
    node->set_op_type("Identity");
    node->add_input(from);
    node->add_output(to);
  }

 private:
  // Named: written under that name. Unnamed: the name of an equal initializer written before, or
  // a fresh "c.<prefix>" one.
  std::string initializer(int elem_type, const Shape& shape, std::string bytes, const std::string& name) {
    std::string key;
    if (name.empty()) {
      key = std::to_string(elem_type) + shape_str(shape) + bytes;
      const auto it = m_constants.find(key);
      if (it != m_constants.end()) return it->second;
    }
    onnx::TensorProto* t = m_graph.add_initializer();
    t->set_name(name.empty() ? fresh("c." + m_prefix) : name);
    t->set_data_type(elem_type);
    for (std::size_t d : shape) t->add_dims(static_cast<std::int64_t>(d));
    t->set_raw_data(std::move(bytes));
    if (name.empty()) m_constants.emplace(std::move(key), t->name());
    return t->name();
  }

  static void add_attr(onnx::NodeProto& node, const OnnxAttr& a) {
    onnx::AttributeProto* p = node.add_attribute();
    p->set_name(a.name);
    if (const auto* i = std::get_if<std::int64_t>(&a.value)) {
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(*i);
    } else if (const auto* f = std::get_if<double>(&a.value)) {
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(static_cast<float>(*f));
    } else if (const auto* s = std::get_if<std::string>(&a.value)) {
      p->set_type(onnx::AttributeProto::STRING);
      p->set_s(*s);
    } else {
      p->set_type(onnx::AttributeProto::INTS);
      for (std::int64_t v : std::get<std::vector<std::int64_t>>(a.value)) p->add_ints(v);
    }
  }

  onnx::GraphProto& m_graph;
  std::set<std::string> m_used;
  std::map<std::string, std::string> m_constants;  // type, shape and bytes -> initializer name
  std::string m_prefix, m_doc;
};

// The nodes some named output or gradient depends on.
template <class T>
std::vector<char> needed_nodes(const Graph<T>& g) {
  std::vector<char> needed(g.size(), 0);
  std::vector<std::size_t> stack;
  for (const auto* named : {&g.outputs(), &g.grads()}) {
    for (const auto& [name, slot] : *named) stack.push_back(slot.node);
  }
  while (!stack.empty()) {
    const std::size_t id = stack.back();
    stack.pop_back();
    if (needed[id]) continue;
    needed[id] = 1;
    for (const Slot& in : g.node(id).inputs) stack.push_back(in.node);
  }
  return needed;
}

// "softmax_vjp (backward, the gradient of node 5)": what an ONNX node's doc_string says of the
// xgrad node it lowers.
template <class T>
std::string describe(const Graph<T>& g, std::size_t id) {
  const Node<T>& n = g.node(id);
  std::string doc = "xgrad node " + std::to_string(id) + ": " + n.op_name() + " (" + role_name(n.role);
  if (!n.scope.empty()) doc += ", scope " + n.scope;
  if (const auto& of = n.grad_of()) doc += ", the gradient of node " + std::to_string(of->node);
  return doc + ")";
}

}  // namespace

template <class T>
std::string to_onnx_bytes(const Graph<T>& g, const OnnxExportOptions& options) {
  const std::string who = "to_onnx: ";
  if (g.outputs().empty() && g.grads().empty()) {
    throw error(who + "the graph names no output or gradient (Graph::set_output, Graph::set_grad): nothing to export");
  }
  g.require_values("to_onnx");
  onnx::ModelProto model;
  model.set_ir_version(onnx_ir_version);
  model.set_producer_name("xgrad");
  model.set_producer_version("0.1.0");
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(onnx_opset);
  onnx::GraphProto& graph = *model.mutable_graph();
  graph.set_name(options.graph_name);
  Writer<T> w(graph);

  // Leaf names first: each input, index leaf and parameter keeps its own, so none may repeat.
  std::map<std::string, std::size_t> leaf_ids;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& n = g.node(id);
    if (!n.is_leaf() || n.role == Role::constant) continue;
    if (n.name.empty()) throw error(who + "leaf node " + std::to_string(id) + " (" + n.op_name() + ") has no name");
    const auto [it, fresh] = leaf_ids.emplace(n.name, id);
    if (!fresh) {
      throw error(who + "nodes " + std::to_string(it->second) + " and " + std::to_string(id) + " are both leaves named '" +
                  n.name + "': ONNX names each graph input and initializer once");
    }
    w.reserve(n.name);
  }
  const auto output_name = [&](const std::string& name) {
    if (leaf_ids.count(name)) {
      throw error(who + "the output '" + name + "' has the name of leaf node " + std::to_string(leaf_ids.at(name)) +
                  ": ONNX names each value once");
    }
    w.reserve(name);
    return name;
  };
  std::vector<std::pair<std::string, Slot>> outputs;
  for (const auto& [name, slot] : g.outputs()) outputs.emplace_back(output_name(name), slot);
  for (const auto& [name, slot] : g.grads()) {
    if (g.outputs().count("grad_" + name)) {
      throw error(who + "the gradient '" + name + "' and the output 'grad_" + name + "' would share one ONNX name");
    }
    outputs.emplace_back(output_name("grad_" + name), slot);
  }

  const std::vector<char> needed = needed_nodes(g);
  std::map<std::pair<std::size_t, std::size_t>, std::string> names;  // slot -> value name
  std::map<std::size_t, std::string> bool_names;                      // mask leaf -> its bool input
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& n = g.node(id);
    if (!needed[id]) continue;
    if (n.is_leaf()) {
      if (n.role == Role::input || n.role == Role::parameter) {
        if (n.role == Role::parameter) w.leaf(n.name, n.value());
        if (n.role == Role::input || options.parameters_as_inputs) {
          const auto type = n.index_leaf ? onnx::TensorProto::INT64
                            : n.mask_leaf ? onnx::TensorProto::BOOL
                                          : float_elem_type<T>();
          set_type(*graph.add_input(), type, n.shape());
          graph.mutable_input(graph.input_size() - 1)->set_name(n.name);
        }
        names[{id, 0}] = n.name;
        if (n.mask_leaf) {
          // A bool input: the ops reading it see its 1 and 0 as floats, as in the graph; a
          // lowering that takes the condition itself reads OnnxNode::bool_inputs.
          w.begin_node(id, g.node(id).scope, describe(g, id));
          bool_names[id] = n.name;
          names[{id, 0}] = w.op("Cast", {n.name}, {{"to", std::int64_t{float_elem_type<T>()}}});
        }
      } else {
        const std::string name = w.fresh(n.name.empty() ? "constant" : n.name);
        w.leaf(name, n.value());
        names[{id, 0}] = name;
      }
      continue;
    }
    OnnxNode info;
    for (const Slot& in : n.inputs) {
      const Node<T>& src = g.node(in.node);
      info.inputs.push_back(names.at({in.node, in.output}));
      info.input_shapes.push_back(src.shape(in.output));
      info.index_inputs.push_back(src.index_leaf);
      info.bool_inputs.push_back(src.mask_leaf ? bool_names.at(in.node) : std::string());
    }
    for (std::size_t k = 0; k < n.output_count(); ++k) info.output_shapes.push_back(n.shape(k));
    info.step = g.step();
    info.training = g.training();
    w.begin_node(id, g.node(id).scope, describe(g, id));
    const std::vector<std::string> out = with_context(
        [&] { return who + "node " + std::to_string(id) + " (" + n.op_name() + "): "; },
        [&] { return n.op->to_onnx(w, info); });
    if (out.size() != n.output_count()) {
      throw error(who + "node " + std::to_string(id) + " (" + n.op_name() + "): its lowering gave " +
                  std::to_string(out.size()) + " values for " + std::to_string(n.output_count()) + " outputs");
    }
    for (std::size_t k = 0; k < out.size(); ++k) names[{id, k}] = out[k];
  }
  for (const auto& [name, slot] : outputs) {
    w.identity(names.at({slot.node, slot.output}), name);
    onnx::ValueInfoProto* v = graph.add_output();
    v->set_name(name);
    const Node<T>& src = g.node(slot.node);
    set_type(*v, src.index_leaf ? onnx::TensorProto::INT64 : float_elem_type<T>(), src.shape(slot.output));
  }
  const std::size_t bytes = model.ByteSizeLong();
  const std::size_t limit = std::min(options.max_bytes, OnnxExportOptions{}.max_bytes);
  if (bytes > limit) {
    throw error(who + "the model would be " + std::to_string(bytes) + " bytes, over the limit of " +
                std::to_string(limit) + " (protobuf's is 2 GiB; xgrad writes no external data)");
  }
  std::string out;
  if (!model.SerializeToString(&out)) throw error(who + "protobuf could not serialize the model");
  return out;
}

template <class T>
void to_onnx(const Graph<T>& g, const std::string& path, const OnnxExportOptions& options) {
  write_file_atomically(path, to_onnx_bytes(g, options));
}

template std::string to_onnx_bytes(const Graph<float>&, const OnnxExportOptions&);
template std::string to_onnx_bytes(const Graph<double>&, const OnnxExportOptions&);
template void to_onnx(const Graph<float>&, const std::string&, const OnnxExportOptions&);
template void to_onnx(const Graph<double>&, const std::string&, const OnnxExportOptions&);

}  // namespace xgrad
