// Attention with the variants of lib/variants.hpp combined: grouped-query heads, the tanh soft-cap,
// an additive bias (ALiBi), a causal or sliding-window mask and a mask of the caller's, softmax or
// sigmoid weights; and a self-attention block with RoPE and QK-norm besides. Composed of graph
// nodes (no hand-written backward), or, with AttentionImpl::fused, one flash_attention node for
// the variants it has. docs/attention-variants.md gives the formulas and papers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/names.hpp>
#include <xgrad/lib/attention.hpp>
#include <xgrad/lib/multi_head.hpp>
#include <xgrad/lib/variants.hpp>

namespace xgrad {

// How the scores become weights.
enum class AttentionWeights {
  softmax,  // softmax over the keys: each row sums to 1 (0 for a row with every key masked)
  // sigmoid(s + b) of each score on its own (Ramapuram et al. 2024, "Theory, Analysis, and Best
  // Practices for Sigmoid Self-Attention"): rows need not sum to 1; b = -log(T_k) by default.
  sigmoid,
};

// "softmax", "sigmoid": for messages and metadata.
inline constexpr EnumName<AttentionWeights> attention_weights_names[] = {
    {AttentionWeights::softmax, "softmax"}, {AttentionWeights::sigmoid, "sigmoid"}};
inline const char* attention_weights_name(AttentionWeights weights) { return name_in(attention_weights_names, weights); }

// What variant_attention computes, beyond scaled dot-product attention. Every member has a
// default that leaves it out: VariantOptions<T>{} is the attention of lib/attention.hpp.
template <class T>
struct VariantOptions {
  std::optional<double> scale;  // of q k^T: 1/sqrt(d_k) unless given; finite
  double softcap = 0;           // > 0: the scores become cap tanh(s / cap) (Gemma 2); 0: none
  Var<T> bias;                  // added to the scores, broadcasting to them (ALiBi: alibi_bias); empty: none
  // 1 (nonzero) where a query may attend to a key, 0 where not; broadcasting to the scores: a
  // mask leaf (Graph::mask) of padding, or any node or constant of 1 and 0; empty: none. With
  // impl fused, a key-padding mask (B..., 1, T_k) only (key_padding_mask's (B, 1, 1, T_k)).
  Var<T> mask;
  // The causal mask (causal_mask(T_q, T_k): query i sees the keys j <= i + T_k - T_q), and with
  // window W > 0 its sliding window of W keys (sliding_window_mask(T_q, T_k, W)); a window needs
  // causal (a bidirectional window is not supported). Allowed where mask allows too.
  bool causal = false;
  std::size_t window = 0;
  AttentionWeights weights = AttentionWeights::softmax;
  std::optional<double> sigmoid_bias;  // sigmoid only: b of sigmoid(s + b); -log(T_k) unless given; finite
  // composed: the nodes variant_attention_nodes lists, each inspectable, memory O(T_q T_k).
  // fused: one flash_attention node (ops/flash_attention.hpp), memory O((T_q + T_k) d), for
  // softmax weights, soft-cap, causal, window, a key-padding mask and GQA; no bias, no sigmoid.
  AttentionImpl impl = AttentionImpl::composed;
};

// The nodes of a variant attention, to inspect (the attention weights for diagnostics). With
// impl fused, scores, logits and weights are empty Vars (flash_attention holds no T_q x T_k array)
// and output is flash_attention's out.
template <class T>
struct VariantAttentionNodes {
  Var<T> scores;   // scale q k^T (B..., Hq, T_q, T_k)
  Var<T> logits;   // what softmax or sigmoid reads: the scores capped, biased, and (softmax) -inf
                   // where masked; (sigmoid) + b
  Var<T> weights;  // the attention weights (B..., Hq, T_q, T_k): a softmax node, or for sigmoid the
                   // sigmoid node or, with a mask or causal, the apply_mask node after it
  Var<T> output;   // weights v (B..., Hq, T_q, d_v)
};

// Attention of Hq query heads over Hkv key/value heads, Hkv dividing Hq, for
//   q (B..., Hq, T_q, d_k), k (B..., Hkv, T_k, d_k), v (B..., Hkv, T_k, d_v) -> (B..., Hq, T_q, d_v),
// the head axis third from last and the leading axes B... equal in all three:
//   k', v' = repeat_kv(k, Hq / Hkv), repeat_kv(v, Hq / Hkv)   (query head h reads kv head h / (Hq / Hkv))
//   s  = matmul(scale(q, scale), transpose(k'))                (B..., Hq, T_q, T_k)
//   s  = softcap(s, cap)                                       if softcap > 0
//   s  = s + bias                                              if bias
//   m  = mask, C, or logical_and(mask, C)                      C = a constant of causal_mask(T_q, T_k)
//                                                              (causal) or sliding_window_mask(T_q,
//                                                              T_k, W) (causal and window W)
//   softmax: w = softmax(apply_mask(s, m, -inf))               (the mask step of masked_attention)
//   sigmoid: w = apply_mask(sigmoid(s + b), m, 0)              masked weights exactly 0, and every
//                                                              gradient through them
//   out = matmul(w, v')
// Masked entries are 0 in the weights, forward and backward, in both; a query row with every
// key masked gives a zero output row and zero gradients (no NaN). The weights node of a softmax
// is a softmax node, so softmax_diagnostics (lib/diagnostics.hpp) finds it; that of sigmoid is
// not (rows need not sum to 1): attention_weights_diagnostics(nodes.weights, nodes.logits) gives
// the statistics of its rows normalised. The mask stays an input of logical_and, so a mask leaf
// set to a new value (set_value, replay) is read in either impl.
// With impl = AttentionImpl::fused the same out (within rounding) and gradients come from
//   out = flash_attention(q, k', v', scale, FlashMask{causal, mask, window}, softcap).out
// (k', v' as above), which never holds the scores: their 2^28-element limit does not apply.
// Throws xgrad::error, before its first node, naming the shapes: a rank < 3; leading axes, d_k
// or T_k that do not match; Hkv = 0 or not dividing Hq (both head counts named); T_k = 0; d_k = 0
// with the default scale; k', v' (and, composed, the scores) of more than max_array_elements =
// 2^28 elements; a bias or mask that does not broadcast to the scores or is of another graph; a
// scale, softcap (< 0 or not finite) or sigmoid_bias that is not finite; sigmoid_bias with
// softmax weights; a window without causal. With impl fused, also a bias, sigmoid weights, or a
// mask that is not a key-padding mask (B..., 1, T_k), each naming AttentionImpl::composed (or,
// for a causal or window constant as mask, the causal and window options) as what to use.
template <class T>
VariantAttentionNodes<T> variant_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                                 const VariantOptions<T>& options = {});

template <class T>
Var<T> variant_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, const VariantOptions<T>& options = {}) {
  return variant_attention_nodes(q, k, v, options).output;
}

// The projections of a variant attention block, as AttentionParams with w_k, w_v of shape
// (d_model, d_kv) and b_k, b_v (d_kv), d_kv = d_model kv_heads / heads (all (d_model, d_model)
// when kv_heads = heads: VariantAttentionParams<T>(attention_params(...)) fits), and QK-norm's gains.
template <class T>
struct VariantAttentionParams : AttentionParams<T> {
  VariantAttentionParams() = default;
  explicit VariantAttentionParams(const AttentionParams<T>& projections) : AttentionParams<T>(projections) {}
  Var<T> q_gain, k_gain;  // (d_head): one gain per head dimension, shared by the heads; with QK-norm only
};

// Parameters "<prefix>.w_q", "<prefix>.b_q", ... as attention_params makes them (Glorot-uniform
// weights, seed, seed + 1, ... one per matrix; zero biases), w_k, w_v (d_model, d_kv), and with
// qk_norm "<prefix>.q_gain", "<prefix>.k_gain" of ones (d_head). Throws xgrad::error naming the
// sizes if heads = 0 or does not divide d_model, or kv_heads = 0 or does not divide heads.
template <class T>
VariantAttentionParams<T> variant_attention_params(Graph<T>& g, std::size_t d_model, std::size_t heads,
                                                   std::size_t kv_heads, bool qk_norm, std::uint64_t seed,
                                                   const std::string& prefix = "attn");

// What a variant attention block adds around variant_attention.
template <class T>
struct VariantBlockOptions {
  bool rope = false;            // rope(q), rope(k) at rope_positions(g, T), after QK-norm
  double rope_base = 10000;
  QkNorm qk_norm = QkNorm::none;  // of q and k per head over d_head, gains q_gain and k_gain
  double qk_norm_eps = 1e-5;
  bool alibi = false;           // adds alibi_bias(g, heads, T, T) to attention.bias (or is the bias)
  // scale, softcap, bias, mask (broadcasting to (B, heads, T, T)), causal, window, weights and
  // impl, as variant_attention takes them (alibi is a bias: refused with impl fused)
  VariantOptions<T> attention;
};

// The nodes of a block: those of its attention (scores, logits, weights empty with impl fused),
// and its output.
template <class T>
struct VariantBlockNodes {
  VariantAttentionNodes<T> attention;  // q, k after QK-norm and RoPE; attention.output (B, heads, T, d_head)
  Var<T> output;                       // (B, T, d_model)
};

// Multi-head self-attention of x (B, T, d_model) with `heads` query heads of d_head = d_model /
// heads and kv_heads key/value heads (GQA; kv_heads = heads is multi-head attention, 1 is MQA):
//   Q = x w_q + b_q  split into (B, heads, T, d_head)       (reshape, permute: as multi_head_attention)
//   K = x w_k + b_k, V = x w_v + b_v  split into (B, kv_heads, T, d_head)
//   Q, K = qk_norm(Q, q_gain), qk_norm(K, k_gain)          with qk_norm
//   Q, K = rope(Q, p), rope(K, p), p = rope_positions(g, T) with rope
//   A = variant_attention(Q, K, V, attention)             with alibi, its bias + alibi_bias(g, heads, T, T)
//   out = merge(A) w_o + b_o                               (B, T, d_model)
// Its nodes carry the named scope of its parameters' prefix, as multi_head_attention's.
// Throws xgrad::error, before its first node, naming the sizes and shapes: x not (B, T, d_model)
// with T, d_model > 0; heads = 0 or not dividing d_model; kv_heads = 0 or not dividing heads; an
// odd d_head with rope (rope pairs dimension i with i + d_head/2); a parameter empty, of another
// graph or of the wrong shape (q_gain, k_gain with qk_norm only); a rope_base not finite and > 0;
// a qk_norm_eps not finite and >= 0; alibi with impl fused; and as variant_attention for the
// attention options.
template <class T>
VariantBlockNodes<T> variant_multi_head_attention_nodes(const Var<T>& x, const VariantAttentionParams<T>& params,
                                                        std::size_t heads, std::size_t kv_heads,
                                                        const VariantBlockOptions<T>& options = {});

template <class T>
Var<T> variant_multi_head_attention(const Var<T>& x, const VariantAttentionParams<T>& params, std::size_t heads,
                                    std::size_t kv_heads, const VariantBlockOptions<T>& options = {}) {
  return variant_multi_head_attention_nodes(x, params, heads, kv_heads, options).output;
}

}  // namespace xgrad
