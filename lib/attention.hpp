// Scaled dot-product attention, assembled from graph nodes.
#pragma once

#include <optional>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/ops/flash_attention.hpp>

namespace xgrad {

// Shapes, one legend: B... leading batch axes (none, (B), (B, H), ...), equal in q, k and v;
// T_q queries, T_k keys, d_k key width, d_v value width.
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> out (B..., T_q, d_v)
//
// out = softmax(scale * q k^T, axis = -1) v, scale = 1/sqrt(d_k) unless given, built from the
// nodes
//   qs = scale(q, scale); kt = transpose(k); scores = matmul(qs, kt); weights = softmax(scores);
//   out = matmul(weights, v).
// (scale q) k^T equals scale (q k^T) up to rounding and scales T_q x d_k numbers instead of
// T_q x T_k: no pass over the scores and no extra T_q x T_k array, forward or backward.
// scale = 1 gives the unscaled variant, for comparison (see softmax_diagnostics).
// No hand-written backward: grad() differentiates through those nodes.
//
// Throws xgrad::error, naming the shapes, when a rank is < 2, the batch axes differ, d_k of q
// and k differ, T_k of k and v differ, T_k = 0 (softmax over no keys) or d_k = 0 (1/sqrt(0)),
// the scores (B..., T_q, T_k) would hold more than max_array_elements = 2^28 elements (axes of
// length 0 counted as 1), or the Vars belong to different graphs; and when a given scale is not
// finite. Every check is made before the first node is added: a rejected call adds no node.
template <class T>
struct AttentionNodes {
  Var<T> scores;   // (B..., T_q, T_k), already scaled
  Var<T> weights;  // (B..., T_q, T_k), rows sum to 1 (0 for a row with every key masked)
  Var<T> output;   // (B..., T_q, d_v)
  Var<T> mask;     // masked attention only: the mask (a mask leaf, a node, or the constant "mask")
  Var<T> masked;   // masked attention only: the scores with -inf where the mask forbids
};

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                  std::optional<double> scale = std::nullopt);

// Which nodes attention() builds; both compute the same out and gradients (within rounding).
enum class AttentionImpl {
  // The five nodes above: every intermediate (scores, weights, their gradients) is a node value
  // to inspect. Memory O(T_q T_k). The default and the reference.
  composed,
  // out of [out, lse] = flash_attention(q, k, v, scale), one node with two outputs (ops/
  // flash_attention.hpp): tiles with an online softmax, forward and backward, so no T_q x T_k
  // array is ever held. Memory O((T_q + T_k) d) per batch index; no scores or weights to inspect.
  fused,
};

// Fused attention: the nodes of AttentionImpl::fused. Same checks and messages as attention.
// The masks it takes (FlashMask, ops/flash_attention.hpp): causal, its sliding window, and a key-padding
// mask (B..., 1, T_k) (key_padding_mask's (B, 1, 1, T_k) for heads), none ever expanded to T_q x T_k;
// any other mask needs the composed attention (xgrad::error says so). The soft-cap: flash_attention.
template <class T>
Var<T> fused_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> scale = std::nullopt,
                       const FlashMask<T>& mask = {});

template <class T>
Var<T> attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, AttentionImpl impl = AttentionImpl::composed) {
  return impl == AttentionImpl::fused ? fused_attention(q, k, v) : attention_nodes(q, k, v).output;
}

template <class T>
Var<T> attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale,
                 AttentionImpl impl = AttentionImpl::composed) {
  return impl == AttentionImpl::fused ? fused_attention(q, k, v, scale) : attention_nodes(q, k, v, scale).output;
}

// Masked attention: out = softmax(scale * q k^T + M) v, M = 0 where the mask is true (the
// query may attend to the key) and -inf where it is false. The mask is a Var of the graph: a
// mask leaf (Graph::mask, replaced per batch with set_value), or any node whose value is 1
// (allowed) and 0 (forbidden), nonzero counting as allowed. Its shape broadcasts to the scores
// (B..., T_q, T_k) by numpy's rules: (T_q, T_k) for every batch index, (B, 1, 1, T_k) (see
// key_padding_mask) over heads and queries, (B, 1, T_q, T_k) over heads. An apply_mask node
// fills the forbidden scores with -inf before softmax (never a finite sentinel). A query row
// with no allowed key is defined: its weights and output row are 0 and every gradient through
// it is exactly 0. No NaN appears for finite inputs. Throws xgrad::error as attention does,
// naming the mask if it is empty or of another graph, and both shapes if it does not broadcast.
template <class T>
AttentionNodes<T> masked_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& mask,
                                         std::optional<double> scale = std::nullopt);

template <class T>
Var<T> masked_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& mask) {
  return masked_attention_nodes(q, k, v, mask).output;
}

// The same with a fixed mask: it becomes a constant node "mask" of 1 and 0, which set_value
// cannot reach and replay() never changes. For masks that are the same for every batch, such as
// causal_mask; a mask that changes per batch (padding) must be a mask leaf (Graph::mask) and the
// overloads above, or every replay keeps the first batch's mask.
template <class T>
AttentionNodes<T> masked_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                         const xt::xarray<bool>& mask, std::optional<double> scale = std::nullopt);

template <class T>
Var<T> masked_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, const xt::xarray<bool>& mask) {
  return masked_attention_nodes(q, k, v, mask).output;
}

// (T_q, T_k): query i may attend to key j when j <= i + T_k - T_q, i.e. to itself and the past
// when T_q = T_k, with the queries aligned to the last keys otherwise (so the first rows of a
// T_q > T_k mask allow no key). Throws xgrad::error naming the shape, before allocating, if
// the mask would hold more than max_array_elements = 2^28 elements (axes of 0 counted as 1).
xt::xarray<bool> causal_mask(std::size_t t_q, std::size_t t_k);

// (T_q, T_k): the causal sliding window of `window` keys (Longformer, Beltagy et al. 2020, made
// causal as in Mistral 7B, Jiang et al. 2023): query i may attend to key j when
// i' - window < j <= i', i' = i + T_k - T_q, itself and the window - 1 keys before it, aligned as
// causal_mask (window >= T_k gives causal_mask). The composed form of FlashMask's window:
// masked_attention with it equals the fused attention with {causal = true, window}. Throws
// xgrad::error if window = 0 (a window of no keys), or as causal_mask does.
xt::xarray<bool> sliding_window_mask(std::size_t t_q, std::size_t t_k, std::size_t window);

// (B, T_q, T_k), or (B, 1, T_q, T_k) with head_axis for (B, H, T_q, T_k) scores: in sequence b
// every query may attend to the keys j < lengths[b], the rest being padding. Throws xgrad::error
// if a length exceeds T_k, or naming the shape, before allocating, if the mask would hold more
// than max_array_elements = 2^28 elements (axes of length 0 counted as 1).
xt::xarray<bool> padding_mask(const std::vector<std::size_t>& lengths, std::size_t t_q, std::size_t t_k,
                              bool head_axis = false);

// (B, 1, 1, T_k): in sequence b the keys j < lengths[b] may be attended, by every head and
// query; it broadcasts to (B, H, T_q, T_k) scores, and the fused attention takes it (its memory
// stays O(T_k) per sequence). The value of a mask leaf: g.mask("pad", key_padding_mask(lengths,
// T)), then set_value(pad, key_padding_mask(next_lengths, T)) per batch. Throws xgrad::error as
// padding_mask does.
xt::xarray<bool> key_padding_mask(const std::vector<std::size_t>& lengths, std::size_t t_k);

namespace detail {
// True if the fixed mask is causal_mask(t_q, t_k), with leading axes of length 1 or not: what
// the fused attention computes from its causal flag.
bool is_causal_mask(const xt::xarray<bool>& mask, std::size_t t_q, std::size_t t_k);
// Throws xgrad::error, naming both shapes and what the fused attention takes, unless a mask of
// this shape is a key-padding mask for these scores (B..., T_q, T_k): (B..., 1, T_k) with each
// batch axis 1 or equal (fewer leading axes allowed).
void check_key_padding_shape(const Shape& scores, const Shape& mask);
// The checks of the scores (B..., T_q, T_k) that the attention builders make before their first
// node (multi_head_attention too, before its projections): at most max_array_elements, and
// the mask of this shape, if any, broadcasts to them. Throws xgrad::error naming the shapes.
void check_scores(const Shape& scores, const std::optional<Shape>& mask);
}  // namespace detail

}  // namespace xgrad
