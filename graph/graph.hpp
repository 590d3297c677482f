// Graph<T>: an expression graph of xt::xarray<T> values, T = float or double.
//
// Define-by-run: creating a node runs its forward at once. Nodes are kept in creation order and a
// node's id is its index, so creation order is a topological order. A Var is a (graph, id) handle.
// Backward passes (see backward.hpp) add ordinary nodes to the same graph, so gradients are Vars.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xbuilder.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/lean.hpp>
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

// What a leaf holds: values of the graph's float type, int64 indices (Graph::indices) or a
// boolean mask (Graph::mask).
enum class LeafKind { values, indices, mask };

// The op name of a leaf ("input", "parameter", "constant", "indices" for an index leaf, "mask"
// for a mask leaf), spelled here once for nodes, the JSON format and the DOT export.
const char* leaf_op_name(Role role, LeafKind kind);
// True for the op names of leaves.
bool is_leaf_op_name(const std::string& op);
inline constexpr const char* index_leaf_op = "indices";
inline constexpr const char* mask_leaf_op = "mask";

// One output of a node: its value, and the slot whose gradient it holds, if any.
template <class T>
struct Output {
  xt::xarray<T> value;
  // Set by grad() on each gradient it builds (a VJP rule's result for one input, a sum of
  // contributions, the seed grad_out, zeros for an input y does not depend on). Empty on
  // forward nodes and on a VJP rule's intermediate nodes.
  std::optional<Slot> grad_of;
};

template <class T>
struct Node {
  std::shared_ptr<const Op> op;  // null for a leaf
  std::vector<Slot> inputs;      // outputs of earlier nodes
  Role role = Role::forward;
  std::string name;              // leaves: the caller's name; may be empty otherwise
  std::string scope;             // the named scope it was made in (Graph::scope), "" for none
  // One per output: a leaf and most ops have one. An index leaf has one too, of no elements;
  // its values are `indices`. A mask leaf's output holds its booleans as 1 (true) and 0 (false)
  // of T, which is what the ops that read it see; its interface is Var::mask().
  std::vector<Output<T>> outputs;
  bool index_leaf = false;
  bool mask_leaf = false;
  xt::xarray<std::int64_t> indices;  // an index leaf's value (Graph::indices)
  // Set by a lean graph (Graph::keep_only) on a node whose values it gave up: they are empty then.
  bool released = false;

  bool is_leaf() const { return op == nullptr; }
  LeafKind leaf_kind() const { return index_leaf ? LeafKind::indices : mask_leaf ? LeafKind::mask : LeafKind::values; }
  // Never differentiated: an index or a mask leaf.
  bool has_no_gradient() const { return index_leaf || mask_leaf; }
  std::size_t output_count() const { return outputs.size(); }
  const xt::xarray<T>& value(std::size_t output = 0) const { return outputs.at(output).value; }
  // The shape of output k, also of an index leaf's indices.
  Shape shape(std::size_t output = 0) const;
  const std::optional<Slot>& grad_of(std::size_t output = 0) const { return outputs.at(output).grad_of; }
  // Part of a backward pass: a backward node, or a leaf grad() made (a seed, zeros).
  bool in_backward() const;
  // "input", "parameter", "constant", "indices", "mask" for leaves, the op's name otherwise.
  std::string op_name() const;
};

// A handle to one output of one node of one graph. Default-constructed, it refers to nothing
// (valid() false); VJP rules return such empty Vars for inputs that need no gradient.
template <class T>
class Var {
 public:
  Var() = default;
  Var(Graph<T>& graph, std::size_t id, std::size_t output = 0) : m_graph(&graph), m_id(id), m_output(output) {}

  bool valid() const { return m_graph != nullptr; }
  Graph<T>& graph() const;
  std::size_t id() const { return m_id; }  // the node
  std::size_t output() const { return m_output; }
  Slot slot() const { return {m_id, m_output}; }
  // The value of this output; throws xgrad::error for an index leaf (see indices()), a mask
  // leaf (see mask()) or a value keep_only released.
  const xt::xarray<T>& value() const;
  // An index leaf's values; throws xgrad::error for any other node.
  const xt::xarray<std::int64_t>& indices() const;
  // A mask leaf's booleans (a copy); throws xgrad::error for any other node.
  xt::xarray<bool> mask() const;
  Shape shape() const;  // value()'s shape, or indices()'s
  const Node<T>& node() const;

 private:
  Graph<T>* m_graph = nullptr;
  std::size_t m_id = 0;
  std::size_t m_output = 0;
};

template <class T>
class Graph {
 public:
  using value_type = T;

  Graph() = default;
  // Vars point at their graph: it neither copies nor moves. copy_from() duplicates one.
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  // Gives its nodes' large value buffers to this thread's buffer cache (release_cached_buffers),
  // for the next graph's nodes of the same sizes.
  ~Graph();

  Var<T> input(std::string name, xt::xarray<T> value);
  // input(name, matrix(rows)): g.input("q", {{0.5}, {0.0}}).
  Var<T> input(std::string name, std::initializer_list<std::initializer_list<T>> rows);
  Var<T> parameter(std::string name, xt::xarray<T> value);
  Var<T> constant(std::string name, xt::xarray<T> value);
  // An index leaf: int64 values such as token ids or labels, for ops that take them
  // (Op::accepts_indices). Never differentiated (grad() refuses it as an x); replaced per batch
  // with set_value; exported as JSON integers.
  Var<T> indices(std::string name, xt::xarray<std::int64_t> value);
  // A mask leaf: booleans, true where attention (or apply_mask) keeps an entry, false where it
  // fills it. An input, never differentiated (grad() refuses it as an x; nothing flows to it),
  // replaced per batch with set_value(leaf, xt::xarray<bool>), exported as JSON booleans (leaf
  // op "mask") and as an ONNX bool input. Var::mask() reads it; value() refuses it. The ops
  // that take it (apply_mask, the attention builders, flash_attention) read it as 1 and 0.
  Var<T> mask(std::string name, xt::xarray<bool> value);
  // Every parameter leaf, in creation order (for optimizers and checkpoints).
  std::vector<Var<T>> parameters();

  // Adds a node computing op(x...) and runs its forward; returns its first output. Throws
  // xgrad::error, and adds nothing, when the inputs are invalid for the op or its forward
  // rejects their values (the message starts "<op> (node N): ").
  Var<T> apply(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x);
  // The same, returning every output of the node (Op::output_count of them).
  std::vector<Var<T>> apply_outputs(std::shared_ptr<const Op> op, const std::vector<Var<T>>& x);

  // Replaces a leaf's value; the new value must have the leaf's shape. Call replay() afterwards.
  void set_value(const Var<T>& leaf, xt::xarray<T> value);
  // The same for an index leaf: value is an xt::xarray<std::int64_t> (only that type, so that
  // an xtensor expression of T values still goes to the overload above).
  template <class I, std::enable_if_t<std::is_same_v<std::decay_t<I>, xt::xarray<std::int64_t>>, int> = 0>
  void set_value(const Var<T>& leaf, I&& value) {
    set_indices(leaf, xt::xarray<std::int64_t>(std::forward<I>(value)));
  }
  // The same for a mask leaf: value is an xt::xarray<bool> of the leaf's shape.
  template <class B, std::enable_if_t<std::is_same_v<std::decay_t<B>, xt::xarray<bool>>, int> = 0>
  void set_value(const Var<T>& leaf, B&& value) {
    set_mask(leaf, value);
  }
  // Re-runs every non-leaf node's forward in id order, reusing the nodes' buffers.
  void replay();

  // The run state that every forward reads (Args::step, Args::training), for ops that draw
  // random numbers or act differently in evaluation (dropout): the step (default 0; a training
  // loop sets it each step for fresh dropout masks) and the mode (default true, training; false
  // is evaluation, where dropout copies its input). Setting them recomputes nothing: call
  // replay() afterwards. An export writes them when they differ from the defaults.
  void set_step(std::uint64_t step) { m_step = step; }
  std::uint64_t step() const { return m_step; }
  void set_training(bool training) { m_training = training; }
  bool training() const { return m_training; }

  // Lean replays, for training loops and large T: keep_only(keep) releases now the value of every
  // non-leaf node except those in `keep` and those named by set_output/set_grad. From then on
  // replay() computes only the nodes that a kept node depends on, each released node into a
  // buffer it shares with nodes whose values are not needed at the same time (an op that allows
  // it writes over an input read for the last time, see Op::overwrites_input), and releases it
  // after its last reader; a node that only rearranges its input (permute, transpose, reshape:
  // Op::view_of) is not computed when all its readers read it as a View instead (Op::reads_view:
  // matmul), and the value it views stays until they have run. So a replay holds at once only the values still to be read, not
  // all of them, and allocates no value buffers once they exist. Kept values and results are the
  // same bits as a full replay's. A released value cannot be read (Var::value throws) nor become
  // the input of a new node; exports and diagnostics need every value (require_values).
  // keep_all() ends it: the next replay() computes every value again.
  void keep_only(const std::vector<Var<T>>& keep);
  void keep_all();
  bool lean() const { return m_lean; }
  // How many nodes the last lean replay read as views of others without computing them (a
  // permute, transpose or reshape whose every reader reads strides: Op::view_of, Op::reads_view).
  std::size_t viewed_nodes() const { return m_viewed; }
  // Throws xgrad::error, starting with `who`, if one of the first `count` nodes' value is released.
  void require_values(const std::string& who, std::size_t count = std::size_t(-1)) const;
  // The elements the graph holds: its nodes' values and a lean graph's spare buffers.
  std::size_t held_elements() const;

  // Node timing, for profiles (bench/model_bench.cpp --profile): while set, every forward a node
  // runs (when it is made, and in each replay) adds its wall time in seconds to (*seconds)[id],
  // growing the vector as needed. nullptr, the default, stops it. The vector must outlive that.
  void time_nodes(std::vector<double>* seconds) { m_node_seconds = seconds; }

  // A work limit, for importers: while set, apply() charges each new node's Op::work (for its
  // input and output shapes) to *budget before its forward runs, and refuses the node (xgrad::error
  // "<op> (node N): computing the graph takes more than ...", nothing added) when it would pass
  // the budget's limit. Replays are not charged. nullptr, the default, stops it. The budget must
  // outlive that.
  void limit_work(WorkBudget* budget) { m_work_budget = budget; }

  // Names for exports: "outputs" and "grads" of the JSON format. A name set again is replaced.
  void set_output(std::string name, const Var<T>& v);
  void set_grad(std::string name, const Var<T>& v);
  const std::map<std::string, Slot>& outputs() const { return m_outputs; }
  const std::map<std::string, Slot>& grads() const { return m_grads; }

  std::size_t size() const { return m_nodes.size(); }
  const Node<T>& node(std::size_t id) const;
  // A Var for output `output` of node `id`; throws xgrad::error if there is none.
  Var<T> var(std::size_t id, std::size_t output = 0);
  Var<T> var(Slot slot) { return var(slot.node, slot.output); }

  // Appends the first `count` nodes of src, values converted to T, ops shared, and takes src's
  // run state (step, training). Ids are kept when this graph starts empty: gradcheck uses it to
  // replay a float32 graph in float64 (with the same dropout masks).
  template <class U>
  void copy_from(const Graph<U>& src, std::size_t count);

  // Named scopes, to tell the parts of a model apart: while the Scope that scope(name) returns
  // lives, every node made in this graph (leaves too) carries the scope, and scopes nest,
  // joined with ".": inside g.scope("enc") g.scope("l1.attn") is "enc.l1.attn". The scope is
  // the node's "scope" in JSON, a DOT cluster, a prefix of its ONNX node names, a column of
  // `xgrad inspect`, and is named by the errors that name the node
  // ("matmul (node 7, scope enc.l1.attn): ..."). grad() makes the nodes of each VJP in the scope
  // of the node it differentiates (BackwardScope), whatever scope it is called in. Throws xgrad::error for an empty name or one with a
  // control character or a quote ("). Scopes end in the reverse order they began (RAII).
  class Scope {
   public:
    Scope(Scope&& other) noexcept : m_graph(other.m_graph), m_outer(other.m_outer) { other.m_graph = nullptr; }
    ~Scope() {
      if (m_graph) m_graph->m_scope.resize(m_outer);
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;

   private:
    friend class Graph;
    Scope(Graph& graph, std::size_t outer) : m_graph(&graph), m_outer(outer) {}
    Graph* m_graph;
    std::size_t m_outer;  // the length of the enclosing scope's name, restored at the end
  };
  [[nodiscard]] Scope scope(const std::string& name);
  // The scope new nodes get now: "" outside every scope.
  const std::string& current_scope() const { return m_scope; }

  // While a BackwardScope is alive, new non-leaf nodes have the role backward, and, given a
  // scope, that named scope (in place of the current one): grad() makes the nodes of a VJP in
  // the scope of the node it differentiates, so a model's gradients sit beside its forward.
  class BackwardScope {
   public:
    explicit BackwardScope(Graph& graph, const std::string* scope = nullptr) : m_graph(graph) {
      ++m_graph.m_backward_depth;
      if (scope) {
        m_outer = m_graph.m_scope;
        m_graph.m_scope = *scope;
        m_restore = true;
      }
    }
    ~BackwardScope() {
      --m_graph.m_backward_depth;
      if (m_restore) m_graph.m_scope = std::move(m_outer);
    }
    BackwardScope(const BackwardScope&) = delete;
    BackwardScope& operator=(const BackwardScope&) = delete;

   private:
    Graph& m_graph;
    std::string m_outer;
    bool m_restore = false;
  };
  // Records that output `at` holds the gradient of output `of` of an earlier node
  // (Output::grad_of). For grad() and importers; throws xgrad::error for a forward node, a
  // later `of` or an output that does not exist. The ids alone mean output 0.
  void set_grad_of(Slot at, Slot of);
  void set_grad_of(std::size_t id, std::size_t of) { set_grad_of(Slot{id, 0}, Slot{of, 0}); }

 private:
  friend class detail::GraphRollback<T>;
  void drop_nodes_from(std::size_t size) { m_nodes.erase(m_nodes.begin() + static_cast<long>(size), m_nodes.end()); }
  Var<T> add_leaf(Role role, std::string name, xt::xarray<T> value);
  Node<T>& checked_leaf(const Var<T>& leaf, LeafKind kind);
  void set_indices(const Var<T>& leaf, xt::xarray<std::int64_t> value);
  void set_mask(const Var<T>& leaf, const xt::xarray<bool>& value);
  void check_var(const Var<T>& v, const char* what) const;
  // n's inputs as its forward reads them, into `args` (whose capacity a replay reuses).
  void fill_args(const Node<T>& n, Args<T>& args) const;
  Args<T> args_of(const Node<T>& n) const;
  // The shapes of node id's outputs for these inputs, and its forward into its outputs (resized
  // to those shapes; without shapes, as they are); errors prefixed "<op> (node N): ".
  std::vector<Shape> output_shapes(std::size_t id, const Node<T>& n, const Args<T>& args) const;
  void run_node(std::size_t id, Node<T>& n, const Args<T>& args, const std::vector<Shape>& shapes);
  void run_node(std::size_t id, Node<T>& n, const Args<T>& args);
  void replay_lean();
  std::vector<char> kept_nodes() const;  // 1 for leaves, keep_only's Vars, outputs and grads
  void release(Node<T>& n);              // a lean replay's: its buffers become spares

  bool m_lean = false;
  std::vector<std::size_t> m_keep;  // the nodes of keep_only's Vars
  detail::SpareBuffers<T> m_spare;  // released buffers, for the next lean replay
  // A lean replay's plan, made once for a node count and a set of kept nodes (shapes never
  // change): the nodes every replay releases (not needed, or read as views of others), and for
  // each node it computes, in order, a step: its arguments as its forward reads them (values,
  // views of other values, index leaves' indices; an input it writes over already its own
  // output), its outputs' shapes, and the nodes whose values may go once it has run. A replay
  // then walks flat arrays in order and plans nothing per node. The arguments point into the
  // outputs of nodes 0 .. count - 1, which stay in place: a node's outputs never change in
  // number, the deque keeps its elements where they are as it grows, and a failed backward
  // pass drops only nodes it added, after any replay.
  struct LeanStep {
    std::size_t id;
    std::size_t arg;     // its arguments: args[arg, next step's arg), indices and views alike
    std::size_t output;  // its outputs: sizes[output, next's output), their axes from dim[output]
    std::size_t drop;    // drops[drop, next's drop): released after it has run
    std::size_t over;    // the input whose buffer becomes its output, or no_input
    bool kept, indices, views;
  };
  static constexpr std::size_t no_input = static_cast<std::size_t>(-1);
  struct LeanReplayPlan {
    std::size_t count = 0;
    std::vector<char> kept;
    std::vector<std::size_t> released;
    std::vector<LeanStep> steps;  // one step more than the nodes computed: the last ranges' ends
    std::vector<const xt::xarray<T>*> args;
    std::vector<const xt::xarray<std::int64_t>*> indices;
    std::vector<const View*> views;
    std::vector<std::size_t> sizes;
    std::vector<std::size_t> dim;   // output k's axes are dims[dim[k], dim[k + 1])
    std::vector<std::size_t> dims;
    std::vector<std::size_t> drops;
    std::vector<std::optional<View>> view;  // per node: the view its readers read, if left out
    std::size_t viewed = 0;
  };
  LeanReplayPlan m_lean_plan;
  std::size_t m_viewed = 0;
  void plan_lean(const std::vector<char>& kept);

  std::deque<Node<T>> m_nodes;  // a deque: references to values stay valid as the graph grows
  int m_backward_depth = 0;
  std::string m_scope;  // Graph::scope: the scope of new nodes
  std::map<std::string, Slot> m_outputs, m_grads;
  std::uint64_t m_step = 0;  // the run state: set_step, set_training
  bool m_training = true;
  std::vector<double>* m_node_seconds = nullptr;  // time_nodes
  Outs<T> m_outs;  // run_node's, kept for its capacity
  WorkBudget* m_work_budget = nullptr;            // limit_work
};

// Large node values (128 KiB and more) outlive their graph in a cache of the thread that
// destroyed it, up to 256 MiB in all, and a node made later on that thread with a value of the
// same element count takes one instead of new memory: a program that builds a fresh graph
// each step then reuses pages already touched, rather than having the system fault in and
// clear new ones (that was up to 2x a large attention's time). Values are always written
// whole by their forward; a cached buffer's old elements are never read. A node that cannot
// get its memory (std::bad_alloc, as under ulimit -v) frees the cache and runs once more. This
// frees the calling thread's cache now (the cache of a thread is freed when it ends).
void release_cached_buffers();

// Why `name` cannot name a scope (Graph::scope): "" if it can, else what is wrong with it (empty,
// a control character or a quote).
std::string scope_name_fault(const std::string& name);

// A constant leaf of zeros of x's shape, named "zeros": the gradient where none flows (grad()
// for an x no y depends on, a VJP for an input or output that no gradient reaches).
template <class T>
Var<T> zeros_like(const Var<T>& x) {
  return x.graph().constant("zeros", xt::zeros<T>(x.value().shape()));
}

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
  m_step = src.step();
  m_training = src.training();
  const std::size_t offset = m_nodes.size();
  for (std::size_t i = 0; i < count; ++i) {
    const Node<U>& s = src.node(i);
    Node<T>& d = m_nodes.emplace_back();
    d.op = s.op;
    d.inputs = s.inputs;
    for (auto& in : d.inputs) in.node += offset;
    d.role = s.role;
    d.name = s.name;
    d.scope = s.scope;
    d.index_leaf = s.index_leaf;
    d.mask_leaf = s.mask_leaf;
    d.indices = s.indices;
    for (const auto& out : s.outputs) {
      Output<T>& o = d.outputs.emplace_back();
      o.value = xt::cast<T>(out.value);
      if (out.grad_of) o.grad_of = Slot{out.grad_of->node + offset, out.grad_of->output};
    }
  }
}

}  // namespace xgrad
