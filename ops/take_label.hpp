// take_label: the entry of each position's label along the last (class) axis, and its scatter VJP.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y[i...] = x[i..., labels[i...]], and y[i...] = 0 where labels[i...] == ignore_index: x (..., C),
// labels an index leaf (Graph::indices, int64) of shape L... -> y of labels' shape, as
// torch.gather(x, -1, labels[..., None])[..., 0] with PyTorch's ignore_index. x's leading axes
// broadcast to L... by numpy's rules (x (L..., C) itself, or (C) shared by every position: the
// class weights of a loss). The labels are read when the node runs, so a replay after set_value
// of new labels picks the new entries. The gradient w.r.t. x is
// take_label_vjp(grad_out, labels, C, ignore_index), summed to x's shape where x was broadcast;
// an ignored position gets none (0, also where grad_out is inf or NaN, as masked_fill's).
// Throws xgrad::error naming the shapes if x has rank 0 or its leading axes do not broadcast to
// labels'; if labels is not an index leaf; and, naming the label and its position
// ("labels[1, 3]"), for a label outside [0, C) that is not ignore_index, the first in row-major
// order (at a replay too: the nodes before it then hold the new batch's values, those after it
// the old ones).
template <class T>
Var<T> take_label(const Var<T>& x, const Var<T>& labels, std::optional<std::int64_t> ignore_index = std::nullopt);

// The VJP of take_label w.r.t. x, a scatter: y (L..., C) = 0, then y[i..., labels[i...]] =
// grad_out[i...] at every position whose label is not ignore_index (one entry per position: no
// two positions write one element). grad_out has labels' shape; classes is C. Its own VJP w.r.t.
// grad_out is take_label(grad_y, labels, ignore_index), so second order works. Throws as
// take_label does for the labels, and naming the shapes if grad_out is not of labels' shape or y
// would hold more than max_array_elements elements.
template <class T>
Var<T> take_label_vjp(const Var<T>& grad_out, const Var<T>& labels, std::size_t classes,
                      std::optional<std::int64_t> ignore_index = std::nullopt);

namespace detail {
// The check take_label and take_label_vjp make of their labels when they run, for a builder that
// makes it before its first node (cross_entropy): throws xgrad::error "label 7 at labels[1, 0] is
// outside the classes [0, 5)" (" and is not ignore_index -100" with one) for the first label in
// row-major order outside [0, classes) that is not ignore_index.
void check_labels(const xt::xarray<std::int64_t>& labels, std::size_t classes, std::optional<std::int64_t> ignore_index);
}  // namespace detail

}  // namespace xgrad
