#include <xgrad/graph/serialize.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include <xtensor/xbuilder.hpp>

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
constexpr const char* inputs = "inputs";
constexpr const char* attrs = "attrs";
constexpr const char* shape = "shape";
constexpr const char* grad_of = "grad_of";
constexpr const char* value = "value";
constexpr const char* data = "data";
constexpr const char* diagnostics = "diagnostics";
}  // namespace key

constexpr const char* format_name = "xgrad-graph";
constexpr long format_version = 1;

template <class S>
Json shape_json(const S& shape) {
  Json j = Json::array();
  for (auto d : shape) j.push_back(d);
  return j;
}

template <class T>
Json value_json(const xt::xarray<T>& v) {
  Json data = Json::array();
  for (std::size_t i = 0; i < v.size(); ++i) data.push_back(encode_number(static_cast<double>(v.data()[i])));
  return Json{{key::shape, shape_json(v.shape())}, {key::data, std::move(data)}};
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

// Checks a stored value, {"shape", "data"}, and writes its numbers to `out` when given (an array
// of its shape). Returns its shape. Checked without `out` first, nothing is allocated for it.
template <class T>
Shape decode_value(const JsonCursor& c, T* out = nullptr) {
  c.check_object({key::shape, key::data});
  const Shape shape = c[key::shape].shape();
  const JsonCursor data = c[key::data];
  std::size_t count = 1;
  for (auto d : shape) count *= d;
  if (data.array_size() != count) {
    data.fail("holds " + std::to_string(data.array_size()) + " numbers, but shape " + shape_str(shape) +
              " needs " + std::to_string(count));
  }
  const Json& raw = data.json();
  for (std::size_t i = 0; i < count; ++i) {
    const Json& e = raw[i];
    // The common case without building a cursor; anything else goes through one for its message.
    const double x = e.is_number() ? e.get<double>() : data[i].number();
    if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<T>::max())) {
      data[i].fail("out of the range of " + std::string(dtype_name<T>()));
    }
    if (out) out[i] = static_cast<T>(x);
  }
  return shape;
}

template <class T>
xt::xarray<T> value_of(const JsonCursor& c) {
  xt::xarray<T> v = xt::xarray<T>::from_shape(c[key::shape].shape());
  decode_value<T>(c, v.data());
  return v;
}

bool is_leaf_op(const std::string& op) { return op == "input" || op == "parameter" || op == "constant"; }

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
  double work;
  std::size_t used_elements = 0;
  double used_work = 0;

  void charge_elements(const JsonCursor& c, const Shape& shape) {
    const auto count = bounded_size(shape, elements);
    if (!count || *count > elements - used_elements) {
      c.fail("the graph holds more than " + std::to_string(elements) + " elements in all, the most this import takes");
    }
    used_elements += *count;
  }
  void charge_work(const JsonCursor& c, const std::string& op, double node_work) {
    used_work += node_work;
    if (!(used_work <= work)) {  // also a NaN from an op's work
      char text[160];
      std::snprintf(text, sizeof text, "%.0f in all, this %s %.0f", used_work, op.c_str(), node_work);
      char limit[320];
      std::snprintf(limit, sizeof limit, "%.0f", work);
      c.fail("computing the graph takes more than " + std::string(limit) +
             " element visits (Op::work), the most this import runs: " + text);
    }
  }
};

// A node of the format, read and checked against the nodes before it.
struct NodeSpec {
  std::string op, name;
  Role role = Role::forward;
  std::shared_ptr<const Op> made;  // null for a leaf
  std::vector<std::size_t> inputs;
  Shape shape;
  std::optional<std::size_t> grad_of;
  std::optional<JsonCursor> value;
  double work = 0;  // Op::work of its forward
};

template <class T>
NodeSpec read_node(const JsonCursor& c, std::size_t i, const OpFactory& make_op, const std::vector<NodeSpec>& before) {
  c.check_object({key::id, key::op, key::name, key::role, key::inputs, key::attrs, key::shape},
                 {key::grad_of, key::value});
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
  const JsonCursor inputs_c = c[key::inputs];
  for (std::size_t j = 0, m = inputs_c.array_size(); j < m; ++j) n.inputs.push_back(earlier_node(inputs_c[j], i));
  const JsonCursor attrs = c[key::attrs];
  attrs.expect_object();  // the op's factory checks the keys
  n.shape = c[key::shape].shape();
  if (auto gc = c.find(key::grad_of)) n.grad_of = earlier_node(*gc, i);
  if (auto vc = c.find(key::value)) {
    const Shape stored = decode_value<T>(*vc);
    if (stored != n.shape) (*vc)[key::shape].fail("is " + shape_str(stored) + ", the node's shape is " + shape_str(n.shape));
    n.value = *vc;
  }
  if (is_leaf_op(n.op)) {
    if (role_name(n.role) != n.op) role_c.fail("a leaf \"" + n.op + "\" has role \"" + role_c.string() + "\"");
    if (!n.inputs.empty()) inputs_c.fail("a leaf has no inputs");
    if (!attrs.json().empty()) attrs.fail("a leaf has no attributes");
    return n;
  }
  if (n.role != Role::forward && n.role != Role::backward) {
    role_c.fail("op \"" + n.op + "\" is not a leaf: its role is \"forward\" or \"backward\"");
  }
  if (n.role == Role::forward && n.grad_of) c[key::grad_of].fail("a forward node is no gradient");
  n.made = make_op(n.op, attrs);
  if (!n.made) c[key::op].fail("unknown op \"" + n.op + "\"");
  if (n.inputs.size() != n.made->arity()) {
    inputs_c.fail(n.op + " takes " + std::to_string(n.made->arity()) + " inputs, got " + std::to_string(n.inputs.size()));
  }
  std::vector<Shape> in_shapes;
  for (std::size_t in : n.inputs) in_shapes.push_back(before[in].shape);
  Shape computed;
  try {
    computed = n.made->infer_shape(in_shapes);
  } catch (const error& e) {
    c.fail(n.op + ": " + e.what());
  }
  if (computed != n.shape) {
    c[key::shape].fail("declared " + shape_str(n.shape) + ", but " + n.op + " of its inputs gives " + shape_str(computed));
  }
  n.work = n.made->work(in_shapes, n.shape);
  return n;
}

// Adds a checked node to the graph: a leaf with its stored value (zeros if none), or the op
// applied to its inputs, which runs its forward.
template <class T>
void build_node(const NodeSpec& n, Graph<T>& g) {
  if (!n.made) {
    xt::xarray<T> v = n.value ? value_of<T>(*n.value) : xt::xarray<T>(xt::zeros<T>(n.shape));
    if (n.role == Role::input) g.input(n.name, std::move(v));
    else if (n.role == Role::parameter) g.parameter(n.name, std::move(v));
    else g.constant(n.name, std::move(v));
  } else {
    std::vector<Var<T>> inputs;
    for (std::size_t in : n.inputs) inputs.push_back(g.var(in));
    std::optional<typename Graph<T>::BackwardScope> scope;
    if (n.role == Role::backward) scope.emplace(g);
    g.apply(n.made, inputs);
  }
  if (n.grad_of) g.set_grad_of(g.size() - 1, *n.grad_of);
}

// The "outputs" or "grads" object: each name and the id of a node of a graph of `count` nodes.
std::vector<std::pair<std::string, std::size_t>> read_names(const JsonCursor& c, std::size_t count) {
  c.expect_object();
  std::vector<std::pair<std::string, std::size_t>> names;
  for (const auto& item : c.json().items()) {
    const JsonCursor id_c(item.value(), c.path() + "." + item.key());
    const std::size_t id = id_c.index();
    if (id >= count) id_c.fail("refers to node " + std::to_string(id) + " of a graph of " + std::to_string(count));
    names.emplace_back(item.key(), id);
  }
  return names;
}

// The top level: format, version and dtype checked; returns the nodes.
template <class T>
JsonCursor check_header(const JsonCursor& root) {
  root.check_object({key::format, key::version, key::dtype, key::nodes, key::outputs, key::grads}, {key::diagnostics});
  if (auto d = root.find(key::diagnostics)) d->array_size();
  const std::string format = root[key::format].string();
  if (format != format_name) root[key::format].fail("expected \"" + std::string(format_name) + "\", got \"" + format + "\"");
  const long version = root[key::version].integer();
  if (version != format_version) {
    root[key::version].fail("version " + std::to_string(version) + " is not supported (this is version " +
                            std::to_string(format_version) + ")");
  }
  const std::string dtype = graph_json_dtype(root.json());
  if (dtype != dtype_name<T>()) root[key::dtype].fail("the graph is " + dtype + ", asked to read it as " + dtype_name<T>());
  return root[key::nodes];
}

}  // namespace

std::string graph_json_dtype(const Json& json) {
  const JsonCursor dtype = JsonCursor(json, "")[key::dtype];
  const std::string name = dtype.string();
  if (name != "float32" && name != "float64") dtype.fail("expected \"float32\" or \"float64\", got \"" + name + "\"");
  return name;
}

const char* values_name(ExportValues values) {
  switch (values) {
    case ExportValues::none: return "none";
    case ExportValues::inputs: return "inputs";
    case ExportValues::all: return "all";
  }
  return "?";
}

template <class T>
Json graph_to_json(const Graph<T>& g, ExportValues values, std::optional<Json> diagnostics) {
  g.require_values("export");
  Json nodes = Json::array();
  for (std::size_t i = 0; i < g.size(); ++i) {
    const Node<T>& n = g.node(i);
    Json j;
    j[key::id] = i;
    j[key::op] = n.op_name();
    j[key::name] = n.name;
    j[key::role] = role_name(n.role);
    j[key::inputs] = shape_json(n.inputs);
    j[key::attrs] = n.op ? encode_attrs(n.op->attrs()) : Json::object();
    j[key::shape] = shape_json(n.value.shape());
    if (n.grad_of) j[key::grad_of] = *n.grad_of;
    if (values == ExportValues::all || (values == ExportValues::inputs && n.is_leaf())) {
      j[key::value] = value_json(n.value);
    }
    nodes.push_back(std::move(j));
  }
  Json outputs = Json::object(), grads = Json::object();
  for (const auto& [name, id] : g.outputs()) outputs[name] = id;
  for (const auto& [name, id] : g.grads()) grads[name] = id;
  Json j{{key::format, format_name}, {key::version, format_version}, {key::dtype, dtype_name<T>()},
         {key::nodes, std::move(nodes)}, {key::outputs, std::move(outputs)}, {key::grads, std::move(grads)}};
  if (diagnostics) j[key::diagnostics] = std::move(*diagnostics);
  return j;
}

template <class T>
void graph_from_json(const Json& json, const OpFactory& make_op, Graph<T>& g, std::size_t max_elements,
                     double max_work) {
  if (g.size() != 0) throw error("graph_from_json: the graph to fill already has nodes");
  if (!(max_work >= 0 && max_work <= 1e300)) throw error("graph_from_json: max_work must be a finite number >= 0, got " + std::to_string(max_work));
  const JsonCursor root(json, "");
  const JsonCursor nodes = check_header<T>(root);
  // First every node is read, checked and charged, without running any; then the graph is built.
  Budget budget{max_elements, max_work};
  const std::size_t count = nodes.array_size();
  std::vector<NodeSpec> specs;
  specs.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    specs.push_back(read_node<T>(nodes[i], i, make_op, specs));
    budget.charge_elements(nodes[i], specs.back().shape);
    if (specs.back().made) budget.charge_work(nodes[i], specs.back().op, specs.back().work);
  }
  const auto outputs = read_names(root[key::outputs], count);
  const auto grads = read_names(root[key::grads], count);
  for (const NodeSpec& n : specs) build_node(n, g);
  for (const auto& [name, id] : outputs) g.set_output(name, g.var(id));
  for (const auto& [name, id] : grads) g.set_grad(name, g.var(id));
}

template <class T>
std::vector<std::optional<xt::xarray<T>>> stored_values(const Json& json) {
  const JsonCursor nodes = check_header<T>(JsonCursor(json, ""));
  std::vector<std::optional<xt::xarray<T>>> values(nodes.array_size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (auto vc = nodes[i].find(key::value)) values[i] = value_of<T>(*vc);
  }
  return values;
}

#define XGRAD_INSTANTIATE_SERIALIZE(T)                                                        \
  template Json graph_to_json(const Graph<T>&, ExportValues, std::optional<Json>);           \
  template void graph_from_json(const Json&, const OpFactory&, Graph<T>&, std::size_t, double); \
  template std::vector<std::optional<xt::xarray<T>>> stored_values(const Json&);
XGRAD_INSTANTIATE_SERIALIZE(float)
XGRAD_INSTANTIATE_SERIALIZE(double)
#undef XGRAD_INSTANTIATE_SERIALIZE

}  // namespace xgrad
