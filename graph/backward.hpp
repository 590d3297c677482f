// Reverse-mode traversal: vector-Jacobian products of outputs ys with their grad_outs, w.r.t.
// any outputs xs, built as nodes of the same graph.
#pragma once

#include <functional>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Combines two gradient contributions to one output (an op from ops/, given by the caller:
// graph/ knows no op by name; ops/elementwise.hpp's sum_contributions in practice).
template <class T>
using Accumulate = std::function<Var<T>(const Var<T>&, const Var<T>&)>;

// The gradient of sum_i sum(grad_outs[i] * ys[i]) w.r.t. each x: walks the nodes between the
// xs and the ys in reverse id order, calling each op's VJP rule with the gradients of its
// outputs accumulated so far (an empty Var for an output none reaches); contributions to an
// output used more than once are combined with `accumulate`. An empty grad_outs[i] means that
// no gradient flows from ys[i]. The nodes built have the role backward, and each gradient
// among them records whose gradient it is (Output::grad_of). Returns one Var per x: a
// grad_out itself if x is its y, a constant of zeros if no y depends on x.
// With through_xs false, the walk stops at the xs: a gradient reaching an x is not passed on to
// the nodes it is computed from, so each result is the partial derivative with the xs taken as
// independent variables (a VJP rule built of nodes needs that when one input feeds another).
// Throws xgrad::error if a Var is empty or of another graph, an x is an index leaf, or a
// grad_out's shape is not its y's. A pass that throws, there or in a VJP rule (one that reads
// a value keep_only released, say), adds no node: the nodes it built are dropped again.
template <class T>
std::vector<Var<T>> backward(const std::vector<Var<T>>& ys, const std::vector<Var<T>>& xs,
                             const std::vector<Var<T>>& grad_outs, const Accumulate<T>& accumulate,
                             bool through_xs = true);

// One y and its grad_out.
template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                             const Accumulate<T>& accumulate, bool through_xs = true);

// grad_out as a value: a constant node "grad_out" (the seed, recording that it is y's gradient)
// and the walk above, the seed dropped too if the pass throws.
template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out,
                             const Accumulate<T>& accumulate);

}  // namespace xgrad
