#include <xgrad/graph/serialize.hpp>

#include <cmath>
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

template <class T>
xt::xarray<T> decode_value(const JsonCursor& c) {
  c.check_object({key::shape, key::data});
  const Shape shape = c[key::shape].shape();
  const JsonCursor data = c[key::data];
  std::size_t count = 1;
  for (auto d : shape) count *= d;
  if (data.array_size() != count) {
    data.fail("holds " + std::to_string(data.array_size()) + " numbers, but shape " + shape_str(shape) +
              " needs " + std::to_string(count));
  }
  xt::xarray<T> v = xt::xarray<T>::from_shape(shape);
  const Json& raw = data.json();
  for (std::size_t i = 0; i < count; ++i) {
    const Json& e = raw[i];
    // The common case without building a cursor; anything else goes through one for its message.
    const double x = e.is_number() ? e.get<double>() : data[i].number();
    if (std::isfinite(x) && std::abs(x) > static_cast<double>(std::numeric_limits<T>::max())) {
      data[i].fail("out of the range of " + std::string(dtype_name<T>()));
    }
    v.data()[i] = static_cast<T>(x);
  }
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

// The elements an import may still allocate: each node is charged before it is allocated (with
// the values its op computes without holding them, Op::work_shape), so that a small file cannot
// make the importer allocate or compute without bound.
struct Budget {
  std::size_t limit, used = 0;

  void charge(const JsonCursor& c, const Shape& shape) {
    const auto count = bounded_size(shape, limit);
    if (!count || *count > limit - used) {
      c.fail("the graph holds more than " + std::to_string(limit) + " elements in all, the most this import takes");
    }
    used += *count;
  }
};

template <class T>
void import_node(const JsonCursor& c, std::size_t i, const OpFactory& make_op, Graph<T>& g, Budget& budget) {
  c.check_object({key::id, key::op, key::name, key::role, key::inputs, key::attrs, key::shape},
                 {key::grad_of, key::value});
  const std::size_t id = c[key::id].index();
  if (id != i) {
    c[key::id].fail(id < i ? "duplicate id " + std::to_string(id) + " (nodes[" + std::to_string(id) + "] has it)"
                           : "id " + std::to_string(id) + " out of order: ids are the positions 0, 1, 2, ..."
                             " (expected " + std::to_string(i) + ")");
  }
  const std::string op = c[key::op].string();
  const std::string name = c[key::name].string();
  const JsonCursor role_c = c[key::role];
  const std::optional<Role> role = role_from_name(role_c.string());
  if (!role) role_c.fail("unknown role \"" + role_c.string() + "\"");
  const JsonCursor inputs_c = c[key::inputs];
  std::vector<Var<T>> inputs;
  for (std::size_t j = 0, m = inputs_c.array_size(); j < m; ++j) {
    inputs.push_back(g.var(earlier_node(inputs_c[j], i)));
  }
  const JsonCursor attrs = c[key::attrs];
  attrs.expect_object();  // the op's factory checks the keys
  const Shape shape = c[key::shape].shape();
  std::optional<std::size_t> grad_of;
  if (auto gc = c.find(key::grad_of)) grad_of = earlier_node(*gc, i);
  std::optional<xt::xarray<T>> value;
  if (auto vc = c.find(key::value)) {
    value = decode_value<T>(*vc);
    if (!shapes_equal(value->shape(), shape)) {
      (*vc)[key::shape].fail("is " + shape_str(value->shape()) + ", the node's shape is " + shape_str(shape));
    }
  }
  if (is_leaf_op(op)) {
    if (role_name(*role) != op) role_c.fail("a leaf \"" + op + "\" has role \"" + op + "\"");
    if (!inputs.empty()) inputs_c.fail("a leaf has no inputs");
    if (!attrs.json().empty()) attrs.fail("a leaf has no attributes");
    budget.charge(c, shape);
    xt::xarray<T> v = value ? std::move(*value) : xt::xarray<T>(xt::zeros<T>(shape));
    if (*role == Role::input) g.input(name, std::move(v));
    else if (*role == Role::parameter) g.parameter(name, std::move(v));
    else g.constant(name, std::move(v));
    if (grad_of) g.set_grad_of(i, *grad_of);
    return;
  }
  if (*role != Role::forward && *role != Role::backward) {
    role_c.fail("op \"" + op + "\" is not a leaf: its role is \"forward\" or \"backward\"");
  }
  if (*role == Role::forward && grad_of) c[key::grad_of].fail("a forward node is no gradient");
  const std::shared_ptr<const Op> made = make_op(op, attrs);
  if (!made) c[key::op].fail("unknown op \"" + op + "\"");
  if (inputs.size() != made->arity()) {
    inputs_c.fail(op + " takes " + std::to_string(made->arity()) + " inputs, got " + std::to_string(inputs.size()));
  }
  std::vector<Shape> in_shapes;
  for (const auto& v : inputs) in_shapes.emplace_back(v.value().shape().begin(), v.value().shape().end());
  Shape computed;
  try {
    computed = made->infer_shape(in_shapes);
  } catch (const error& e) {
    c.fail(op + ": " + e.what());
  }
  if (computed != shape) {
    c[key::shape].fail("declared " + shape_str(shape) + ", but " + op + " of its inputs gives " + shape_str(computed));
  }
  budget.charge(c, shape);
  if (const std::optional<Shape> work = made->work_shape(in_shapes)) budget.charge(c, *work);
  std::optional<typename Graph<T>::BackwardScope> scope;
  if (*role == Role::backward) scope.emplace(g);
  g.apply(made, inputs);
  if (grad_of) g.set_grad_of(i, *grad_of);
}

template <class T>
void import_names(const JsonCursor& c, Graph<T>& g, bool outputs) {
  c.expect_object();
  for (const auto& item : c.json().items()) {
    const std::size_t id = JsonCursor(item.value(), c.path() + "." + item.key()).index();
    if (id >= g.size()) {
      JsonCursor(item.value(), c.path() + "." + item.key())
          .fail("refers to node " + std::to_string(id) + " of a graph of " + std::to_string(g.size()));
    }
    if (outputs) g.set_output(item.key(), g.var(id));
    else g.set_grad(item.key(), g.var(id));
  }
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
void graph_from_json(const Json& json, const OpFactory& make_op, Graph<T>& g, std::size_t max_elements) {
  if (g.size() != 0) throw error("graph_from_json: the graph to fill already has nodes");
  const JsonCursor root(json, "");
  const JsonCursor nodes = check_header<T>(root);
  Budget budget{max_elements};
  for (std::size_t i = 0, n = nodes.array_size(); i < n; ++i) import_node(nodes[i], i, make_op, g, budget);
  import_names(root[key::outputs], g, true);
  import_names(root[key::grads], g, false);
}

template <class T>
std::vector<std::optional<xt::xarray<T>>> stored_values(const Json& json) {
  const JsonCursor nodes = check_header<T>(JsonCursor(json, ""));
  std::vector<std::optional<xt::xarray<T>>> values(nodes.array_size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (auto vc = nodes[i].find(key::value)) values[i] = decode_value<T>(*vc);
  }
  return values;
}

#define XGRAD_INSTANTIATE_SERIALIZE(T)                                                        \
  template Json graph_to_json(const Graph<T>&, ExportValues, std::optional<Json>);           \
  template void graph_from_json(const Json&, const OpFactory&, Graph<T>&, std::size_t);      \
  template std::vector<std::optional<xt::xarray<T>>> stored_values(const Json&);
XGRAD_INSTANTIATE_SERIALIZE(float)
XGRAD_INSTANTIATE_SERIALIZE(double)
#undef XGRAD_INSTANTIATE_SERIALIZE

}  // namespace xgrad
