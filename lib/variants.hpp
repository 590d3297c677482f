// The building blocks of attention variants that today's experimental models are made of:
// rotary position embeddings (an op of their own, ops/rope.hpp, included here), and composed of
// graph nodes (no hand-written backward) grouped-query heads, ALiBi biases, the tanh soft-cap
// and QK-norm. lib/variant_attention.hpp combines them.
// docs/attention-variants.md gives each one's formula and paper.
#pragma once

#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/names.hpp>
#include <xgrad/ops/rope.hpp>

namespace xgrad {

// rope(x, positions, base): rotary position embeddings, one op (ops/rope.hpp).

// The positions 0, 1, ..., T - 1 as a constant leaf of shape (T), for rope.
template <class T>
Var<T> rope_positions(Graph<T>& g, std::size_t t);

// Grouped-query and multi-query attention (Ainslie et al. 2023, GQA; Shazeer 2019, MQA): the
// Hkv key or value heads of x (B..., Hkv, T, d), the head axis third from last, each repeated for
// `groups` consecutive query heads: y (B..., Hkv groups, T, d), y[..., h, :, :] = x[..., h /
// groups, :, :], as torch.repeat_interleave(x, groups, dim=-3). Nodes: reshape to (B..., Hkv, 1,
// T, d), broadcast_to (B..., Hkv, groups, T, d), reshape; so the gradient of a kv head is the
// sum of its group's. groups = 1 returns x itself (no node). Throws xgrad::error naming the
// shape for x of rank < 3, groups = 0, and a y of more than max_array_elements = 2^28 elements.
template <class T>
Var<T> repeat_kv(const Var<T>& x, std::size_t groups);

// ALiBi (Press et al. 2022, "Train Short, Test Long"): the slope m_h of each of `heads` heads,
// exactly as the reference get_slopes of github.com/ofirpress/attention_with_linear_biases: for
// n a power of 2, m_h = s^(h+1) with s = 2^(-8/n) (computed as that code does, start *
// ratio**h, to the bit); otherwise the slopes of the largest power of 2 p < n followed by every
// other slope of 2p, its first n - p (n = 6: 2^-2, 2^-4, 2^-6, 2^-8, 2^-1, 2^-3). Throws
// xgrad::error for heads = 0 or more than max_array_elements.
std::vector<double> alibi_slopes(std::size_t heads);

// The ALiBi bias, a constant leaf "alibi" of shape (heads, T_q, T_k) to add to the scores:
// bias[h, i, j] = -m_h (i' - j), i' = i + T_k - T_q the position of query i among the keys (the
// causal alignment of causal_mask: the queries are the last T_q positions). It broadcasts over
// (B, heads, T_q, T_k) scores. The reference code adds m_h j instead, which differs by -m_h i'
// per row: the same after a softmax, not after a sigmoid. Keys after the query (j > i') get a
// positive bias: ALiBi is for causal attention, with causal_mask. Throws xgrad::error for
// heads = 0 and, before allocating, a bias of more than max_array_elements elements.
template <class T>
Var<T> alibi_bias(Graph<T>& g, std::size_t heads, std::size_t t_q, std::size_t t_k);

// The tanh logit soft-cap of Gemma 2 (Gemma Team 2024): y = cap tanh(x / cap), built as
// scale(tanh(scale(x, 1 / cap)), cap). |y| < cap; y ~ x for |x| << cap. Throws xgrad::error
// for a cap that is not finite and > 0.
template <class T>
Var<T> softcap(const Var<T>& x, double cap);

// QK-norm (Dehghani et al. 2023, ViT-22B; Wortsman et al. 2023): which normalisation qk_norm
// applies to the queries and keys of each head over d_head before the scores.
enum class QkNorm {
  none,   // q and k as they are
  layer,  // layer_norm(x, gain, 0, eps): bias-free, as ViT-22B's LayerNorms
  rms,    // rms_norm(x, gain, eps): x / sqrt(mean(x^2) + eps) gain, as OLMo 2's and Gemma 3's
};

// x (..., d_head) normalised over its last axis by `kind`, times gain (d_head): for layer,
// (x - mean) / sqrt(var + eps) gain (layer_norm with a zero beta constant); for rms,
// x / sqrt(mean(x^2) + eps) gain (rms_norm). none returns x
// (no node; gain unused and may be empty). Throws xgrad::error naming the shapes if gain is
// empty, of another graph or not (d_head), or as layer_norm does (rank 0, d_head = 0, eps).
template <class T>
Var<T> qk_norm(const Var<T>& x, const Var<T>& gain, QkNorm kind, double eps = 1e-5);

// "none", "layer", "rms": for messages and metadata.
inline constexpr EnumName<QkNorm> qk_norm_names[] = {
    {QkNorm::none, "none"}, {QkNorm::layer, "layer"}, {QkNorm::rms, "rms"}};
inline const char* qk_norm_name(QkNorm kind) { return name_in(qk_norm_names, kind); }

}  // namespace xgrad
