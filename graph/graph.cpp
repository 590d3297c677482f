#include <xgrad/graph/graph.hpp>

#include <algorithm>
#include <utility>

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

template <class T>
std::string Node<T>::op_name() const {
  if (op) return op->name();
  return role == Role::parameter ? "parameter" : role == Role::input ? "input" : "constant";
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

template <class T>
std::string released_message(const Node<T>& n, std::size_t id) {
  return "node " + std::to_string(id) + " (" + n.op_name() +
         ") has no value: keep_only released it (keep it, or call keep_all() and replay())";
}

}  // namespace

template <class T>
const xt::xarray<T>& Var<T>::value() const {
  const Node<T>& n = node();
  if (n.released) throw error(released_message(n, m_id));
  return n.value;
}

template <class T>
Var<T> Graph<T>::add_leaf(Role role, std::string name, xt::xarray<T> value) {
  Node<T>& n = m_nodes.emplace_back();
  n.role = role;
  n.name = std::move(name);
  n.value = std::move(value);
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
Var<T> Graph<T>::parameter(std::string name, xt::xarray<T> value) {
  return add_leaf(Role::parameter, std::move(name), std::move(value));
}

template <class T>
Var<T> Graph<T>::constant(std::string name, xt::xarray<T> value) {
  return add_leaf(Role::constant, std::move(name), std::move(value));
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
Var<T> Graph<T>::var(std::size_t id) {
  node(id);
  return Var<T>(*this, id);
}

template <class T>
void Graph<T>::check_var(const Var<T>& v, const char* what) const {
  if (!v.valid()) throw error(std::string(what) + " is an empty Var");
  if (&v.graph() != this) {
    throw error(std::string(what) + " (node " + std::to_string(v.id()) +
                ") belongs to another graph; ops combine Vars of one graph only");
  }
  node(v.id());
}

template <class T>
void Graph<T>::set_output(std::string name, const Var<T>& v) {
  check_var(v, ("set_output: '" + name + "'").c_str());
  m_outputs[std::move(name)] = v.id();
}

template <class T>
void Graph<T>::set_grad(std::string name, const Var<T>& v) {
  check_var(v, ("set_grad: '" + name + "'").c_str());
  m_grads[std::move(name)] = v.id();
}

template <class T>
Args<T> Graph<T>::args_of(const Node<T>& n) const {
  Args<T> args;
  args.reserve(n.inputs.size());
  for (auto id : n.inputs) args.push_back(&m_nodes[id].value);
  return args;
}

namespace {

template <class T>
std::vector<Shape> shapes_of(const Args<T>& args) {
  std::vector<Shape> shapes;
  shapes.reserve(args.size());
  for (const auto* a : args) shapes.emplace_back(a->shape().begin(), a->shape().end());
  return shapes;
}

// Prefixes an op's shape complaint with "<op> (node N): ".
template <class F>
auto with_node_context(const Op& op, std::size_t id, F&& f) {
  try {
    return f();
  } catch (const error& e) {
    throw error(op.name() + " (node " + std::to_string(id) + "): " + e.what());
  }
}

}  // namespace

template <class T>
Var<T> Graph<T>::apply(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x) {
  if (!op) throw error("graph: apply needs an op");
  const std::size_t id = m_nodes.size();
  const auto check_inputs = [&] {
    if (x.size() != op->arity()) {
      throw error("takes " + std::to_string(op->arity()) + " inputs, got " + std::to_string(x.size()));
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
      check_var(x[i], ("input " + std::to_string(i)).c_str());
      const Node<T>& in = m_nodes[x[i].id()];
      if (in.released) throw error("input " + std::to_string(i) + ": " + released_message(in, x[i].id()));
    }
  };
  with_node_context(*op, id, check_inputs);

  Node<T> n;
  n.op = std::move(op);
  n.role = m_backward_depth > 0 ? Role::backward : Role::forward;
  for (const auto& v : x) n.inputs.push_back(v.id());
  const Args<T> args = args_of(n);
  const Shape shape = with_node_context(*n.op, id, [&] { return n.op->infer_shape(shapes_of(args)); });
  n.value.resize(shape);
  n.op->forward(args, n.value);
  m_nodes.push_back(std::move(n));
  return Var<T>(*this, id);
}

template <class T>
void Graph<T>::set_value(const Var<T>& leaf, xt::xarray<T> value) {
  check_var(leaf, "set_value: the Var");
  Node<T>& n = m_nodes[leaf.id()];
  if (!n.is_leaf()) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " is a " + n.op_name() +
                " node; only leaves (inputs, parameters, constants) take values");
  }
  if (!shapes_equal(value.shape(), n.value.shape())) {
    throw error("set_value: node " + std::to_string(leaf.id()) + " ('" + n.name + "') is " +
                shape_str(n.value.shape()) + ", the new value is " + shape_str(value.shape()));
  }
  n.value = std::move(value);
}

template <class T>
void Graph<T>::replay() {
  if (m_lean) {
    replay_lean();
    return;
  }
  for (std::size_t id = 0; id < m_nodes.size(); ++id) {
    Node<T>& n = m_nodes[id];
    if (n.is_leaf()) continue;
    const Args<T> args = args_of(n);
    const Shape shape = with_node_context(*n.op, id, [&] { return n.op->infer_shape(shapes_of(args)); });
    if (!shapes_equal(shape, n.value.shape())) n.value.resize(shape);
    n.op->forward(args, n.value);
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
  const std::vector<char> kept = kept_nodes();
  for (std::size_t id = 0; id < m_nodes.size(); ++id) {
    Node<T>& n = m_nodes[id];
    if (kept[id] || n.released) continue;
    n.value = xt::xarray<T>::from_shape({0});
    n.released = true;
  }
}

template <class T>
std::vector<char> Graph<T>::kept_nodes() const {
  std::vector<char> kept(m_nodes.size(), 0);
  for (std::size_t id = 0; id < m_nodes.size(); ++id) kept[id] = m_nodes[id].is_leaf();
  for (auto id : m_keep) kept[id] = 1;
  for (const auto* names : {&m_outputs, &m_grads}) {
    for (const auto& [name, id] : *names) kept[id] = 1;
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
  for (const auto& n : m_nodes) count += n.value.size();
  for (const auto& [size, buffers] : m_spare) count += size * buffers.size();
  return count;
}

template <class T>
void Graph<T>::replay_lean() {
  const std::size_t count = m_nodes.size();
  // kept: holds its value after the replay. needed: kept, or read by a needed node. last_read:
  // the last needed node that reads it.
  const std::vector<char> kept = kept_nodes();
  std::vector<char> needed(count, 0);
  std::vector<std::size_t> last_read(count, 0);
  for (std::size_t id = count; id-- > 0;) {
    const Node<T>& n = m_nodes[id];
    needed[id] = needed[id] || kept[id];
    if (!needed[id]) continue;
    for (auto in : n.inputs) {
      needed[in] = 1;
      last_read[in] = std::max(last_read[in], id);
    }
  }
  const auto release = [&](std::size_t id) {
    Node<T>& n = m_nodes[id];
    if (n.released) return;
    m_spare[n.value.size()].push_back(std::move(n.value));
    n.value = xt::xarray<T>::from_shape({0});
    n.released = true;
  };
  for (std::size_t id = 0; id < count; ++id) {
    Node<T>& n = m_nodes[id];
    if (n.is_leaf()) continue;
    if (!needed[id]) {
      release(id);
      continue;
    }
    Args<T> args = args_of(n);
    const Shape shape = with_node_context(*n.op, id, [&] { return n.op->infer_shape(shapes_of(args)); });
    if (!kept[id]) {
      // The buffer: an input read for the last time here, if the op may write over it; else a
      // spare buffer of the same size; else a new one.
      std::optional<std::size_t> over;
      for (std::size_t j = 0; j < n.inputs.size() && !over; ++j) {
        const std::size_t in = n.inputs[j];
        if (!kept[in] && last_read[in] == id && n.op->overwrites_input(j) &&
            shapes_equal(m_nodes[in].value.shape(), shape)) {
          over = j;
        }
      }
      if (over) {
        const std::size_t in = n.inputs[*over];
        n.value = std::move(m_nodes[in].value);
        m_nodes[in].value = xt::xarray<T>::from_shape({0});
        m_nodes[in].released = true;
        for (std::size_t j = 0; j < n.inputs.size(); ++j) {
          if (n.inputs[j] == in) args[j] = &n.value;
        }
      } else {
        std::size_t size = 1;
        for (std::size_t d : shape) size *= d;
        const auto spare = m_spare.find(size);
        if (spare != m_spare.end() && !spare->second.empty()) {
          n.value = std::move(spare->second.back());
          spare->second.pop_back();
        }
      }
    }
    if (!shapes_equal(shape, n.value.shape())) n.value.resize(shape);
    n.released = true;  // until its forward has run: if that throws, no stale value shows
    n.op->forward(args, n.value);
    n.released = false;
    for (auto in : n.inputs) {
      if (!kept[in] && last_read[in] == id) release(in);
    }
  }
}

template <class T>
void Graph<T>::set_grad_of(std::size_t id, std::size_t of) {
  node(id);  // throws naming a missing node
  Node<T>& n = m_nodes[id];
  if (n.role == Role::forward) {
    throw error("set_grad_of: node " + std::to_string(id) + " is a forward node, not a gradient");
  }
  if (of >= id) {
    throw error("set_grad_of: node " + std::to_string(id) + " cannot hold the gradient of node " +
                std::to_string(of) + ", which is not before it");
  }
  n.grad_of = of;
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
