// flash_attention: scaled dot-product attention as one node whose memory grows with T, not T^2.
#pragma once

#include <optional>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

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

// [out, lse] = flash_attention(q, k, v, scale), one node with two outputs:
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> out (B..., T_q, d_v), lse (B..., T_q)
// out = softmax(scale * q k^T) v and lse is each query row's logsumexp of its scaled scores,
// lse = log(sum_j exp(scale * q_i . k_j)). The forward walks key tiles with an online softmax
// (FlashAttention-2): no T_q x T_k array exists, only one tile of scores per call. Its VJP is
// one flash_attention_vjp node, which recomputes the weights tile by tile from q, k and lse.
// attention(q, k, v, AttentionImpl::fused) is its out.
// A row whose scores are all -inf (possible only for infinite inputs) has out 0 and lse -inf,
// as the composed softmax gives.
// Throws xgrad::error naming the shapes when a rank is < 2, the batch axes differ, d_k of q and k
// or T_k of k and v differ, T_k = 0, or the scale is not finite.
template <class T>
FlashOutputs<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale);

// [grad_q, grad_k, grad_v] = flash_attention_vjp(q, k, v, out, lse, grad_out, grad_lse, scale),
// the VJP of flash_attention as one node with three outputs, of q's, k's and v's shapes. out and
// lse are flash_attention(q, k, v, scale), grad_out (B..., T_q, d_v) and grad_lse (B..., T_q)
// the gradients w.r.t. them. Memory: one tile of weights and one of their gradients at a time.
// Its own VJP (second order) is the composed graph's: matmul, softmax, softmax_vjp and friends,
// differentiated by the ordinary backward pass; it throws xgrad::error unless out and lse are
// the outputs of the flash_attention node of the same q, k, v and scale.
// Throws xgrad::error naming the shapes when q, k, v are invalid as for flash_attention or
// out, lse, grad_out, grad_lse do not have the shapes of flash_attention's outputs.
template <class T>
FlashGrads<T> flash_attention_vjp(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& out,
                                  const Var<T>& lse, const Var<T>& grad_out, const Var<T>& grad_lse, double scale);

// The scale of a flash_attention op; nullopt for any other op (typed access for the VJP's check).
std::optional<double> flash_attention_scale(const Op& op);

// The ops from their exported attributes (ops/registry).
std::shared_ptr<const Op> make_flash_attention_op(const JsonCursor& attrs);
std::shared_ptr<const Op> make_flash_attention_vjp_op(const JsonCursor& attrs);

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
// The work (Op::work) of the (B..., T_q, T_k) weights that the forward or the VJP computes
// tile by tile, beyond the elements of its inputs and output; q, k, v first in x, valid shapes.
enum class FlashPass { forward, vjp };
double flash_weights_work(const std::vector<Shape>& x, FlashPass pass);

}  // namespace detail

}  // namespace xgrad
