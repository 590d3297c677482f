// Losses, composed of graph nodes (no hand-written backward), and one_hot for class labels.
#pragma once

#include <cstddef>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Cross-entropy of `targets` (probabilities, e.g. one_hot(labels)) under softmax(logits) along
// `axis`, averaged over every other position: a scalar of shape (),
//   loss = -mean(sum(targets * log_softmax(logits, axis), axis)).
// Built from log_softmax, mul, sum, mean and scale nodes; the gradient w.r.t. the logits is
// (softmax(logits) - targets) / (number of positions) when each target row sums to 1.
// Logits must be finite where a target is nonzero; an entry of -inf under a target of 0 gives
// 0 * -inf = NaN, so mask logits by other means. Throws xgrad::error naming both shapes unless
// logits and targets have one shape, naming the Var if one is empty or of another graph than
// the other, or naming the axis if it is out of range or empty; a rejected call adds no node.
template <class T>
Var<T> cross_entropy(const Var<T>& logits, const Var<T>& targets, long axis = -1);

// Mean squared error, mean((prediction - target)^2) over every element: a scalar of shape ().
// Built from add, scale, mul and mean nodes. Throws xgrad::error naming both shapes unless they
// are one shape, or naming the Var if one is empty or of another graph than the other; a
// rejected call adds no node.
template <class T>
Var<T> mse_loss(const Var<T>& prediction, const Var<T>& target);

// labels of any shape -> labels.shape + (classes): 1 at each label's class, 0 elsewhere.
// Throws xgrad::error naming the label and its index if a label is not below `classes`, or
// naming the shape, before allocating, if the result would hold more than max_array_elements =
// 2^28 elements (axes of length 0 counted as 1).
template <class T>
xt::xarray<T> one_hot(const xt::xarray<std::size_t>& labels, std::size_t classes);

}  // namespace xgrad
