#include <xgrad/graph/serialize.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <type_traits>

#include <xtensor/xbuilder.hpp>
#include <xtensor/xoperation.hpp>

namespace xgrad {

namespace {

// Every key of the format, spelled once.
namespace key {
constexpr const char* format = "format";
constexpr const char* version = "version";
constexpr const char* dtype = "dtype";
constexpr const char* nodes = "nodes";
constexpr const char* outputs = "outputs";
constexpr const char* grads = "grads";
constexpr const char* id = "id";
constexpr const char* op = "op";
constexpr const char* name = "name";
constexpr const char* role = "role";
constexpr const char* scope = "scope";
constexpr const char* inputs = "inputs";
constexpr const char* attrs = "attrs";
constexpr const char* shape = "shape";
constexpr const char* grad_of = "grad_of";
constexpr const char* value = "value";
constexpr const char* data = "data";
constexpr const char* diagnostics = "diagnostics";
constexpr const char* step = "step";
constexpr const char* training = "training";
}  // namespace key

constexpr const char* format_name = "xgrad-graph";
// Version 2: nodes with several outputs (each with its shape, grad_of and data), inputs and names
// as [node, output] pairs, index leaves, mask leaves (added within version 2: a file without one
// reads as before). Version 1 (one output a node, ids alone) still imports.
constexpr long format_version = 2;

template <class S>
Json shape_json(const S& shape) {
  Json j = Json::array();
  for (auto d : shape) j.push_back(d);
  return j;
}

Json slot_json(const Slot& s) { return Json::array({s.node, s.output}); }

// Elements [begin, end) of output k's stored data: an index leaf's int64 ids, a mask leaf's
// booleans, or numbers (non-finite ones as strings).
template <class T>
Json data_json(const Node<T>& n, std::size_t k, std::size_t begin, std::size_t end) {
  Json data = Json::array();
  for (std::size_t i = begin; i < end; ++i) {
    if (n.index_leaf) {
      data.push_back(n.indices.data()[i]);
    } else if (n.mask_leaf) {
      data.push_back(n.value(k).data()[i] != T(0));
    } else {
      data.push_back(encode_number(static_cast<double>(n.value(k).data()[i])));
    }
  }
  return data;
}

template <class T>
std::size_t data_size(const Node<T>& n, std::size_t k) {
  return n.index_leaf ? n.indices.size() : n.value(k).size();
}

// Attribute values are numbers, booleans, or arrays of them; non-finite numbers become strings.
Json encode_attrs(const Json& attrs) {
  Json out = Json::object();
  for (const auto& item : attrs.items()) {
    Json v = item.value();
    if (v.is_number_float()) v = encode_number(v.get<double>());
    if (v.is_array()) {
      for (auto& e : v) {
        if (e.is_number_float()) e = encode_number(e.get<double>());
      }
    }
    out[item.key()] = std::move(v);
  }
  return out;
}

// Checks the numbers of a stored value of this shape (the "data" array) and writes them to `out`
// when given (an array of that shape). Checked without `out` first, nothing is allocated for it.
// V is T, std::int64_t for an index leaf (integers only) or bool for a mask leaf (booleans only).
template <class V>
void decode_data(const JsonCursor& data, const Shape& shape, V* out = nullptr) {
  const std::size_t count = shape_size(shape);
  if (data.array_size() != count) {
    data.fail("holds " + std::to_string(data.array_size()) + " numbers, but shape " + shape_str(shape) +
              " needs " + std::to_string(count));
  }
  const Json& raw = data.json();
  for (std::size_t i = 0; i < count; ++i) {
    const Json& e = raw[i];
    if constexpr (std::is_same_v<V, bool>) {
      // A mask: JSON booleans only.
      if (!e.is_boolean()) data[i].fail("expected true or false (a mask leaf holds booleans)");
      if (out) out[i] = e.get<bool>();
    } else if constexpr (std::is_integral_v<V>) {
      // Indices: JSON integers only (a number like 2.0 or 1e30 is refused by integer()).
      const long x = e.is_number_integer() && !e.is_number_unsigned() ? e.get<long>() : data[i].integer();
      if (out) out[i] = static_cast<V>(x);
    } else {
      // The common case without building a cursor; anything else goes through one for its message.
      const double x = e.is_number() ? e.get<double>() : data[i].number();
      if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<V>::max())) {
        data[i].fail("out of the range of " + std::string(dtype_name<V>()));
      }
      if (out) out[i] = static_cast<V>(x);
    }
  }
}

template <class V>
xt::xarray<V> data_of(const JsonCursor& data, const Shape& shape) {
  xt::xarray<V> v = xt::xarray<V>::from_shape(shape);
  decode_data<V>(data, shape, v.data());
  return v;
}

std::size_t earlier_node(const JsonCursor& c, std::size_t self) {
  const std::size_t id = c.index();
  if (id >= self) {
    c.fail("refers to node " + std::to_string(id) + ", which is not before node " + std::to_string(self));
  }
  return id;
}

// What an import may still allocate and compute. Every node is charged, before anything runs,
// its elements and its op's work (Op::work), so that a small file cannot make the importer
// allocate or compute without bound.
struct Budget {
  std::size_t elements;
  WorkBudget work;
  std::size_t used_elements = 0;

  void charge_elements(const JsonCursor& c, const Shape& shape) {
    const auto count = bounded_size(shape, elements);
    if (!count || *count > elements - used_elements) {
      c.fail("the graph holds more than " + std::to_string(elements) + " elements in all, the most this import takes");
    }
    used_elements += *count;
  }
  void charge_work(const JsonCursor& c, const std::string& op, double node_work) {
    if (!work.add(node_work)) c.fail(work.refusal(op, node_work));
  }
};

// One output of a node of the format: its shape, the slot it is the gradient of, its stored data.
struct OutputSpec {
  Shape shape;
  std::optional<Slot> grad_of;
  std::optional<JsonCursor> data;
};

// A node of the format, read and checked against the nodes before it.
struct NodeSpec {
  std::string op, name, scope;
  Role role = Role::forward;
  std::shared_ptr<const Op> made;  // null for a leaf
  std::vector<Slot> inputs;
  std::vector<OutputSpec> outputs;
  double work = 0;  // Op::work of its forward
};

// The reading of one version: where a node's inputs, outputs and gradient marks are.
class NodeReader {
 public:
  NodeReader(long version, const std::vector<NodeSpec>& before) : m_version(version), m_before(before) {}

  // An output of an earlier node: [node, output] (version 2) or a node id (version 1).
  Slot slot(const JsonCursor& c, std::size_t self) const {
    Slot s;
    if (m_version == 1) {
      s.node = earlier_node(c, self);
    } else {
      if (c.array_size() != 2) c.fail("expected [node, output], an array of 2 integers");
      s.node = earlier_node(c[std::size_t(0)], self);
      s.output = c[std::size_t(1)].index();
    }
    const std::size_t outputs = m_before[s.node].outputs.size();
    if (s.output >= outputs) {
      c.fail("refers to output " + std::to_string(s.output) + " of node " + std::to_string(s.node) + ", which has " +
             std::to_string(outputs));
    }
    return s;
  }

  // The keys of a node, with the outputs read into n.
  template <class V>
  void read_outputs(const JsonCursor& c, std::size_t self, NodeSpec& n) const {
    if (m_version == 1) {
      c.check_object({key::id, key::op, key::name, key::role, key::inputs, key::attrs, key::shape},
                     {key::grad_of, key::value});
      OutputSpec& out = n.outputs.emplace_back();
      out.shape = c[key::shape].shape();
      if (auto gc = c.find(key::grad_of)) out.grad_of = slot(*gc, self);
      if (auto vc = c.find(key::value)) {
        vc->check_object({key::shape, key::data});
        const Shape stored = (*vc)[key::shape].shape();
        decode_data<V>((*vc)[key::data], stored);
        if (stored != out.shape) (*vc)[key::shape].fail("is " + shape_str(stored) + ", the node's shape is " + shape_str(out.shape));
        out.data = (*vc)[key::data];
      }
      return;
    }
    c.check_object({key::id, key::op, key::name, key::role, key::inputs, key::attrs, key::outputs}, {key::scope});
    if (auto sc = c.find(key::scope)) {
      n.scope = sc->string();
      const std::string fault = scope_name_fault(n.scope);
      if (!fault.empty()) sc->fail(fault);
    }
    const JsonCursor outs = c[key::outputs];
    for (std::size_t k = 0, m = outs.array_size(); k < m; ++k) {
      const JsonCursor o = outs[k];
      o.check_object({key::shape}, {key::grad_of, key::data});
      OutputSpec& out = n.outputs.emplace_back();
      out.shape = o[key::shape].shape();
      if (auto gc = o.find(key::grad_of)) out.grad_of = slot(*gc, self);
      if (auto dc = o.find(key::data)) {
        decode_data<V>(*dc, out.shape);
        out.data = *dc;
      }
    }
  }

  // Where a message about output k's shape points.
  JsonCursor shape_at(const JsonCursor& c, std::size_t k) const {
    return m_version == 1 ? c[key::shape] : c[key::outputs][k][key::shape];
  }
  JsonCursor grad_of_at(const JsonCursor& c, std::size_t k) const {
    return m_version == 1 ? c[key::grad_of] : c[key::outputs][k][key::grad_of];
  }
  long version() const { return m_version; }

 private:
  long m_version;
  const std::vector<NodeSpec>& m_before;
};

template <class T>
NodeSpec read_node(const JsonCursor& c, std::size_t i, const OpFactory& make_op, const NodeReader& reader,
                   const std::vector<NodeSpec>& before) {
  c.expect_object();
  NodeSpec n;
  const std::size_t id = c[key::id].index();
  if (id != i) {
    c[key::id].fail(id < i ? "duplicate id " + std::to_string(id) + " (nodes[" + std::to_string(id) + "] has it)"
                           : "id " + std::to_string(id) + " out of order: ids are the positions 0, 1, 2, ..."
                             " (expected " + std::to_string(i) + ")");
  }
  n.op = c[key::op].string();
  n.name = c[key::name].string();
  const JsonCursor role_c = c[key::role];
  const std::optional<Role> role = role_from_name(role_c.string());
  if (!role) role_c.fail("unknown role \"" + role_c.string() + "\"");
  n.role = *role;
  const bool index_leaf = n.op == index_leaf_op, mask_leaf = n.op == mask_leaf_op;
  if (index_leaf && reader.version() == 1) c[key::op].fail("version 1 has no index leaves");
  if (mask_leaf && reader.version() == 1) c[key::op].fail("version 1 has no mask leaves");
  if (index_leaf) {
    reader.read_outputs<std::int64_t>(c, i, n);
  } else if (mask_leaf) {
    reader.read_outputs<bool>(c, i, n);
  } else {
    reader.read_outputs<T>(c, i, n);
  }
  const JsonCursor inputs_c = c[key::inputs];
  for (std::size_t j = 0, m = inputs_c.array_size(); j < m; ++j) n.inputs.push_back(reader.slot(inputs_c[j], i));
  const JsonCursor attrs = c[key::attrs];
  attrs.expect_object();  // the op's factory checks the keys
  if (is_leaf_op_name(n.op)) {
    // An input, parameter or constant has its op as its role; an index or mask leaf is an input.
    if (role_c.string() != (index_leaf || mask_leaf ? role_name(Role::input) : n.op.c_str())) {
      role_c.fail("a leaf \"" + n.op + "\" has role \"" + role_c.string() + "\"");
    }
    if (!n.inputs.empty()) inputs_c.fail("a leaf has no inputs");
    if (!attrs.json().empty()) attrs.fail("a leaf has no attributes");
    if (n.outputs.size() != 1) c[key::outputs].fail("a leaf has 1 output, not " + std::to_string(n.outputs.size()));
    return n;
  }
  if (n.role != Role::forward && n.role != Role::backward) {
    role_c.fail("op \"" + n.op + "\" is not a leaf: its role is \"forward\" or \"backward\"");
  }
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.role == Role::forward && n.outputs[k].grad_of) reader.grad_of_at(c, k).fail("a forward node is no gradient");
  }
  n.made = make_op(n.op, attrs);
  if (!n.made) c[key::op].fail("unknown op \"" + n.op + "\" (a program's own op reads back through ImportOptions::ops: docs/custom-ops.md)");
  if (n.inputs.size() != n.made->arity()) {
    inputs_c.fail(n.op + " takes " + std::to_string(n.made->arity()) + " inputs, got " + std::to_string(n.inputs.size()));
  }
  if (n.made->output_count() == 0) c[key::op].fail(n.op + " has no outputs: an op has at least one");
  if (n.outputs.size() != n.made->output_count()) {
    if (reader.version() == 1) {
      c[key::op].fail("a version 1 " + n.op + " node has one output; this version's " + n.op + " has " +
                      std::to_string(n.made->output_count()) + ": export the graph again");
    }
    c[key::outputs].fail(n.op + " has " + std::to_string(n.made->output_count()) + " outputs, got " +
                         std::to_string(n.outputs.size()));
  }
  std::vector<Shape> in_shapes;
  for (const Slot& in : n.inputs) {
    const NodeSpec& x = before[in.node];
    if (x.op == index_leaf_op && !n.made->accepts_indices(in_shapes.size())) {
      inputs_c[in_shapes.size()].fail("node " + std::to_string(in.node) + " is an index leaf; " + n.op +
                                      " takes " + dtype_name<T>() + " values there");
    }
    in_shapes.push_back(x.outputs[in.output].shape);
  }
  std::vector<Shape> computed;
  try {
    computed = n.made->infer_shapes(in_shapes);
  } catch (const error& e) {
    c.fail(n.op + ": " + e.what());
  }
  std::vector<Shape> declared;
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    if (k < computed.size() && computed[k] != n.outputs[k].shape) {
      reader.shape_at(c, k).fail("declared " + shape_str(n.outputs[k].shape) + ", but " + n.op + " of its inputs gives " +
                                 shape_str(computed[k]));
    }
    declared.push_back(n.outputs[k].shape);
  }
  n.work = n.made->work(in_shapes, declared);
  return n;
}

// Adds a checked node to the graph: a leaf with its stored value (zeros if none), or the op
// applied to its inputs, which runs its forward.
template <class T>
void build_node(const NodeSpec& n, Graph<T>& g) {
  const OutputSpec& first = n.outputs.front();  // every node has an output (read_node checks)
  std::optional<typename Graph<T>::Scope> scope;
  if (!n.scope.empty()) scope.emplace(g.scope(n.scope));
  if (n.op == index_leaf_op) {
    g.indices(n.name, first.data ? data_of<std::int64_t>(*first.data, first.shape)
                                 : xt::xarray<std::int64_t>(xt::zeros<std::int64_t>(first.shape)));
  } else if (n.op == mask_leaf_op) {
    g.mask(n.name, first.data ? data_of<bool>(*first.data, first.shape) : xt::xarray<bool>(xt::zeros<bool>(first.shape)));
  } else if (!n.made) {
    xt::xarray<T> v = first.data ? data_of<T>(*first.data, first.shape) : xt::xarray<T>(xt::zeros<T>(first.shape));
    if (n.role == Role::input) g.input(n.name, std::move(v));
    else if (n.role == Role::parameter) g.parameter(n.name, std::move(v));
    else g.constant(n.name, std::move(v));
  } else {
    std::vector<Var<T>> inputs;
    for (const Slot& in : n.inputs) inputs.push_back(g.var(in));
    std::optional<typename Graph<T>::BackwardScope> backward;
    if (n.role == Role::backward) backward.emplace(g);
    g.apply(n.made, inputs);
  }
  for (std::size_t k = 0; k < n.outputs.size(); ++k) {
    if (n.outputs[k].grad_of) g.set_grad_of(Slot{g.size() - 1, k}, *n.outputs[k].grad_of);
  }
}

// The "outputs" or "grads" object: each name and the output it names.
std::vector<std::pair<std::string, Slot>> read_names(const JsonCursor& c, const NodeReader& reader, std::size_t count) {
  c.expect_object();
  std::vector<std::pair<std::string, Slot>> names;
  for (const auto& item : c.json().items()) {
    const JsonCursor slot_c(item.value(), c.path() + "." + item.key());
    const JsonCursor id_c = reader.version() == 1 ? slot_c : slot_c[std::size_t(0)];
    if (reader.version() != 1) slot_c.array_size();
    const std::size_t id = id_c.index();
    if (id >= count) id_c.fail("refers to node " + std::to_string(id) + " of a graph of " + std::to_string(count));
    names.emplace_back(item.key(), reader.slot(slot_c, count));
  }
  return names;
}

// The graph's run state (Graph::set_step, set_training): optional keys of version 2, absent
// when they have their defaults (step 0, training).
struct RunState {
  std::uint64_t step = 0;
  bool training = true;
};

// The top level: format, version and dtype checked; returns the version and the run state.
template <class T>
long check_header(const JsonCursor& root, RunState* state = nullptr) {
  root.check_object({key::format, key::version, key::dtype, key::nodes, key::outputs, key::grads},
                    {key::step, key::training, key::diagnostics});
  if (auto d = root.find(key::diagnostics)) d->array_size();
  const std::string format = root[key::format].string();
  if (format != format_name) root[key::format].fail("expected \"" + std::string(format_name) + "\", got \"" + format + "\"");
  const long version = root[key::version].integer();
  if (version != 1 && version != format_version) {
    root[key::version].fail("version " + std::to_string(version) + " is not supported (this is version " +
                            std::to_string(format_version) + ", and reads version 1 too)");
  }
  const std::string dtype = graph_json_dtype(root.json());
  if (dtype != dtype_name<T>()) root[key::dtype].fail("the graph is " + dtype + ", asked to read it as " + dtype_name<T>());
  RunState read;
  for (const char* k : {key::step, key::training}) {
    if (version == 1 && root.find(k)) root[k].fail("version 1 has no run state (step, training)");
  }
  if (auto c = root.find(key::step)) read.step = c->uint64();
  if (auto c = root.find(key::training)) read.training = c->boolean();
  if (state) *state = read;
  return version;
}

}  // namespace

std::string graph_json_dtype(const Json& json) {
  const JsonCursor dtype = JsonCursor(json, "")[key::dtype];
  const std::string name = dtype.string();
  if (name != "float32" && name != "float64") dtype.fail("expected \"float32\" or \"float64\", got \"" + name + "\"");
  return name;
}

namespace {

// The members before "nodes": format, version, dtype, and the run state where it differs from
// the defaults (an export of a graph that never set it is what it was before these keys existed).
template <class T>
Json header_json(const Graph<T>& g) {
  Json j{{key::format, format_name}, {key::version, format_version}, {key::dtype, dtype_name<T>()}};
  if (g.step() != RunState{}.step) j[key::step] = g.step();
  if (g.training() != RunState{}.training) j[key::training] = g.training();
  return j;
}

// Node i's object without its outputs' "data", which, when exported, is each output's last key.
template <class T>
Json node_json(const Graph<T>& g, std::size_t i) {
  const Node<T>& n = g.node(i);
  Json j;
  j[key::id] = i;
  j[key::op] = n.op_name();
  j[key::name] = n.name;
  j[key::role] = role_name(n.role);
  if (!n.scope.empty()) j[key::scope] = n.scope;
  Json inputs = Json::array();
  for (const Slot& in : n.inputs) inputs.push_back(slot_json(in));
  j[key::inputs] = std::move(inputs);
  j[key::attrs] = n.op ? encode_attrs(n.op->attrs()) : Json::object();
  Json outputs = Json::array();
  for (std::size_t k = 0; k < n.output_count(); ++k) {
    Json out{{key::shape, shape_json(n.shape(k))}};
    if (n.grad_of(k)) out[key::grad_of] = slot_json(*n.grad_of(k));
    outputs.push_back(std::move(out));
  }
  j[key::outputs] = std::move(outputs);
  return j;
}

template <class T>
bool exports_data(const Node<T>& n, ExportValues values) {
  return values == ExportValues::all || (values == ExportValues::inputs && n.is_leaf());
}

Json names_json(const std::map<std::string, Slot>& names) {
  Json j = Json::object();
  for (const auto& [name, slot] : names) append_member(j, name, slot_json(slot));
  return j;
}

// `"key":` as dump() writes a member's key.
void write_key(std::ostream& out, const char* name) { out << Json(name).dump() << ':'; }

// `json`'s dump() without its last byte (an object's '}'), for members written after it.
void write_open(std::ostream& out, const Json& json) {
  const std::string text = json.dump();
  out.write(text.data(), static_cast<std::streamsize>(text.size() - 1));
}

// Numbers of a stored value written per chunk of this many: the memory of one chunk's JSON.
constexpr std::size_t data_chunk = 4096;

// Node i as node_json(g, i) with its data dumps, written piece by piece: its outputs' data in
// chunks of data_chunk numbers.
template <class T>
void write_node(std::ostream& out, const Graph<T>& g, std::size_t i, ExportValues values) {
  const Node<T>& n = g.node(i);
  Json j = node_json(g, i);
  if (!exports_data(n, values)) {
    out << j.dump();
    return;
  }
  const Json outputs = std::move(j[key::outputs]);
  j.erase(key::outputs);
  write_open(out, j);
  out << ',';
  write_key(out, key::outputs);
  out << '[';
  for (std::size_t k = 0; k < outputs.size(); ++k) {
    if (k > 0) out << ',';
    write_open(out, outputs[k]);
    out << ',';
    write_key(out, key::data);
    out << '[';
    const std::size_t size = data_size(n, k);
    for (std::size_t begin = 0; begin < size; begin += data_chunk) {
      const std::string chunk = data_json(n, k, begin, std::min(size, begin + data_chunk)).dump();
      if (begin > 0) out << ',';
      out.write(chunk.data() + 1, static_cast<std::streamsize>(chunk.size() - 2));  // without [ and ]
    }
    out << "]}";
  }
  out << "]}";
}

}  // namespace

namespace detail {

template <class T>
Json graph_to_json(const Graph<T>& g, ExportValues values, std::optional<Json> diagnostics) {
  g.require_values("export");
  Json nodes = Json::array();
  for (std::size_t i = 0; i < g.size(); ++i) {
    Json j = node_json(g, i);
    const Node<T>& n = g.node(i);
    if (exports_data(n, values)) {
      for (std::size_t k = 0; k < n.output_count(); ++k) j[key::outputs][k][key::data] = data_json(n, k, 0, data_size(n, k));
    }
    nodes.push_back(std::move(j));
  }
  Json j = header_json(g);
  j[key::nodes] = std::move(nodes);
  j[key::outputs] = names_json(g.outputs());
  j[key::grads] = names_json(g.grads());
  if (diagnostics) j[key::diagnostics] = std::move(*diagnostics);
  return j;
}

template <class T>
void write_graph_json(std::ostream& out, const Graph<T>& g, ExportValues values,
                      const std::function<void(std::ostream&)>& diagnostics) {
  g.require_values("export");
  write_open(out, header_json(g));
  out << ',';
  write_key(out, key::nodes);
  out << '[';
  for (std::size_t i = 0; i < g.size(); ++i) {
    if (i > 0) out << ',';
    write_node(out, g, i, values);
  }
  out << "],";
  write_key(out, key::outputs);
  out << names_json(g.outputs()).dump() << ',';
  write_key(out, key::grads);
  out << names_json(g.grads()).dump();
  if (diagnostics) {
    out << ',';
    write_key(out, key::diagnostics);
    diagnostics(out);
  }
  out << '}';
}

template <class T>
void graph_from_json(const Json& json, const OpFactory& make_op, Graph<T>& g, std::size_t max_elements,
                     double max_work) {
  if (g.size() != 0) throw error("graph_from_json: the graph to fill already has nodes");
  if (!(max_work >= 0 && max_work <= 1e300)) throw error("graph_from_json: max_work must be a finite number >= 0, got " + std::to_string(max_work));
  const JsonCursor root(json, "");
  RunState state;
  const long version = check_header<T>(root, &state);
  const JsonCursor nodes = root[key::nodes];
  // First every node is read, checked and charged, without running any; then the graph is built.
  Budget budget{max_elements, WorkBudget(max_work, "ImportOptions::max_work raises the limit")};
  const std::size_t count = nodes.array_size();
  std::vector<NodeSpec> specs;
  specs.reserve(count);
  const NodeReader reader(version, specs);
  for (std::size_t i = 0; i < count; ++i) {
    specs.push_back(read_node<T>(nodes[i], i, make_op, reader, specs));
    for (const OutputSpec& out : specs.back().outputs) budget.charge_elements(nodes[i], out.shape);
    if (specs.back().made) budget.charge_work(nodes[i], specs.back().op, specs.back().work);
  }
  const auto outputs = read_names(root[key::outputs], reader, count);
  const auto grads = read_names(root[key::grads], reader, count);
  g.set_step(state.step);  // before any node runs: a forward may read them (dropout)
  g.set_training(state.training);
  for (const NodeSpec& n : specs) build_node(n, g);
  for (const auto& [name, slot] : outputs) g.set_output(name, g.var(slot));
  for (const auto& [name, slot] : grads) g.set_grad(name, g.var(slot));
}

}  // namespace detail

template <class T>
std::vector<std::vector<std::optional<xt::xarray<T>>>> stored_values(const Json& json) {
  const JsonCursor root(json, "");
  const long version = check_header<T>(root);
  const JsonCursor nodes = root[key::nodes];
  std::vector<std::vector<std::optional<xt::xarray<T>>>> values(nodes.array_size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const JsonCursor n = nodes[i];
    if (n[key::op].string() == index_leaf_op || n[key::op].string() == mask_leaf_op) {
      values[i].resize(1);
      continue;
    }
    if (version == 1) {
      values[i].resize(1);
      if (auto vc = n.find(key::value)) values[i][0] = data_of<T>((*vc)[key::data], (*vc)[key::shape].shape());
      continue;
    }
    const JsonCursor outs = n[key::outputs];
    values[i].resize(outs.array_size());
    for (std::size_t k = 0; k < values[i].size(); ++k) {
      if (auto dc = outs[k].find(key::data)) values[i][k] = data_of<T>(*dc, outs[k][key::shape].shape());
    }
  }
  return values;
}

#define XGRAD_INSTANTIATE_SERIALIZE(T)                                                        \
  template Json detail::graph_to_json(const Graph<T>&, ExportValues, std::optional<Json>);           \
  template void detail::write_graph_json(std::ostream&, const Graph<T>&, ExportValues,                   \
                                         const std::function<void(std::ostream&)>&);                     \
  template void detail::graph_from_json(const Json&, const OpFactory&, Graph<T>&, std::size_t, double); \
  template std::vector<std::vector<std::optional<xt::xarray<T>>>> stored_values(const Json&);
XGRAD_INSTANTIATE_SERIALIZE(float)
XGRAD_INSTANTIATE_SERIALIZE(double)
#undef XGRAD_INSTANTIATE_SERIALIZE

}  // namespace xgrad
