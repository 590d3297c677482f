#include <xgrad/graph/backward.hpp>

#include <algorithm>
#include <string>

#include <xtensor/xbuilder.hpp>

namespace xgrad {

namespace {

template <class T>
void check_same_graph(const Graph<T>& g, const Var<T>& v, const std::string& what) {
  if (!v.valid()) throw error("grad: " + what + " is an empty Var");
  if (&v.graph() != &g) {
    throw error("grad: " + what + " (node " + std::to_string(v.id()) +
                ") belongs to another graph than y");
  }
  g.node(v.id());
}

// The walk of backward(), after its checks.
template <class T>
std::vector<Var<T>> walk(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                         const Accumulate<T>& accumulate, bool through_xs);

}  // namespace

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

template <class T>
void check_backward_args(const Var<T>& y, const std::vector<Var<T>>& xs, const Shape& grad_out_shape) {
  if (!y.valid()) throw error("grad: y is an empty Var");
  for (std::size_t i = 0; i < xs.size(); ++i) {
    check_same_graph(y.graph(), xs[i], "x[" + std::to_string(i) + "]");
  }
  if (!shapes_equal(grad_out_shape, y.value().shape())) {
    throw error("grad: grad_out is " + shape_str(grad_out_shape) + " but y (node " +
                std::to_string(y.id()) + ") is " + shape_str(y.value().shape()));
  }
}

template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                             const Accumulate<T>& accumulate, bool through_xs) {
  if (!y.valid()) throw error("grad: y is an empty Var");
  check_same_graph(y.graph(), grad_out, "grad_out");
  const auto& s = grad_out.value().shape();
  check_backward_args(y, xs, Shape(s.begin(), s.end()));
  detail::GraphRollback<T> rollback(y.graph());
  std::vector<Var<T>> result = walk(y, xs, grad_out, accumulate, through_xs);
  rollback.commit();
  return result;
}

template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out,
                             const Accumulate<T>& accumulate) {
  check_backward_args(y, xs, Shape(grad_out.shape().begin(), grad_out.shape().end()));
  Graph<T>& g = y.graph();
  detail::GraphRollback<T> rollback(g);
  const Var<T> seed = g.constant("grad_out", grad_out);
  g.set_grad_of(seed.id(), y.id());
  std::vector<Var<T>> result = walk(y, xs, seed, accumulate, true);
  rollback.commit();
  return result;
}

namespace {

template <class T>
std::vector<Var<T>> walk(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                         const Accumulate<T>& accumulate, bool through_xs) {
  Graph<T>& g = y.graph();

  // depends[i]: node i is some x or is computed from one; only such nodes need a gradient.
  const std::size_t n = y.id() + 1;
  std::vector<char> depends(n, 0), is_x(n, 0);
  for (const auto& x : xs) {
    if (x.id() < n) depends[x.id()] = is_x[x.id()] = 1;
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (auto in : g.node(i).inputs) depends[i] = depends[i] || depends[in];
  }

  std::vector<Var<T>> grads(n);  // accumulated gradient of each node; empty: none yet
  grads[y.id()] = grad_out;
  for (std::size_t i = n; i-- > 0;) {
    const Node<T>& node = g.node(i);  // stays valid: the graph's deque does not move nodes
    if (!grads[i].valid() || node.is_leaf() || (is_x[i] && !through_xs)) continue;
    std::vector<bool> wanted(node.inputs.size());
    std::vector<Var<T>> inputs;
    for (std::size_t j = 0; j < node.inputs.size(); ++j) {
      wanted[j] = depends[node.inputs[j]] != 0;
      inputs.emplace_back(g, node.inputs[j]);
    }
    if (std::none_of(wanted.begin(), wanted.end(), [](bool w) { return w; })) continue;

    std::vector<Var<T>> contributions;
    const std::size_t first_new = g.size();
    {
      typename Graph<T>::BackwardScope scope(g);
      const Var<T> self(g, i);
      contributions = node.op->vjp(VjpArgs<T>{inputs, self, grads[i], wanted});
    }
    if (contributions.size() != inputs.size()) {
      throw error(node.op->name() + " (node " + std::to_string(i) + "): VJP returned " +
                  std::to_string(contributions.size()) + " gradients for " +
                  std::to_string(inputs.size()) + " inputs");
    }
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      if (!wanted[j]) continue;
      const Var<T>& c = contributions[j];
      if (!c.valid() || &c.graph() != &g || !shapes_equal(c.value().shape(), inputs[j].value().shape())) {
        throw error(node.op->name() + " (node " + std::to_string(i) + "): VJP for input " +
                    std::to_string(j) + " " + shape_str(inputs[j].value().shape()) + " returned " +
                    (!c.valid() ? std::string("nothing") : &c.graph() != &g ? "a node of another graph"
                                                                             : shape_str(c.value().shape())));
      }
      // A node the rule built for input j holds (a contribution to) input j's gradient.
      if (c.id() >= first_new && !c.node().grad_of) g.set_grad_of(c.id(), node.inputs[j]);
      Var<T>& acc = grads[node.inputs[j]];
      if (acc.valid()) {
        {
          typename Graph<T>::BackwardScope scope(g);
          acc = accumulate(acc, c);
        }
        g.set_grad_of(acc.id(), node.inputs[j]);
      } else {
        acc = c;
      }
    }
  }

  std::vector<Var<T>> result;
  for (const auto& x : xs) {
    if (x.id() < n && grads[x.id()].valid()) {
      result.push_back(grads[x.id()]);
    } else {
      result.push_back(g.constant("zeros", xt::zeros<T>(x.value().shape())));
      g.set_grad_of(result.back().id(), x.id());
    }
  }
  return result;
}

}  // namespace

template void check_backward_args(const Var<float>&, const std::vector<Var<float>>&, const Shape&);
template void check_backward_args(const Var<double>&, const std::vector<Var<double>>&, const Shape&);
template std::vector<Var<float>> backward(const Var<float>&, const std::vector<Var<float>>&,
                                          const Var<float>&, const Accumulate<float>&, bool);
template std::vector<Var<double>> backward(const Var<double>&, const std::vector<Var<double>>&,
                                           const Var<double>&, const Accumulate<double>&, bool);
template std::vector<Var<float>> backward(const Var<float>&, const std::vector<Var<float>>&,
                                          const xt::xarray<float>&, const Accumulate<float>&);
template std::vector<Var<double>> backward(const Var<double>&, const std::vector<Var<double>>&,
                                           const xt::xarray<double>&, const Accumulate<double>&);

}  // namespace xgrad
