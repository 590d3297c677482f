#include <xgrad/graph/graph.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <new>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <xtensor/xoperation.hpp>

namespace xgrad {

const char* role_name(Role role) {
  switch (role) {
    case Role::input: return "input";
    case Role::parameter: return "parameter";
    case Role::constant: return "constant";
    case Role::forward: return "forward";
    case Role::backward: return "backward";
  }
  return "?";
}

std::optional<Role> role_from_name(const std::string& name) {
  for (Role r : {Role::input, Role::parameter, Role::constant, Role::forward, Role::backward}) {
    if (name == role_name(r)) return r;
  }
  return std::nullopt;
}

template <>
const char* dtype_name<float>() { return "float32"; }
template <>
const char* dtype_name<double>() { return "float64"; }

const char* leaf_op_name(Role role, LeafKind kind) {
  if (kind == LeafKind::indices) return index_leaf_op;
  if (kind == LeafKind::mask) return mask_leaf_op;
  return role == Role::parameter ? role_name(Role::parameter) : role == Role::input ? role_name(Role::input)
                                                                                     : role_name(Role::constant);
}

bool is_leaf_op_name(const std::string& op) {
  return op == index_leaf_op || op == mask_leaf_op || op == role_name(Role::input) || op == role_name(Role::parameter) ||
         op == role_name(Role::constant);
}

template <class T>
std::string Node<T>::op_name() const {
  if (op) return op->name();
  return leaf_op_name(role, leaf_kind());
}

template <class T>
Shape Node<T>::shape(std::size_t output) const {
  const auto& s = index_leaf ? indices.shape() : value(output).shape();
  return Shape(s.begin(), s.end());
}

template <class T>
bool Node<T>::in_backward() const {
  return role == Role::backward ||
         std::any_of(outputs.begin(), outputs.end(), [](const Output<T>& o) { return o.grad_of.has_value(); });
}

template <class T>
Graph<T>& Var<T>::graph() const {
  if (!m_graph) throw error("Var: empty handle (no graph); a VJP returns one for an unwanted input");
  return *m_graph;
}

template <class T>
const Node<T>& Var<T>::node() const {
  return graph().node(m_id);
}

namespace {

// The shape a released value is given: empty, no element (resize to it frees nothing and makes
// no temporary; the buffer was moved to the spares or was never there).
const std::array<std::size_t, 1> empty_shape{0};

}  // namespace

namespace {

template <class T>
std::string released_message(const Node<T>& n, std::size_t id) {
  return "node " + std::to_string(id) + " (" + n.op_name() +
         ") has no value: keep_only released it (keep it, or call keep_all() and replay())";
}

// Prefixes an op's complaint, about shapes or values, with "<op> (node N): ", or
// "<op> (node N, scope S): " for a node made in a named scope.
template <class F>
auto with_node_context(const Op& op, std::size_t id, const std::string& scope, F&& f) {
  return with_context(
      [&] { return op.name() + " (node " + std::to_string(id) + (scope.empty() ? "" : ", scope " + scope) + "): "; },
      std::forward<F>(f));
}

// "node 5", "node 5 ('w')", "node 5 ('w', scope enc.l1)", "node 5 (scope enc.l1)".
template <class T>
std::string node_str(const Node<T>& n, std::size_t id) {
  std::string what = n.name.empty() ? "" : "'" + n.name + "'";
  if (!n.scope.empty()) what += (what.empty() ? "scope " : ", scope ") + n.scope;
  return "node " + std::to_string(id) + (what.empty() ? "" : " (" + what + ")");
}

}  // namespace

template <class T>
const xt::xarray<T>& Var<T>::value() const {
  const Node<T>& n = node();
  if (n.index_leaf) {
    throw error(node_str(n, m_id) + " is an index leaf: its int64 values are indices(), it has no " +
                dtype_name<T>() + " value");
  }
  if (n.mask_leaf) {
    throw error(node_str(n, m_id) + " is a mask leaf: its booleans are mask(), it has no " + dtype_name<T>() +
                " value");
  }
  if (n.released) throw error(released_message(n, m_id));
  return n.value(m_output);
}

template <class T>
const xt::xarray<std::int64_t>& Var<T>::indices() const {
  const Node<T>& n = node();
  if (!n.index_leaf) throw error(node_str(n, m_id) + " (" + n.op_name() + ") holds no indices: only Graph::indices leaves do");
  return n.indices;
}

template <class T>
xt::xarray<bool> Var<T>::mask() const {
  const Node<T>& n = node();
  if (!n.mask_leaf) throw error(node_str(n, m_id) + " (" + n.op_name() + ") holds no mask: only Graph::mask leaves do");
  return xt::not_equal(n.value(), T(0));
}

template <class T>
Shape Var<T>::shape() const {
  const Node<T>& n = node();
  if (!n.index_leaf && n.released) throw error(released_message(n, m_id));
  return n.shape(m_output);
}

template <class T>
Var<T> Graph<T>::add_leaf(Role role, std::string name, xt::xarray<T> value) {
  Node<T>& n = m_nodes.emplace_back();
  n.role = role;
  n.name = std::move(name);
  n.scope = m_scope;
  n.outputs.emplace_back().value = std::move(value);
  return Var<T>(*this, m_nodes.size() - 1);
}

template <class T>
Var<T> Graph<T>::input(std::string name, xt::xarray<T> value) {
  return add_leaf(Role::input, std::move(name), std::move(value));
}

template <class T>
xt::xarray<T> matrix(std::initializer_list<std::initializer_list<T>> rows) {
  const std::size_t cols = rows.size() ? rows.begin()->size() : 0;
  xt::xarray<T> value = xt::xarray<T>::from_shape({rows.size(), cols});
  T* out = value.data();
  for (const auto& row : rows) {
    if (row.size() != cols) {
      throw error("matrix: rows of different lengths (" + std::to_string(cols) + " and " +
                  std::to_string(row.size()) + ")");
    }
    out = std::copy(row.begin(), row.end(), out);
  }
  return value;
}

template <class T>
Var<T> Graph<T>::input(std::string name, std::initializer_list<std::initializer_list<T>> rows) {
  return input(std::move(name), matrix(rows));
}

template <class T>
std::vector<Var<T>> Graph<T>::parameters() {
  std::vector<Var<T>> params;
  for (std::size_t i = 0; i < m_nodes.size(); ++i) {
    if (m_nodes[i].is_leaf() && m_nodes[i].role == Role::parameter) params.emplace_back(*this, i);
  }
  return params;
}

template <class T>
Var<T> Graph<T>::parameter(std::string name, xt::xarray<T> value) {
  return add_leaf(Role::parameter, std::move(name), std::move(value));
}

template <class T>
Var<T> Graph<T>::constant(std::string name, xt::xarray<T> value) {
  return add_leaf(Role::constant, std::move(name), std::move(value));
}

template <class T>
Var<T> Graph<T>::indices(std::string name, xt::xarray<std::int64_t> value) {
  Var<T> v = add_leaf(Role::input, std::move(name), xt::xarray<T>::from_shape({0}));
  Node<T>& n = m_nodes.back();
  n.index_leaf = true;
  n.indices = std::move(value);
  return v;
}

template <class T>
Var<T> Graph<T>::mask(std::string name, xt::xarray<bool> value) {
  Var<T> v = add_leaf(Role::input, std::move(name), xt::cast<T>(value));
  m_nodes.back().mask_leaf = true;
  return v;
}

template <class T>
const Node<T>& Graph<T>::node(std::size_t id) const {
  if (id >= m_nodes.size()) {
    throw error("graph: no node " + std::to_string(id) + " (the graph has " +
                std::to_string(m_nodes.size()) + " nodes)");
  }
  return m_nodes[id];
}

template <class T>
Var<T> Graph<T>::var(std::size_t id, std::size_t output) {
  const Node<T>& n = node(id);
  if (output >= n.output_count()) {
    throw error("graph: node " + std::to_string(id) + " (" + n.op_name() + ") has no output " + std::to_string(output) +
                " (it has " + std::to_string(n.output_count()) + ")");
  }
  return Var<T>(*this, id, output);
}

template <class T>
void Graph<T>::check_var(const Var<T>& v, const char* what) const {
  if (!v.valid()) throw error(std::string(what) + " is an empty Var");
  if (&v.graph() != this) {
    throw error(std::string(what) + " (node " + std::to_string(v.id()) +
                ") belongs to another graph; ops combine Vars of one graph only");
  }
  if (v.output() >= node(v.id()).output_count()) {
    throw error(std::string(what) + " names output " + std::to_string(v.output()) + " of node " +
                std::to_string(v.id()) + ", which has " + std::to_string(node(v.id()).output_count()));
  }
}

template <class T>
void Graph<T>::set_output(std::string name, const Var<T>& v) {
  check_var(v, ("set_output: '" + name + "'").c_str());
  m_outputs[std::move(name)] = v.slot();
  m_lean_plan.kept.clear();  // the kept nodes may change: the next lean replay plans again
}

template <class T>
void Graph<T>::set_grad(std::string name, const Var<T>& v) {
  check_var(v, ("set_grad: '" + name + "'").c_str());
  m_grads[std::move(name)] = v.slot();
  m_lean_plan.kept.clear();
}

namespace {

// The buffers of destroyed graphs' large values, per thread (release_cached_buffers).
template <class T>
class ValueCache {
 public:
  // glibc's malloc gives an allocation of 128 KiB or more pages of its own (mmap), and takes
  // them back when it is freed: the next one faults in new pages. Below, its heap reuses memory.
  static constexpr std::size_t min_bytes = std::size_t(128) << 10;
  static constexpr std::size_t max_bytes = std::size_t(256) << 20;
  void give(xt::xarray<T>&& buffer) {
    const std::size_t bytes = buffer.size() * sizeof(T);
    if (bytes < min_bytes || m_bytes + bytes > max_bytes) return;
    m_bytes += bytes;
    m_by_size[buffer.size()].push_back(std::move(buffer));
  }
  // Moves a buffer of `size` elements into `value`, if the cache holds one (no array is made
  // otherwise: even an empty xarray allocates).
  bool take(std::size_t size, xt::xarray<T>& value) {
    if (size * sizeof(T) < min_bytes) return false;
    const auto spare = m_by_size.find(size);
    if (spare == m_by_size.end() || spare->second.empty()) return false;
    value = std::move(spare->second.back());
    spare->second.pop_back();
    m_bytes -= size * sizeof(T);
    return true;
  }
  void clear() {
    m_by_size.clear();
    m_bytes = 0;
  }
  std::size_t bytes() const { return m_bytes; }

 private:
  std::unordered_map<std::size_t, std::vector<xt::xarray<T>>> m_by_size;
  std::size_t m_bytes = 0;
};

// This thread's cache; nullptr once the thread's end destroyed it (a static Graph's destructor
// may run after that).
template <class T>
ValueCache<T>* value_cache() {
  thread_local bool gone = false;  // trivially destructible: still readable then
  struct Holder {
    ValueCache<T> cache;
    bool* gone;
    ~Holder() { *gone = true; }
  };
  if (gone) return nullptr;
  thread_local Holder holder{{}, &gone};
  return &holder.cache;
}

}  // namespace

void release_cached_buffers() {
  if (ValueCache<float>* cache = value_cache<float>()) cache->clear();
  if (ValueCache<double>* cache = value_cache<double>()) cache->clear();
}

template <class T>
Graph<T>::~Graph() {
  ValueCache<T>* cache = value_cache<T>();
  if (!cache) return;
  // The values of ops only: a leaf's buffer came from its caller, and goes back to malloc (whose
  // mmap threshold then grows past its size, so that the caller's next copy reuses heap memory).
  for (Node<T>& n : m_nodes) {
    if (n.is_leaf()) continue;
    for (Output<T>& output : n.outputs) cache->give(std::move(output.value));
  }
}

template <class T>
Args<T> Graph<T>::args_of(const Node<T>& n) const {
  Args<T> args;
  fill_args(n, args);
  return args;
}

template <class T>
void Graph<T>::fill_args(const Node<T>& n, Args<T>& args) const {
  args.clear();
  args.indices.clear();
  args.views.clear();
  args.reserve(n.inputs.size());
  args.step = m_step;
  args.training = m_training;
  for (const Slot& in : n.inputs) {
    const Node<T>& x = m_nodes[in.node];
    if (x.index_leaf) {
      args.indices.resize(n.inputs.size(), nullptr);
      args.indices[args.size()] = &x.indices;
      args.push_back(nullptr);
    } else {
      args.push_back(&x.outputs[in.output].value);
    }
  }
}

namespace {

// value of this shape. xtensor sets the new shape before it allocates: after a failed
// allocation the value is left empty, not of the new shape over the old buffer, which a later
// run would take as the right size.
template <class T>
void resize_value(xt::xarray<T>& value, const Shape& shape) {
  try {
    value.resize(shape);
  } catch (...) {
    value = xt::xarray<T>::from_shape({0});
    throw;
  }
}

template <class T>
std::vector<Shape> shapes_of(const Args<T>& args) {
  std::vector<Shape> shapes;
  shapes.reserve(args.size());
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (const View* v = args.view(i)) {
      shapes.push_back(v->shape);
      continue;
    }
    const auto& s = args[i] ? args[i]->shape() : args.indices[i]->shape();
    shapes.emplace_back(s.begin(), s.end());
  }
  return shapes;
}

}  // namespace

template <class T>
std::vector<Shape> Graph<T>::output_shapes(std::size_t id, const Node<T>& n, const Args<T>& args) const {
  return with_node_context(*n.op, id, n.scope, [&] {
    std::vector<Shape> shapes = n.op->infer_shapes(shapes_of(args));
    if (shapes.size() != n.op->output_count()) {
      throw error("infer_shapes gave " + std::to_string(shapes.size()) + " shapes for " +
                  std::to_string(n.op->output_count()) + " outputs");
    }
    return shapes;
  });
}

template <class T>
void Graph<T>::run_node(std::size_t id, Node<T>& n, const Args<T>& args, const std::vector<Shape>& shapes) {
  n.outputs.resize(shapes.size());
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    if (!shapes_equal(shapes[k], n.outputs[k].value.shape())) resize_value(n.outputs[k].value, shapes[k]);
  }
  run_node(id, n, args);
}

template <class T>
void Graph<T>::run_node(std::size_t id, Node<T>& n, const Args<T>& args) {
  m_outs.clear();
  for (auto& output : n.outputs) m_outs.push_back(&output.value);
  if (!m_node_seconds) {
    with_node_context(*n.op, id, n.scope, [&] { n.op->forward(args, m_outs); });
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  with_node_context(*n.op, id, n.scope, [&] { n.op->forward(args, m_outs); });
  if (m_node_seconds->size() <= id) m_node_seconds->resize(id + 1, 0.0);
  (*m_node_seconds)[id] += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

template <class T>
std::vector<Var<T>> Graph<T>::apply_outputs(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x) {
  if (!op) throw error("graph: apply needs an op");
  const std::size_t id = m_nodes.size();
  with_node_context(*op, id, m_scope, [&] {
    if (x.size() != op->arity()) {
      throw error("takes " + std::to_string(op->arity()) + " inputs, got " + std::to_string(x.size()));
    }
    if (op->output_count() == 0) throw error("has no outputs: an op has at least one");
    for (std::size_t i = 0; i < x.size(); ++i) {
      check_var(x[i], ("input " + std::to_string(i)).c_str());
      const Node<T>& in = m_nodes[x[i].id()];
      if (in.released) throw error("input " + std::to_string(i) + ": " + released_message(in, x[i].id()));
      if (in.index_leaf && !op->accepts_indices(i)) {
        throw error("input " + std::to_string(i) + " (" + node_str(in, x[i].id()) + ") is an index leaf (int64); " +
                    op->name() + " takes " + dtype_name<T>() + " values there");
      }
    }
  });

  Node<T> n;
  n.op = std::move(op);
  n.role = m_backward_depth > 0 ? Role::backward : Role::forward;
  n.scope = m_scope;
  for (const auto& v : x) n.inputs.push_back(v.slot());
  const Args<T> args = args_of(n);
  const std::vector<Shape> shapes = output_shapes(id, n, args);
  if (m_work_budget) {
    std::vector<Shape> in;
    for (const auto& v : x) in.push_back(v.shape());
    const double work = n.op->work(in, shapes);
    if (!m_work_budget->add(work)) with_node_context(*n.op, id, n.scope, [&] { throw error(m_work_budget->refusal(n.op->name(), work)); });
  }
  // Large values in buffers an earlier graph of this thread left (release_cached_buffers).
  n.outputs.resize(shapes.size());
  ValueCache<T>* cache = value_cache<T>();
  if (cache) {
    for (std::size_t k = 0; k < shapes.size(); ++k) cache->take(shape_size(shapes[k]), n.outputs[k].value);
  }
  try {
    run_node(id, n, args, shapes);
  } catch (const std::bad_alloc&) {
    // The cache may hold the memory this node needs (under a limit of the address space): free
    // it and run the node once more.
    if (!cache || cache->bytes() == 0) throw;
    release_cached_buffers();
    run_node(id, n, args, shapes);
  }
  m_nodes.push_back(std::move(n));
  std::vector<Var<T>> outs;
  for (std::size_t k = 0; k < m_nodes.back().output_count(); ++k) outs.emplace_back(*this, id, k);
  return outs;
}

std::string scope_name_fault(const std::string& name) {
  if (name.empty()) return "a scope's name is empty";
  for (const char c : name) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f || c == '"') {
      return "a scope's name holds no control character or quote (\"): got " + std::to_string(name.size()) +
             " characters with one";
    }
  }
  return "";
}

template <class T>
typename Graph<T>::Scope Graph<T>::scope(const std::string& name) {
  const std::string fault = scope_name_fault(name);
  if (!fault.empty()) throw error("scope: " + fault);
  const std::size_t outer = m_scope.size();
  m_scope += (m_scope.empty() ? "" : ".") + name;
  return Scope(*this, outer);
}

template <class T>
Var<T> Graph<T>::apply(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x) {
  return apply_outputs(std::move(op), x).front();
}

namespace {

// What set_value of a leaf of this kind takes, for its messages.
template <class T>
std::string leaf_value_type(LeafKind kind) {
  switch (kind) {
    case LeafKind::indices: return "int64 indices (xt::xarray<std::int64_t>)";
    case LeafKind::mask: return "a bool mask (xt::xarray<bool>)";
    case LeafKind::values: break;
  }
  return std::string(dtype_name<T>()) + " values (xt::xarray<" + (std::is_same_v<T, float> ? "float" : "double") + ">)";
}

// "an input leaf", "a mask leaf", ...: a leaf as set_value's messages name it.
template <class T>
std::string leaf_words(const Node<T>& n) {
  switch (n.leaf_kind()) {
    case LeafKind::indices: return "an index leaf";
    case LeafKind::mask: return "a mask leaf";
    case LeafKind::values: break;
  }
  return n.role == Role::input ? "an input leaf" : n.role == Role::parameter ? "a parameter leaf" : "a constant leaf";
}

}  // namespace

template <class T>
Node<T>& Graph<T>::checked_leaf(const Var<T>& leaf, LeafKind kind) {
  check_var(leaf, "set_value: the Var");
  Node<T>& n = m_nodes[leaf.id()];
  if (!n.is_leaf()) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " is a " + n.op_name() +
                " node; only leaves (inputs, parameters, constants, indices, masks) take values");
  }
  if (n.leaf_kind() != kind) {
    throw error("set_value: " + node_str(n, leaf.id()) + " is " + leaf_words(n) + ": its new value is " +
                leaf_value_type<T>(n.leaf_kind()) + ", not " + leaf_value_type<T>(kind));
  }
  return n;
}

template <class T>
void Graph<T>::set_value(const Var<T>& leaf, xt::xarray<T> value) {
  Node<T>& n = checked_leaf(leaf, LeafKind::values);
  if (!shapes_equal(value.shape(), n.value().shape())) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " ('" + n.name + "') is " +
                shape_str(n.value().shape()) + ", the new value is " + shape_str(value.shape()));
  }
  n.outputs[0].value = std::move(value);
}

template <class T>
void Graph<T>::set_indices(const Var<T>& leaf, xt::xarray<std::int64_t> value) {
  Node<T>& n = checked_leaf(leaf, LeafKind::indices);
  if (!shapes_equal(value.shape(), n.indices.shape())) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " ('" + n.name + "') is " +
                shape_str(n.indices.shape()) + ", the new value is " + shape_str(value.shape()));
  }
  n.indices = std::move(value);
}

template <class T>
void Graph<T>::set_mask(const Var<T>& leaf, const xt::xarray<bool>& value) {
  Node<T>& n = checked_leaf(leaf, LeafKind::mask);
  if (!shapes_equal(value.shape(), n.value().shape())) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " ('" + n.name + "') is a mask of shape " +
                shape_str(n.value().shape()) + ", the new mask is " + shape_str(value.shape()));
  }
  std::copy(value.begin(), value.end(), n.outputs[0].value.begin());  // bool -> 1, 0
}

template <class T>
void Graph<T>::replay() {
  if (m_lean) {
    replay_lean();
    return;
  }
  Args<T> args;  // refilled for each node, its capacity kept
  for (std::size_t id = 0; id < m_nodes.size(); ++id) {
    Node<T>& n = m_nodes[id];
    if (n.is_leaf()) continue;
    fill_args(n, args);
    // A node's output shapes follow from its inputs' shapes, and no leaf's shape ever changes
    // (set_value keeps it): they are those of its values, but for a node a lean replay released.
    if (n.released) {
      run_node(id, n, args, output_shapes(id, n, args));
    } else {
      run_node(id, n, args);
    }
    n.released = false;
  }
}

template <class T>
void Graph<T>::keep_only(const std::vector<Var<T>>& keep) {
  for (const auto& v : keep) check_var(v, "keep_only: a Var to keep");
  m_keep.clear();
  for (const auto& v : keep) m_keep.push_back(v.id());
  m_lean = true;
  m_spare.clear();
  m_lean_plan = {};
  const std::vector<char> kept = kept_nodes();
  for (std::size_t id = 0; id < m_nodes.size(); ++id) {
    Node<T>& n = m_nodes[id];
    if (kept[id] || n.released) continue;
    for (auto& out : n.outputs) out.value = xt::xarray<T>::from_shape({0});
    n.released = true;
  }
}

template <class T>
std::vector<char> Graph<T>::kept_nodes() const {
  std::vector<char> kept(m_nodes.size(), 0);
  for (std::size_t id = 0; id < m_nodes.size(); ++id) kept[id] = m_nodes[id].is_leaf();
  for (auto id : m_keep) kept[id] = 1;
  for (const auto* names : {&m_outputs, &m_grads}) {
    for (const auto& [name, slot] : *names) kept[slot.node] = 1;
  }
  return kept;
}

template <class T>
void Graph<T>::keep_all() {
  m_lean = false;
  m_keep.clear();
  m_spare.clear();
}

template <class T>
void Graph<T>::require_values(const std::string& who, std::size_t count) const {
  for (std::size_t id = 0; id < std::min(count, m_nodes.size()); ++id) {
    if (m_nodes[id].released) throw error(who + ": " + released_message(m_nodes[id], id));
  }
}

template <class T>
std::size_t Graph<T>::held_elements() const {
  std::size_t count = 0;
  for (const auto& n : m_nodes) {
    count += n.indices.size();
    for (const auto& out : n.outputs) count += out.value.size();
  }
  return count + m_spare.elements();
}

template <class T>
void Graph<T>::release(Node<T>& n) {
  if (n.released) return;
  for (auto& out : n.outputs) {
    if (out.value.size() > 0) m_spare.give(std::move(out.value));  // not the husk of a value moved on
    out.value.resize(empty_shape);
  }
  n.released = true;
}

template <class T>
void Graph<T>::plan_lean(const std::vector<char>& kept) {
  const std::size_t count = m_nodes.size();
  if (m_lean_plan.count == count && m_lean_plan.kept == kept) return;
  LeanReplayPlan p;
  p.count = count;
  p.kept = kept;
  p.view.resize(count);
  std::vector<Slot> base(count);  // the output a view reads, for each node left out as one
  detail::LeanPlan plan = detail::plan_lean_replay(
      count, [&](std::size_t id) -> const std::vector<Slot>& { return m_nodes[id].inputs; }, kept);
  // Every node's output shapes (leaves', then inferred in order: values may be released).
  std::vector<std::vector<Shape>> shapes(count);
  for (std::size_t id = 0; id < count; ++id) {
    const Node<T>& n = m_nodes[id];
    if (n.is_leaf()) {
      shapes[id] = {n.shape()};
      continue;
    }
    std::vector<Shape> in;
    for (const Slot& s : n.inputs) in.push_back(shapes[s.node][s.output]);
    shapes[id] = n.op->infer_shapes(in);
  }
  // The needed readers of each node, (reader, input position), grouped by node.
  std::vector<std::size_t> first(count + 1, 0);
  for (std::size_t id = 0; id < count; ++id) {
    if (plan.needed[id] && !m_nodes[id].is_leaf()) {
      for (const Slot& s : m_nodes[id].inputs) ++first[s.node + 1];
    }
  }
  for (std::size_t id = 0; id < count; ++id) first[id + 1] += first[id];
  std::vector<std::pair<std::size_t, std::size_t>> readers(first[count]);
  std::vector<std::size_t> fill(first.begin(), first.end() - 1);
  for (std::size_t id = 0; id < count; ++id) {
    if (!plan.needed[id] || m_nodes[id].is_leaf()) continue;
    for (std::size_t j = 0; j < m_nodes[id].inputs.size(); ++j) readers[fill[m_nodes[id].inputs[j].node]++] = {id, j};
  }
  // A node may be left out: computed, not kept, one input (of values) and one output.
  const auto candidate = [&](std::size_t id) {
    const Node<T>& n = m_nodes[id];
    return plan.needed[id] && !kept[id] && !n.is_leaf() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
           !m_nodes[n.inputs[0].node].has_no_gradient();
  };
  // True if node id, seen as view v, is read by each of its readers as a view, or by a node
  // that may be left out in turn with its own view of v. Each node's answer is kept for the
  // view it was asked with, so that readers met along several paths are asked once per view.
  std::vector<std::optional<std::pair<View, bool>>> asked(count);
  const auto same = [](const View& a, const View& b) {
    return a.offset == b.offset && a.shape == b.shape && a.strides == b.strides;
  };
  std::function<bool(std::size_t, const View&)> readable = [&](std::size_t id, const View& v) {
    if (asked[id] && same(asked[id]->first, v)) return asked[id]->second;
    bool ok = first[id] < first[id + 1];
    for (std::size_t r = first[id]; ok && r < first[id + 1]; ++r) {
      const auto [reader, j] = readers[r];
      const Node<T>& rn = m_nodes[reader];
      if (rn.op->reads_view(j, v)) continue;
      const std::optional<View> w = candidate(reader) ? rn.op->view_of(v, shapes[reader][0]) : std::nullopt;
      ok = w && readable(reader, *w);
    }
    asked[id] = std::make_pair(v, ok);
    return ok;
  };
  for (std::size_t id = 0; id < count; ++id) {
    if (!candidate(id)) continue;
    const Slot in = m_nodes[id].inputs[0];
    const bool in_view = p.view[in.node].has_value();
    const std::optional<View> v =
        m_nodes[id].op->view_of(in_view ? *p.view[in.node] : View::contiguous(shapes[in.node][in.output]), shapes[id][0]);
    if (!v || !readable(id, *v)) continue;
    p.view[id] = v;
    base[id] = in_view ? base[in.node] : in;
    ++p.viewed;
  }
  // A value read as a view stays until the view's last reader has run.
  for (std::size_t id = count; id-- > 0;) {
    if (p.view[id]) {
      std::size_t& in = plan.last_read[m_nodes[id].inputs[0].node];
      in = std::max(in, plan.last_read[id]);
    }
  }
  // The steps, in order.
  for (std::size_t id = 0; id < count; ++id) {
    Node<T>& n = m_nodes[id];
    if (n.is_leaf()) continue;
    if (!plan.needed[id] || p.view[id]) {
      p.released.push_back(id);
      continue;
    }
    LeanStep s{id, p.args.size(), p.sizes.size(), p.drops.size(), no_input, kept[id] != 0, false, false};
    const std::vector<Shape>& out = shapes[id];
    // An op with one output, not kept, writes over an input of as many elements read for the
    // last time here if it may (its elements kept, its shape made the output's). Not an output
    // of a node another output of which it also reads: taking it releases that node, the other
    // output's buffer with it (gelu_vjp(mean, y) of a layer_norm read freed memory so), nor a
    // view (its own value is empty).
    for (std::size_t j = 0; j < n.inputs.size() && s.over == no_input && !s.kept && out.size() == 1; ++j) {
      const Slot in = n.inputs[j];
      const bool reads_another_output = std::any_of(n.inputs.begin(), n.inputs.end(), [&](const Slot& x) {
        return x.node == in.node && x.output != in.output;
      });
      if (!kept[in.node] && plan.last_read[in.node] == id && !m_nodes[in.node].is_leaf() && !p.view[in.node] &&
          n.op->overwrites_input(j) && !reads_another_output &&
          shape_size(shapes[in.node][in.output]) == shape_size(out[0])) {
        s.over = j;
      }
    }
    for (std::size_t j = 0; j < n.inputs.size(); ++j) {
      const Slot in = n.inputs[j];
      const Node<T>& x = m_nodes[in.node];
      const View* view = p.view[in.node] ? &*p.view[in.node] : nullptr;
      const Slot from = view ? base[in.node] : in;
      const xt::xarray<T>* value = &m_nodes[from.node].outputs[from.output].value;
      if (s.over != no_input && in == n.inputs[s.over]) value = &n.outputs[0].value;
      p.args.push_back(x.index_leaf ? nullptr : value);
      p.indices.push_back(x.index_leaf ? &x.indices : nullptr);
      p.views.push_back(view);
      s.indices = s.indices || x.index_leaf;
      s.views = s.views || view;
      if (!kept[from.node] && plan.last_read[from.node] == id) p.drops.push_back(from.node);
    }
    for (const Shape& shape : out) {
      p.sizes.push_back(shape_size(shape));
      p.dim.push_back(p.dims.size());
      p.dims.insert(p.dims.end(), shape.begin(), shape.end());
    }
    p.steps.push_back(s);
  }
  p.dim.push_back(p.dims.size());
  p.steps.push_back(LeanStep{count, p.args.size(), p.sizes.size(), p.drops.size(), no_input, false, false, false});
  m_lean_plan = std::move(p);
}

template <class T>
void Graph<T>::replay_lean() {
  const std::size_t count = m_nodes.size();
  // The plan is kept while the nodes and what is kept stay (keep_only, set_output and set_grad
  // clear it).
  if (m_lean_plan.count != count || m_lean_plan.kept.size() != count) plan_lean(kept_nodes());
  const LeanReplayPlan& p = m_lean_plan;
  for (std::size_t id : p.released) release(m_nodes[id]);
  m_viewed = p.viewed;
  Args<T> args;  // refilled for each node, its capacity kept
  args.step = m_step;
  args.training = m_training;
  for (std::size_t k = 0; k + 1 < p.steps.size(); ++k) {
    const LeanStep& s = p.steps[k];
    const LeanStep& next = p.steps[k + 1];
    Node<T>& n = m_nodes[s.id];
    args.assign(p.args.begin() + s.arg, p.args.begin() + next.arg);
    if (s.indices) args.indices.assign(p.indices.begin() + s.arg, p.indices.begin() + next.arg);
    else args.indices.clear();
    if (s.views) args.views.assign(p.views.begin() + s.arg, p.views.begin() + next.arg);
    else args.views.clear();
    // Each output's buffer: the input's it writes over, else a spare buffer of as many
    // elements, else a new one; then its shape.
    if (s.over != no_input) {
      Node<T>& x = m_nodes[n.inputs[s.over].node];
      xt::xarray<T>& from = x.outputs[n.inputs[s.over].output].value;
      n.outputs[0].value = std::move(from);
      from.resize(empty_shape);
      release(x);
    }
    for (std::size_t o = s.output; o < next.output; ++o) {
      xt::xarray<T>& value = n.outputs[o - s.output].value;
      if (!s.kept && s.over == no_input && p.sizes[o] > 0) m_spare.take(p.sizes[o], value);
      const auto begin = p.dims.begin() + static_cast<long>(p.dim[o]);
      const auto end = p.dims.begin() + static_cast<long>(p.dim[o + 1]);
      if (!std::equal(begin, end, value.shape().begin(), value.shape().end())) resize_value(value, Shape(begin, end));
    }
    n.released = true;  // until its forward has run: if that throws, no stale value shows
    run_node(s.id, n, args);
    n.released = false;
    for (std::size_t d = s.drop; d < next.drop; ++d) release(m_nodes[p.drops[d]]);
  }
}

template <class T>
void Graph<T>::set_grad_of(Slot at, Slot of) {
  node(at.node);  // throws naming a missing node
  Node<T>& n = m_nodes[at.node];
  if (n.role == Role::forward) {
    throw error("set_grad_of: node " + std::to_string(at.node) + " is a forward node, not a gradient");
  }
  if (of.node >= at.node) {
    throw error("set_grad_of: node " + std::to_string(at.node) + " cannot hold the gradient of node " +
                std::to_string(of.node) + ", which is not before it");
  }
  if (at.output >= n.output_count() || of.output >= m_nodes[of.node].output_count()) {
    throw error("set_grad_of: node " + std::to_string(at.node) + " output " + std::to_string(at.output) +
                " and node " + std::to_string(of.node) + " output " + std::to_string(of.output) +
                ": one of them does not exist");
  }
  n.outputs[at.output].grad_of = of;
}

template xt::xarray<float> matrix(std::initializer_list<std::initializer_list<float>>);
template xt::xarray<double> matrix(std::initializer_list<std::initializer_list<double>>);
template struct Node<float>;
template struct Node<double>;
template class Var<float>;
template class Var<double>;
template class Graph<float>;
template class Graph<double>;

}  // namespace xgrad
