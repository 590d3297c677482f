#include <xgrad/graph/backward.hpp>

#include <algorithm>
#include <string>

#include <xtensor/xbuilder.hpp>

namespace xgrad {

namespace detail {

// While armed, its destructor drops every node added to the graph since it was made: a backward
// pass that throws (a VJP rule reading a value keep_only released, a broken rule, bad_alloc)
// leaves the graph as it found it. Graph<T> befriends it.
template <class T>
class GraphRollback {
 public:
  explicit GraphRollback(Graph<T>& graph) : m_graph(graph), m_size(graph.size()) {}
  ~GraphRollback() {
    if (m_armed) m_graph.drop_nodes_from(m_size);
  }
  GraphRollback(const GraphRollback&) = delete;
  GraphRollback& operator=(const GraphRollback&) = delete;
  void commit() { m_armed = false; }

 private:
  Graph<T>& m_graph;
  std::size_t m_size;
  bool m_armed = true;
};

}  // namespace detail

namespace {

template <class T>
void check_same_graph(const Graph<T>& g, const Var<T>& v, const std::string& what) {
  if (!v.valid()) throw error("grad: " + what + " is an empty Var");
  if (&v.graph() != &g) {
    throw error("grad: " + what + " (node " + std::to_string(v.id()) + ") belongs to another graph than y");
  }
  if (v.output() >= g.node(v.id()).output_count()) {
    throw error("grad: " + what + " names output " + std::to_string(v.output()) + " of node " + std::to_string(v.id()) +
                ", which has " + std::to_string(g.node(v.id()).output_count()));
  }
}

// The checks of backward() before it adds any node. grad_out_shapes[i] is null where no
// gradient flows from ys[i].
template <class T>
void check_backward_args(const std::vector<Var<T>>& ys, const std::vector<Var<T>>& xs,
                         const std::vector<const Shape*>& grad_out_shapes) {
  if (ys.empty()) throw error("grad: no y");
  if (!ys[0].valid()) throw error("grad: y is an empty Var");
  Graph<T>& g = ys[0].graph();
  for (std::size_t i = 0; i < ys.size(); ++i) {
    const std::string y_name = ys.size() == 1 ? "y" : "y[" + std::to_string(i) + "]";
    check_same_graph(g, ys[i], y_name);
    if (grad_out_shapes[i] && !shapes_equal(*grad_out_shapes[i], ys[i].shape())) {
      throw error("grad: grad_out is " + shape_str(*grad_out_shapes[i]) + " but " + y_name + " (node " +
                  std::to_string(ys[i].id()) + ") is " + shape_str(ys[i].shape()));
    }
  }
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const std::string x_name = "x[" + std::to_string(i) + "]";
    check_same_graph(g, xs[i], x_name);
    const Node<T>& n = xs[i].node();
    if (n.has_no_gradient()) {
      throw error("grad: " + x_name + " (node " + std::to_string(xs[i].id()) + ", '" + n.name + "') is " +
                  (n.index_leaf ? "an index leaf: indices have no gradient" : "a mask leaf: a mask has no gradient"));
    }
  }
}

// The walk of backward(), after its checks.
template <class T>
std::vector<Var<T>> walk(const std::vector<Var<T>>& ys, const std::vector<Var<T>>& xs,
                         const std::vector<Var<T>>& grad_outs, const Accumulate<T>& accumulate, bool through_xs) {
  Graph<T>& g = ys[0].graph();
  std::size_t n = 0;  // nodes 0 .. n - 1 may need a gradient
  for (const auto& y : ys) n = std::max(n, y.id() + 1);

  // depends[i]: node i is some x or is computed from one; only such nodes need a gradient.
  std::vector<char> depends(n, 0), is_x(n, 0);
  for (const auto& x : xs) {
    if (x.id() < n) depends[x.id()] = is_x[x.id()] = 1;
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (const Slot& in : g.node(i).inputs) depends[i] = depends[i] || depends[in.node];
  }

  // The accumulated gradient of each output: grads[node][output], empty where none yet.
  std::vector<std::vector<Var<T>>> grads(n);
  const auto grad_at = [&](Slot s) -> Var<T>& {
    auto& outs = grads[s.node];
    if (outs.empty()) outs.resize(g.node(s.node).output_count());
    return outs[s.output];
  };
  // Adds contribution c to the gradient of output s.
  const auto contribute = [&](Slot s, const Var<T>& c) {
    Var<T>& acc = grad_at(s);
    if (!acc.valid()) {
      acc = c;
      return;
    }
    {
      typename Graph<T>::BackwardScope scope(g, &g.node(s.node).scope);
      acc = accumulate(acc, c);
    }
    g.set_grad_of(acc.slot(), s);
  };
  for (std::size_t i = 0; i < ys.size(); ++i) {
    if (grad_outs[i].valid()) contribute(ys[i].slot(), grad_outs[i]);
  }

  for (std::size_t i = n; i-- > 0;) {
    const Node<T>& node = g.node(i);  // stays valid: the graph's deque does not move nodes
    if (grads[i].empty() || node.is_leaf() || (is_x[i] && !through_xs)) continue;
    std::vector<bool> wanted(node.inputs.size());
    std::vector<Var<T>> inputs;
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      wanted[j] = depends[node.inputs[j].node] != 0 && !g.node(node.inputs[j].node).has_no_gradient();
      inputs.push_back(g.var(node.inputs[j]));
    }
    if (std::none_of(wanted.begin(), wanted.end(), [](bool w) { return w; })) continue;

    std::vector<Var<T>> self;
    for (std::size_t k = 0; k < node.output_count(); ++k) self.emplace_back(g, i, k);
    std::vector<Var<T>> contributions;
    const std::size_t first_new = g.size();
    {
      typename Graph<T>::BackwardScope scope(g, &node.scope);
      contributions = node.op->vjp(VjpArgs<T>{inputs, self, grads[i], wanted});
    }
    const std::string where =
        node.op->name() + " (node " + std::to_string(i) + (node.scope.empty() ? "" : ", scope " + node.scope) + "): ";
    if (contributions.size() != inputs.size()) {
      throw error(where + "VJP returned " + std::to_string(contributions.size()) + " gradients for " +
                  std::to_string(inputs.size()) + " inputs");
    }
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      if (!wanted[j]) continue;
      const Var<T>& c = contributions[j];
      if (!c.valid() || &c.graph() != &g || !shapes_equal(c.shape(), inputs[j].shape())) {
        throw error(where + "VJP for input " + std::to_string(j) + " " + shape_str(inputs[j].shape()) + " returned " +
                    (!c.valid() ? std::string("nothing") : &c.graph() != &g ? "a node of another graph"
                                                                             : shape_str(c.shape())));
      }
      // An output the rule built for input j holds (a contribution to) input j's gradient.
      if (c.id() >= first_new && !c.node().grad_of(c.output())) g.set_grad_of(c.slot(), node.inputs[j]);
      contribute(node.inputs[j], c);
    }
  }

  std::vector<Var<T>> result;
  for (const auto& x : xs) {
    const Var<T> acc = x.id() < n ? grad_at(x.slot()) : Var<T>();
    if (acc.valid()) {
      result.push_back(acc);
    } else {
      result.push_back(zeros_like(x));
      g.set_grad_of(result.back().slot(), x.slot());
    }
  }
  return result;
}

}  // namespace

template <class T>
std::vector<Var<T>> backward(const std::vector<Var<T>>& ys, const std::vector<Var<T>>& xs,
                             const std::vector<Var<T>>& grad_outs, const Accumulate<T>& accumulate,
                             bool through_xs) {
  if (grad_outs.size() != ys.size()) {
    throw error("grad: " + std::to_string(grad_outs.size()) + " grad_outs for " + std::to_string(ys.size()) + " ys");
  }
  std::vector<Shape> shapes(ys.size());
  std::vector<const Shape*> grad_out_shapes(ys.size(), nullptr);
  if (!ys.empty() && ys[0].valid()) {
    for (std::size_t i = 0; i < ys.size(); ++i) {
      if (!grad_outs[i].valid()) continue;
      check_same_graph(ys[0].graph(), grad_outs[i], ys.size() == 1 ? "grad_out" : "grad_out[" + std::to_string(i) + "]");
      shapes[i] = grad_outs[i].shape();
      grad_out_shapes[i] = &shapes[i];
    }
  }
  check_backward_args(ys, xs, grad_out_shapes);
  detail::GraphRollback<T> rollback(ys[0].graph());
  std::vector<Var<T>> result = walk(ys, xs, grad_outs, accumulate, through_xs);
  rollback.commit();
  return result;
}

template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                             const Accumulate<T>& accumulate, bool through_xs) {
  if (!y.valid()) throw error("grad: y is an empty Var");
  if (!grad_out.valid()) throw error("grad: grad_out is an empty Var");
  return backward(std::vector<Var<T>>{y}, xs, std::vector<Var<T>>{grad_out}, accumulate, through_xs);
}

template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out,
                             const Accumulate<T>& accumulate) {
  const Shape shape = shape_of(grad_out);
  check_backward_args(std::vector<Var<T>>{y}, xs, {&shape});
  Graph<T>& g = y.graph();
  detail::GraphRollback<T> rollback(g);
  const Var<T> seed = g.constant("grad_out", grad_out);
  g.set_grad_of(seed.slot(), y.slot());
  std::vector<Var<T>> result = walk(std::vector<Var<T>>{y}, xs, std::vector<Var<T>>{seed}, accumulate, true);
  rollback.commit();
  return result;
}

#define XGRAD_INSTANTIATE_BACKWARD(T)                                                                        \
  template std::vector<Var<T>> backward(const std::vector<Var<T>>&, const std::vector<Var<T>>&,             \
                                        const std::vector<Var<T>>&, const Accumulate<T>&, bool);            \
  template std::vector<Var<T>> backward(const Var<T>&, const std::vector<Var<T>>&, const Var<T>&,           \
                                        const Accumulate<T>&, bool);                                       \
  template std::vector<Var<T>> backward(const Var<T>&, const std::vector<Var<T>>&, const xt::xarray<T>&, \
                                        const Accumulate<T>&);
XGRAD_INSTANTIATE_BACKWARD(float)
XGRAD_INSTANTIATE_BACKWARD(double)
#undef XGRAD_INSTANTIATE_BACKWARD

}  // namespace xgrad
