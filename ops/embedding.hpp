// embedding: rows of a table picked by integer ids, and its scatter-add VJP.
#pragma once

#include <cstddef>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// y[i..., :] = table[ids[i...], :]: table (V, d), ids of any shape (a scalar and an empty array
// included) -> y (ids..., d), as torch.nn.functional.embedding. ids is either an index leaf
// (Graph::indices, int64) or a Var of the graph's dtype holding integers (a leaf whose values
// set_value replaces per batch, say). The gradient w.r.t. table is embedding_vjp(grad_out, ids,
// V); ids get none: an index leaf is never differentiated, and a Var of ids gets zeros (y is
// piecewise constant in them, as PyTorch gives indices no gradient).
// Throws xgrad::error naming the shapes if table is not a matrix or y would hold more than
// max_array_elements elements; and, naming the position ("ids[1, 3]") and the value, for an id
// that is not an integer (NaN and inf included), is negative, or is V or more. In a float32
// graph a Var of ids holds every integer only below 2^24 = 16777216 (2^24 + 1 rounds to 2^24),
// so an id of 2^24 or more is refused there (an index leaf holds any id). The ids are checked
// when the node runs: a replay after set_value of a bad batch throws at this node, with the
// nodes before it holding the new batch's values and those after it the old ones, until a
// replay with good ids.
template <class T>
Var<T> embedding(const Var<T>& table, const Var<T>& ids);

// The VJP of embedding w.r.t. its table, a deterministic scatter-add: y (V, d) = zeros, then
// y[ids[i...], :] += grad_out[i..., :] for each position in row-major order, so repeated ids sum
// in one fixed order whatever the thread count. grad_out is (ids..., d); rows is V. Its own VJP
// w.r.t. grad_out is embedding(grad_y, ids), so second order works. Throws as embedding does
// for the ids, and naming the shapes if grad_out is not (ids..., d) or y would hold more than
// max_array_elements elements.
template <class T>
Var<T> embedding_vjp(const Var<T>& grad_out, const Var<T>& ids, std::size_t rows);

}  // namespace xgrad
