// flash_attention: scaled dot-product attention as one node whose memory grows with T, not T^2.
#pragma once

#include <optional>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// The two outputs of a flash_attention node, and the three of its VJP.
template <class T>
struct FlashOutputs {
  Var<T> out, lse;
};
template <class T>
struct FlashGrads {
  Var<T> grad_q, grad_k, grad_v;
};

// The masks of the fused attention: scores they forbid are -inf before the online softmax,
// exactly as apply_mask(scores, mask, -inf) before softmax in the composed graph.
//   causal:   query i (of T_q) may attend to key j when j <= i' = i + T_k - T_q (lib/attention.hpp's
//             causal_mask: the queries aligned to the last keys). No input: an attribute; whole
//             key tiles it forbids are skipped, forward and backward.
//   window:   0 (none), or W > 0: the causal sliding window of W keys (Longformer's, Beltagy et
//             al. 2020, made causal as in Mistral 7B, Jiang et al. 2023): query i may attend to
//             key j when i' - W < j <= i', itself and the W - 1 keys before it (lib/attention.hpp's
//             sliding_window_mask). It needs causal = true as well: a window is causal here, and
//             window without causal is refused rather than taken for a bidirectional window,
//             which is not supported. W >= T_k is the causal mask. Key tiles wholly before a query
//             tile's window are skipped too, so the work grows with T_q (W + tile), not T_q T_k.
//   key_mask: empty, or a key-padding mask, nonzero where the key may be attended, of a shape
//             broadcasting to (B..., 1, T_k): rank >= 2, the query axis 1, the last axis T_k,
//             each batch axis 1 or equal (e.g. (B, 1, 1, T_k) for q (B, H, T_q, d_k)). A mask
//             leaf (Graph::mask) or any node of 1 and 0; one more input of the node, never
//             differentiated (its gradient is zeros, as apply_mask's mask). Key tiles past a
//             sequence's last allowed key are skipped. It combines with causal and window: a key
//             is allowed where every mask allows it.
// None is ever expanded to T_q x T_k (but in the second-order rule, see flash_attention_vjp).
template <class T>
struct FlashMask {
  bool causal = false;
  Var<T> key_mask;
  std::size_t window = 0;
};

// [out, lse] = flash_attention(q, k, v, scale, mask, softcap), one node with two outputs:
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> out (B..., T_q, d_v), lse (B..., T_q)
// out = softmax(c(scale * q k^T) + M) v and lse is each query row's logsumexp of its scaled,
// capped, masked scores, lse = log(sum_j exp(c(scale * q_i . k_j) + M_ij)), M_ij = 0 where the
// mask allows key j for query i and -inf where it forbids it. c is the identity when softcap = 0
// and the tanh logit soft-cap of Gemma 2 (Gemma Team 2024) when softcap = C > 0:
// c(s) = C tanh(s / C), which bounds every score to (-C, C) and is s to first order for |s| << C.
// The forward walks key tiles with an online softmax (FlashAttention-2): no T_q x T_k array
// exists, only one tile of scores per call. Its VJP is one flash_attention_vjp node, which
// recomputes the weights tile by tile from q, k and lse.
// attention(q, k, v, AttentionImpl::fused) is its out.
// A row whose scores are all -inf (every key masked, or infinite inputs) has out 0 and lse
// -inf, and every gradient through it is exactly 0, as the composed masked softmax gives.
// Non-finite values in v at a masked key: the composed graph's 0 weight times inf gives NaN,
// and so does the fused one within a tile it computes; a tile it skips reads no v at all.
// Throws xgrad::error naming the shapes when a rank is < 2, the batch axes differ, d_k of q and k
// or T_k of k and v differ, T_k = 0, the key mask is not of the form above (other masks need the
// composed attention) or of another graph; naming the value when the scale is not finite, the
// soft-cap is neither 0 nor finite and > 0 (NaN, inf, negative), or a window comes without causal.
template <class T>
FlashOutputs<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale,
                                const FlashMask<T>& mask = {}, double softcap = 0.0);

// [grad_q, grad_k, grad_v] = flash_attention_vjp(q, k, v, out, lse, grad_out, grad_lse, scale, mask, softcap),
// the VJP of flash_attention as one node with three outputs, of q's, k's and v's shapes. out and
// lse are flash_attention(q, k, v, scale, mask, softcap), grad_out (B..., T_q, d_v) and grad_lse
// (B..., T_q) the gradients w.r.t. them. Memory: one tile of weights and one of their gradients
// at a time (and, with a soft-cap, one of the cap's derivative).
// Its own VJP (second order) is the composed graph's: matmul, scale, tanh (the soft-cap as
// scale(tanh(scale(s, 1/C)), C)), apply_mask, softmax, log_softmax and friends, differentiated by
// the ordinary backward pass; there the causal or windowed mask is a (T_q, T_k) constant node
// (second order alone holds T_q x T_k arrays, as the composed graph does). It throws
// xgrad::error unless out and lse are the outputs of the flash_attention node of the same q, k,
// v, scale, mask and soft-cap.
// Throws xgrad::error naming the shapes when q, k, v, the mask or the soft-cap are invalid as
// for flash_attention or out, lse, grad_out, grad_lse do not have the shapes of its outputs.
template <class T>
FlashGrads<T> flash_attention_vjp(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& out,
                                  const Var<T>& lse, const Var<T>& grad_out, const Var<T>& grad_lse, double scale,
                                  const FlashMask<T>& mask = {}, double softcap = 0.0);

namespace detail {

// Rows of queries and of keys per tile, forward and backward: a tile of scores is at most
// 256 x 512 numbers (1 MiB in float64), large enough for GEMM to run near its peak and small
// enough to stay in cache.
inline constexpr std::size_t flash_tile_q = 256, flash_tile_k = 512;

// At least n elements of scratch, kept by the calling thread for its next call (one buffer per
// T and Slot). Freeing and allocating megabytes per call would cost page faults and, with
// worker threads, TLB shootdowns: 3 ms per call at T = 512 on the 2-core VM of bench/RESULTS.md.
template <class T, int Slot>
T* thread_scratch(std::size_t n) {
  thread_local std::vector<T> buffer;
  if (buffer.size() < n) buffer.resize(n);
  return buffer.data();
}

// The sizes of one attention problem, checked: batch = the product of the batch axes.
struct AttentionDims {
  Shape batch_axes;
  std::size_t batch, t_q, t_k, d_k, d_v;
  Shape out_shape() const {  // (B..., T_q, d_v)
    Shape s = batch_axes;
    s.push_back(t_q);
    s.push_back(d_v);
    return s;
  }
  Shape lse_shape() const {  // (B..., T_q)
    Shape s = batch_axes;
    s.push_back(t_q);
    return s;
  }
};

// From the shapes of q, k and v; throws xgrad::error naming them (and `op`) if they do not fit.
AttentionDims attention_dims(const Shape& q, const Shape& k, const Shape& v);
// Throws xgrad::error if the scale is not finite.
void check_attention_scale(double scale);
// Throws xgrad::error naming the value unless the soft-cap is 0 (none) or finite and > 0.
void check_attention_softcap(double softcap);
}  // namespace detail

}  // namespace xgrad
