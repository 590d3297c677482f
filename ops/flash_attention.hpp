// flash_attention: scaled dot-product attention as one node whose memory grows with T, not T^2.
#pragma once

#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// packed = flash_attention(q, k, v, scale):
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> packed (B..., T_q, d_v + 1)
// packed[..., :d_v] is out = softmax(scale * q k^T) v and packed[..., d_v] is each query row's
// logsumexp of its scaled scores, lse = log(sum_j exp(scale * q_i . k_j)). The forward walks key
// tiles with an online softmax (FlashAttention-2): no T_q x T_k array exists, only one tile of
// scores per call. Its VJP is one flash_attention_vjp node, which recomputes the weights tile by
// tile from q, k and lse. attention(q, k, v, AttentionImpl::fused) slices out of packed.
// A row whose scores are all -inf (possible only for infinite inputs) has out 0 and lse -inf,
// as the composed softmax gives.
// Throws xgrad::error naming the shapes when a rank is < 2, the batch axes differ, d_k of q and k
// or T_k of k and v differ, T_k = 0, or the scale is not finite.
template <class T>
Var<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale);

// grads = flash_attention_vjp(q, k, v, packed, grad_packed, scale), the VJP of flash_attention:
//   grads (B..., T_q d_k + T_k d_k + T_k d_v): per batch index, grad_q (T_q, d_k), grad_k
//   (T_k, d_k) and grad_v (T_k, d_v), row-major, one after the other.
// packed is flash_attention(q, k, v, scale) and grad_packed the gradient w.r.t. it (the gradient
// w.r.t. out in its first d_v columns, w.r.t. lse in its last). Memory: one tile of weights and
// one of their gradients at a time. Its own VJP (second order) is the composed graph's: matmul,
// softmax, softmax_vjp and friends, differentiated by the ordinary backward pass; it throws
// xgrad::error unless packed is the flash_attention node of the same q, k, v and scale.
// Throws xgrad::error naming the shapes when q, k, v are invalid as for flash_attention or
// packed and grad_packed do not have the shape (B..., T_q, d_v + 1).
template <class T>
Var<T> flash_attention_vjp(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& packed,
                           const Var<T>& grad_packed, double scale);

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
struct FlashDims {
  Shape batch_axes;
  std::size_t batch, t_q, t_k, d_k, d_v;
  std::size_t grads_size() const { return t_q * d_k + t_k * d_k + t_k * d_v; }
  Shape packed_shape() const {  // (B..., T_q, d_v + 1)
    Shape s = batch_axes;
    s.push_back(t_q);
    s.push_back(d_v + 1);
    return s;
  }
};

// From the shapes of q, k and v; throws xgrad::error naming them (and `op`) if they do not fit.
FlashDims flash_dims(const Shape& q, const Shape& k, const Shape& v);
// Throws xgrad::error if the scale is not finite.
void check_flash_scale(double scale);
// The work (Op::work) of the (B..., T_q, T_k) weights that the forward or the VJP computes
// tile by tile, beyond the elements of its inputs and output; q, k, v first in x, valid shapes.
enum class FlashPass { forward, vjp };
double flash_weights_work(const std::vector<Shape>& x, FlashPass pass);

}  // namespace detail

}  // namespace xgrad
