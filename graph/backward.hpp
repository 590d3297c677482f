// Reverse-mode traversal: the vector-Jacobian product of y with grad_out, w.r.t. any nodes xs.
#pragma once

#include <functional>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Combines two gradient contributions to one node (an op from ops/, given by the caller: graph/
// knows no op by name).
template <class T>
using Accumulate = std::function<Var<T>(const Var<T>&, const Var<T>&)>;

// Walks the nodes between xs and y in reverse id order, calling each op's VJP rule with the
// gradient accumulated so far; contributions to a node used more than once are combined with
// `accumulate`. The nodes built have the role backward, and each gradient among them records
// whose gradient it is (Node::grad_of). Returns one Var
// per x: grad_out itself if x is y, a constant of zeros if y does not depend on x.
// Throws xgrad::error if a Var is empty or of another graph, or grad_out's shape is not y's.
// A pass that throws, there or in a VJP rule (one that reads a value keep_only released, say),
// adds no node: the nodes it built are dropped again.
// The checks backward() makes before it adds any node, for callers that add a seed node first.
template <class T>
void check_backward_args(const Var<T>& y, const std::vector<Var<T>>& xs, const Shape& grad_out_shape);

// With through_xs false, the walk stops at the xs: a gradient reaching an x is not passed on to
// the nodes it is computed from, so each result is the partial derivative with the xs taken as
// independent variables (a VJP rule built of nodes needs that when one input feeds another).
template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out,
                             const Accumulate<T>& accumulate, bool through_xs = true);

// grad_out as a value: a constant node "grad_out" (the seed, recording that it is y's gradient)
// and the walk above, the seed dropped too if the pass throws.
template <class T>
std::vector<Var<T>> backward(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out,
                             const Accumulate<T>& accumulate);

}  // namespace xgrad
