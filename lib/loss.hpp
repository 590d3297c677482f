// Losses, composed of graph nodes (no hand-written backward), and one_hot for class labels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Cross-entropy of `targets` (probabilities, e.g. one_hot(labels)) under softmax(logits) along
// `axis`, averaged over every other position: a scalar of shape (),
//   loss = -mean(sum(targets * log_softmax(logits, axis), axis)).
// Built from log_softmax, mul, sum, mean and scale nodes; the gradient w.r.t. the logits is
// (softmax(logits) - targets) / (number of positions) when each target row sums to 1.
// Logits must be finite where a target is nonzero; an entry of -inf under a target of 0 gives
// 0 * -inf = NaN, so mask logits by other means (the form with class labels below has no such
// product). Throws xgrad::error naming both shapes unless logits and targets have one shape,
// naming the Var if one is empty or of another graph than the other, naming the node if targets
// is an index leaf (class labels take the form with options below), or naming the axis if it is
// out of range or empty; a rejected call adds no node.
template <class T>
Var<T> cross_entropy(const Var<T>& logits, const Var<T>& targets, long axis = -1);

// How a loss reduces its per-position losses: their mean, their sum, or none (the array of them).
enum class Reduction { mean, sum, none };

// The options of cross_entropy with class labels, PyTorch's (torch.nn.functional.cross_entropy):
//   ignore_index     a label value whose positions count for nothing: loss 0, no gradient, and
//                    left out of the mean's divisor. PyTorch's default is -100; here none unless
//                    given, so that a label of -100 is an error, not silently ignored.
//   weights          one weight per class, (C) (PyTorch's `weight`): a position's loss is scaled
//                    by its label's weight, and the mean divides by the sum of the weights of the
//                    labels kept (not by their count).
//   label_smoothing  eps in [0, 1]: the target is (1 - eps) one_hot(label) + eps / C everywhere.
//   reduction        mean (default), sum, or none.
template <class T>
struct CrossEntropyOptions {
  std::optional<std::int64_t> ignore_index;
  std::optional<xt::xarray<T>> weights;
  double label_smoothing = 0;
  Reduction reduction = Reduction::mean;
};

// Cross-entropy of class labels under softmax(logits) along the last axis, as PyTorch 1.13's
// F.cross_entropy(logits, labels, weight, ignore_index, reduction, label_smoothing) with class
// indices, but with the class axis last: logits (N..., C) and labels an index leaf
// (Graph::indices, int64) of shape (N...), any number of N axes (none: logits (C), one label).
// Legend: C classes, p a position of N..., y_p its label, w_c the class weights (1 without
// weights), eps the label smoothing, kept the positions whose label is not ignore_index,
// logp = log_softmax(logits, -1). At each position, 0 where p is ignored,
//   nll_p = -w_{y_p} logp[p, y_p],   smooth_p = -sum_c w_c logp[p, c]              (p kept)
// and the result is (1 - eps) R(nll) + (eps / C) R(smooth), R the reduction:
//   none: the array itself, of shape (N...);   sum: sum_p, shape ();
//   mean: sum_p / W, shape (), W = sum_{p kept} w_{y_p} (without weights: the count kept).
// So with every label ignored the mean is 0 / 0 = NaN, as PyTorch's, while sum is 0 and the
// gradient w.r.t. the logits is 0 for all three, as PyTorch's (an ignored position takes none,
// even from an infinite or NaN upstream gradient). Likewise the mean is NaN (and its gradient
// NaN) where the kept labels' weights sum to 0, smoothing or not.
// The labels are read by the graph's nodes whenever they run: after set_value(labels, new int64
// array of the same shape) a replay() gives the new batch's loss and gradients. Built from
// log_softmax, take_label (the label's entry, 0 at ignore_index; its VJP the scatter
// take_label_vjp), mul, add, scale, neg, sum, broadcast_to, mean and div nodes, with the weights
// as a constant leaf; no hand-written backward. Without ignore_index, weights and smoothing and with the mean
// it is the probability form above of one_hot(labels), to rounding.
// Throws xgrad::error before adding any node: naming the Var if one is empty or of another graph;
// naming the node if labels is not an index leaf; naming both shapes if logits has rank 0 or
// labels is not logits' shape without its last axis, or if weights is not (C); naming the value
// if label_smoothing is not in [0, 1] (NaN included); and, naming the label's value and
// position, for a label outside [0, C) that is not ignore_index ("cross_entropy: label 7 at
// labels[1, 0] is outside the classes [0, 5)"). The take_label nodes check the labels each time
// they run: a replay after set_value of such a label throws "take_label (node 5): label 7 at
// ..." (the nodes before it then hold the new batch's values, those after it the old ones, until
// a replay with good labels).
template <class T>
Var<T> cross_entropy(const Var<T>& logits, const Var<T>& labels, const CrossEntropyOptions<T>& options);

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
