// grad(): vector-Jacobian products as graph nodes.
#pragma once

#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// One Var per x: the gradient of sum(grad_out * y) w.r.t. x, i.e. the vector-Jacobian product
// grad_out^T dy/dx. grad_out defaults to ones (the gradient of sum(y)) and must have y's shape.
// The VJP rules build ordinary backward nodes in y's graph, so a result can be exported,
// replayed and differentiated again. A node used more than once receives the sum of its
// contributions. If y does not depend on x, the result is a constant of zeros.
// Throws xgrad::error for an empty Var, a Var of another graph, or grad_out of the wrong shape.
// A call that throws, there or in a VJP rule (e.g. one that reads a value keep_only released),
// adds no node.
template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs);
template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out);
// grad_out as a node: makes the gradient a function of it (for gradcheck, or a VJP of a VJP).
template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out);

}  // namespace xgrad
