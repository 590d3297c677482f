// Graph<T>: an expression graph of xt::xarray<T> values, T = float or double.
//
// Define-by-run: creating a node runs its forward at once. Nodes are kept in creation order and a
// node's id is its index, so creation order is a topological order. A Var is a (graph, id) handle.
// Backward passes (see backward.hpp) add ordinary nodes to the same graph, so gradients are Vars.
#pragma once

#include <cstddef>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/op.hpp>

namespace xgrad {

template <class T>
class Graph;
namespace detail {
template <class T>
class GraphRollback;  // graph/backward.cpp: drops the nodes of a failed backward pass
}  // namespace detail

// input, parameter, constant: leaves. forward: built by the caller. backward: built while grad()
// ran, by a VJP rule or by the accumulation of gradient contributions.
enum class Role { input, parameter, constant, forward, backward };
const char* role_name(Role role);
std::optional<Role> role_from_name(const std::string& name);  // the inverse; nullopt if unknown

template <class T>
struct Node {
  std::shared_ptr<const Op> op;      // null for a leaf
  std::vector<std::size_t> inputs;   // ids of earlier nodes
  Role role = Role::forward;
  std::string name;                  // leaves: the caller's name; may be empty otherwise
  // The node whose gradient this node holds: set by grad() on each gradient it builds (a VJP
  // rule's result for one input, a sum of contributions, the seed grad_out, zeros for an input
  // y does not depend on). Empty on forward nodes and on a VJP rule's intermediate nodes.
  std::optional<std::size_t> grad_of;
  xt::xarray<T> value;
  // Set by a lean graph (Graph::keep_only) on a node whose value it gave up: value is empty then.
  bool released = false;

  bool is_leaf() const { return op == nullptr; }
  // Part of a backward pass: a backward node, or a leaf grad() made (a seed, zeros).
  bool in_backward() const { return role == Role::backward || grad_of.has_value(); }
  // "input", "parameter", "constant" for leaves, the op's name otherwise.
  std::string op_name() const;
};

// A handle to one node of one graph. Default-constructed, it refers to nothing (valid() false);
// VJP rules return such empty Vars for inputs that need no gradient.
template <class T>
class Var {
 public:
  Var() = default;
  Var(Graph<T>& graph, std::size_t id) : m_graph(&graph), m_id(id) {}

  bool valid() const { return m_graph != nullptr; }
  Graph<T>& graph() const;
  std::size_t id() const { return m_id; }
  const xt::xarray<T>& value() const;
  const Node<T>& node() const;

 private:
  Graph<T>* m_graph = nullptr;
  std::size_t m_id = 0;
};

template <class T>
class Graph {
 public:
  using value_type = T;

  Graph() = default;
  // Vars point at their graph: it neither copies nor moves. copy_from() duplicates one.
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  Var<T> input(std::string name, xt::xarray<T> value);
  // input(name, matrix(rows)): g.input("q", {{0.5}, {0.0}}).
  Var<T> input(std::string name, std::initializer_list<std::initializer_list<T>> rows);
  Var<T> parameter(std::string name, xt::xarray<T> value);
  Var<T> constant(std::string name, xt::xarray<T> value);

  // Adds a node computing op(x...) and runs its forward. Throws xgrad::error, and adds nothing,
  // when the inputs are invalid for the op (the message starts "<op> (node N): ").
  Var<T> apply(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x);

  // Replaces a leaf's value; the new value must have the leaf's shape. Call replay() afterwards.
  void set_value(const Var<T>& leaf, xt::xarray<T> value);
  // Re-runs every non-leaf node's forward in id order, reusing the nodes' buffers.
  void replay();

  // Lean replays, for training loops and large T: keep_only(keep) releases now the value of every
  // non-leaf node except those in `keep` and those named by set_output/set_grad. From then on
  // replay() computes only the nodes that a kept node depends on, each released node into a
  // buffer it shares with nodes whose values are not needed at the same time (an op that allows
  // it writes over an input read for the last time, see Op::overwrites_input), and releases it
  // after its last reader. So a replay holds at once only the values still to be read, not
  // all of them, and allocates no value buffers once they exist. Kept values and results are the
  // same bits as a full replay's. A released value cannot be read (Var::value throws) nor become
  // the input of a new node; exports and diagnostics need every value (require_values).
  // keep_all() ends it: the next replay() computes every value again.
  void keep_only(const std::vector<Var<T>>& keep);
  void keep_all();
  bool lean() const { return m_lean; }
  // Throws xgrad::error, starting with `who`, if one of the first `count` nodes' value is released.
  void require_values(const std::string& who, std::size_t count = std::size_t(-1)) const;
  // The elements the graph holds: its nodes' values and a lean graph's spare buffers.
  std::size_t held_elements() const;

  // Names for exports: "outputs" and "grads" of the JSON format. A name set again is replaced.
  void set_output(std::string name, const Var<T>& v);
  void set_grad(std::string name, const Var<T>& v);
  const std::map<std::string, std::size_t>& outputs() const { return m_outputs; }
  const std::map<std::string, std::size_t>& grads() const { return m_grads; }

  std::size_t size() const { return m_nodes.size(); }
  const Node<T>& node(std::size_t id) const;
  Var<T> var(std::size_t id);

  // Appends the first `count` nodes of src, values converted to T, ops shared. Ids are kept when
  // this graph starts empty: gradcheck uses it to replay a float32 graph in float64.
  template <class U>
  void copy_from(const Graph<U>& src, std::size_t count);

  // While a BackwardScope is alive, new non-leaf nodes have the role backward.
  class BackwardScope {
   public:
    explicit BackwardScope(Graph& graph) : m_graph(graph) { ++m_graph.m_backward_depth; }
    ~BackwardScope() { --m_graph.m_backward_depth; }
    BackwardScope(const BackwardScope&) = delete;
    BackwardScope& operator=(const BackwardScope&) = delete;

   private:
    Graph& m_graph;
  };
  // Records that node `id` holds the gradient of the earlier node `of` (Node::grad_of). For
  // grad() and importers; throws xgrad::error for a forward node or a later `of`.
  void set_grad_of(std::size_t id, std::size_t of);

 private:
  friend class detail::GraphRollback<T>;
  void drop_nodes_from(std::size_t size) { m_nodes.erase(m_nodes.begin() + static_cast<long>(size), m_nodes.end()); }
  Var<T> add_leaf(Role role, std::string name, xt::xarray<T> value);
  void check_var(const Var<T>& v, const char* what) const;
  Args<T> args_of(const Node<T>& n) const;
  void replay_lean();
  std::vector<char> kept_nodes() const;  // 1 for leaves, keep_only's Vars, outputs and grads

  bool m_lean = false;
  std::vector<std::size_t> m_keep;      // keep_only's explicit Vars
  // Buffers of released values by element count, for the next lean replay: taking one and
  // giving one back cost O(1), so that a replay stays linear in the node count.
  std::unordered_map<std::size_t, std::vector<xt::xarray<T>>> m_spare;

  std::deque<Node<T>> m_nodes;  // a deque: references to values stay valid as the graph grows
  int m_backward_depth = 0;
  std::map<std::string, std::size_t> m_outputs, m_grads;
};

// A matrix from its rows, {{a, b}, {c, d}}, or a column, {{a}, {b}} (which xarray's own
// initializer-list constructors find ambiguous). Throws xgrad::error if row lengths differ.
template <class T>
xt::xarray<T> matrix(std::initializer_list<std::initializer_list<T>> rows);

template <class T>
const char* dtype_name();  // "float32", "float64"
template <>
const char* dtype_name<float>();
template <>
const char* dtype_name<double>();

template <class T>
template <class U>
void Graph<T>::copy_from(const Graph<U>& src, std::size_t count) {
  if (count > src.size()) {
    throw error("copy_from: asked for " + std::to_string(count) + " nodes of a graph of " +
                std::to_string(src.size()));
  }
  src.require_values("copy_from", count);
  const std::size_t offset = m_nodes.size();
  for (std::size_t i = 0; i < count; ++i) {
    const Node<U>& s = src.node(i);
    Node<T>& d = m_nodes.emplace_back();
    d.op = s.op;
    d.inputs = s.inputs;
    for (auto& id : d.inputs) id += offset;
    d.role = s.role;
    d.name = s.name;
    if (s.grad_of) d.grad_of = *s.grad_of + offset;
    d.value = xt::cast<T>(s.value);
  }
}

}  // namespace xgrad
