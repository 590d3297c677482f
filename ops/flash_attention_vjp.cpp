// forward: [grad_q, grad_k, grad_v], the VJP of flash_attention, three outputs. With g = grad_out
//          and h = grad_lse: D = rowsum(g * out) - h, then for each tile of keys j and of queries i
//          that the masks leave (ops/flash_mask.hpp; M_ij = -inf where they forbid, so P_ij = 0)
//            P = exp(c(a Q_i K_j^T) + M_ij - lse_i)    the weights, recomputed (0 where lse_i = -inf)
//            grad_V_j += P^T g_i;  dP = g_i V_j^T;  dS = P * (dP - D_i) * c'(a Q_i K_j^T)
//            grad_Q_i += a dS K_j;  grad_K_j += a dS^T Q_i
//          with the soft-cap c(s) = C tanh(s / C), c'(s) = 1 - tanh^2(s / C) (c(s) = s, c' = 1
//          without one)
//          (rowsum(dP * P) = rowsum(g * out), a T_q x d_v pass, not T_q x T_k; and the gradient of
//          lse w.r.t. the scores is P, hence the - h).
// VJP:     the composed graph's: flash_attention built from scale, matmul, apply_mask, softmax,
//          log_softmax, add, slice and reshape nodes (and the soft-cap as scale, tanh, scale), its
//          VJP taken by the ordinary backward pass
//          (each op's own rule) for the seeds grad_out and grad_lse, and differentiated again for
//          the gradients of this node's three outputs. out and lse get no contribution: the
//          composition recomputes them from q, k and v; nor does the key mask (zeros where
//          wanted). An input that is also another (k = q) gets its whole gradient once. The
//          causal mask (with its window) is a (T_q, T_k) constant there: second order holds
//          T_q x T_k arrays.
// saves:   nothing beyond its inputs. Scratch: two tiles of weights (P and dS) per thread (and
//          one of c' with a soft-cap) and,
//          when threads split the key tiles of one batch index, a T_q x d_k grad_q for each
//          thread but the first; kept by the calling thread for the next call.
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/flash_mask.hpp>

#include <algorithm>
#include <limits>

#include <xtensor/xbuilder.hpp>

#include <xgrad/graph/backward.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>

namespace xgrad {

namespace {

using detail::flash_tile_q;
using detail::flash_tile_k;

// Key rows [j0, j0 + tile) of batch index b: adds those rows' share to gq (t_q, d_k) and writes
// rows [j0, j0 + tile) of gk (t_k, d_k) and gv (t_k, d_v), which start at 0. g (grad_out) is
// (t_q, d_v), lse (t_q); row_d holds D for each query row. p, ds and dc: scratch of three
// tiles (dc, for c', only with a soft-cap: cap > 0, inv_cap its inverse rounded to T). A tile of
// queries meets only the keys in [mask.key_begin, mask.key_end) (the rest have weights 0), as in
// the forward: the same rectangles of weights.
template <class T>
void flash_backward(const T* q, const T* k, const T* v, const T* lse_rows, const T* g, const T* row_d, T* gq, T* gk,
                    T* gv, const detail::AttentionDims& d, T alpha, T cap, T inv_cap, std::size_t b,
                    std::size_t tile_begin, std::size_t tile, const detail::FlashMaskRows<T>& mask, T* p, T* ds,
                    T* dc) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t dk = d.d_k, dv = d.d_v;
  for (std::size_t i0 = 0; i0 < d.t_q; i0 += flash_tile_q) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q - i0);
    // The keys of this tile that the query tile may attend: [j0, j0 + bk).
    const std::size_t j0 = std::max(tile_begin, mask.key_begin(i0)), key_end = std::min(tile_begin + tile, mask.key_end(b, i0, bq));
    if (key_end <= j0) continue;
    const std::size_t bk = key_end - j0;
    detail::gemm(false, true, bq, bk, dk, alpha, q + i0 * dk, dk, k + j0 * dk, dk, T(0), p, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        if (cap > 0) detail::soft_cap(p + r * bk, bk, cap, inv_cap, dc + r * bk);
        const T lse = lse_rows[i0 + r];
        if (lse == minus_inf) {  // a row with every score -inf (every key masked) has weights 0
          std::fill(p + r * bk, p + (r + 1) * bk, T(0));
        } else {
          mask.fill(p + r * bk, b, i0 + r, j0, bk);
          detail::row_exp(p + r * bk, lse, p + r * bk, bk, 1);
        }
      }
    });
    detail::gemm(true, false, bk, dv, bq, T(1), p, bk, g + i0 * dv, dv, T(1), gv + j0 * dv, dv);
    detail::gemm(false, true, bq, bk, dv, T(1), g + i0 * dv, dv, v + j0 * dv, dv, T(0), ds, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        detail::row_softmax_vjp(p + r * bk, ds + r * bk, row_d[i0 + r], ds + r * bk, bk, 1);
        if (cap > 0) {
          for (std::size_t j = 0; j < bk; ++j) ds[r * bk + j] *= dc[r * bk + j];  // through the cap
        }
      }
    });
    detail::gemm(false, false, bq, dk, bk, alpha, ds, bk, k + j0 * dk, dk, T(1), gq + i0 * dk, dk);
    detail::gemm(true, false, bk, dk, bq, alpha, ds, bk, q + i0 * dk, dk, T(1), gk + j0 * dk, dk);
  }
}

class FlashAttentionVjpOp final : public OpFor<FlashAttentionVjpOp, 3> {
 public:
  explicit FlashAttentionVjpOp(detail::FlashAttentionAttrs attrs) : m_attrs(attrs) {}

  std::string name() const override { return "flash_attention_vjp"; }
  // ONNX: the formulas of run_forward on whole arrays, p = exp(c(scale q k^T) + M - lse) (c by
  // onnx_soft_cap, M by onnx_flash_mask; 0 on rows whose lse is -inf, as here), grad_v = p^T g,
  // ds = p (g v^T - D) c', D = rowsum(g out) - grad_lse,
  // grad_q = scale ds k, grad_k = scale ds^T q. The T_q x T_k weights exist then: the memory
  // bound of the fused node is lost.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string &q = n.inputs[0], &k = n.inputs[1], &v = n.inputs[2], &out = n.inputs[3], &lse = n.inputs[4],
                      &g = n.inputs[5], &grad_lse = n.inputs[6];
    const std::size_t rank = n.input_shapes[0].size();
    const auto last = static_cast<std::int64_t>(rank - 1);
    const auto t = [&](const std::string& x) { return e.op("Transpose", {x}, {{"perm", onnx_swap_last_two(rank)}}); };
    const auto matmul = [&](const std::string& a, const std::string& b) { return e.op("MatMul", {a, b}); };
    const auto mul = [&](const std::string& a, const std::string& b) { return e.op("Mul", {a, b}); };
    const auto column = [&](const std::string& x) {  // (B..., T_q) -> (B..., T_q, 1)
      return e.op("Unsqueeze", {x, e.int64s({last})});
    };
    Shape scores = n.input_shapes[0];  // (B..., T_q, T_k)
    scores.back() = n.input_shapes[1][rank - 2];
    const auto alpha = [&](const Shape& shape) { return e.factor(m_attrs.scale, shape); };
    const std::string lse_col = column(lse);
    const detail::OnnxSoftCap capped = detail::onnx_soft_cap(e, mul(matmul(q, t(k)), alpha(scores)), scores, m_attrs.softcap, true);
    const std::string s = detail::onnx_flash_mask(e, n, 7, m_attrs.mask, capped.s);
    // Max(lse, lowest): a row whose lse is -inf has weights exp(-inf) = 0, not exp(NaN).
    const std::string p = e.op("Exp", {e.op("Sub", {s, e.op("Max", {lse_col, e.lowest()})})});
    const std::string row_d = e.op("Sub", {e.op("ReduceSum", {mul(g, out), e.int64s({last})}, {{"keepdims", std::int64_t{1}}}),
                                           column(grad_lse)});
    std::string ds = mul(p, e.op("Sub", {matmul(g, t(v)), row_d}));
    if (!capped.derivative.empty()) ds = mul(ds, capped.derivative);
    return {mul(matmul(ds, k), alpha(n.input_shapes[0])), mul(matmul(t(ds), q), alpha(n.input_shapes[1])), matmul(t(p), g)};
  }
  std::size_t arity() const override { return m_attrs.mask.key_mask ? 8 : 7; }
  Json attrs() const override { return m_attrs.json(); }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + detail::flash_weights_work(x, detail::FlashPass::vjp, m_attrs.mask, m_attrs.softcap > 0);
  }

  // x: q, k, v, out, lse, grad_out, grad_lse[, key mask].
  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    const detail::AttentionDims d = m_attrs.check(x, 7);
    const Shape out = d.out_shape(), lse = d.lse_shape();
    if (x[3] != out || x[4] != lse || x[5] != out || x[6] != lse) {
      throw error("out is " + shape_str(x[3]) + ", lse " + shape_str(x[4]) + ", grad_out " + shape_str(x[5]) +
                  ", grad_lse " + shape_str(x[6]) + "; for q " + shape_str(x[0]) + " and v " + shape_str(x[2]) +
                  " out and grad_out must be " + shape_str(out) + " (B..., T_q, d_v), lse and grad_lse " +
                  shape_str(lse) + " (B..., T_q)");
    }
    return {x[0], x[1], x[2]};
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const detail::AttentionDims d = detail::attention_dims(shape_of(*x[0]), shape_of(*x[1]), shape_of(*x[2]));
    const detail::FlashMaskRows<T> mask(d, m_attrs.mask, m_attrs.mask.key_mask ? x[7] : nullptr);
    const T* q = x[0]->data();
    const T* k = x[1]->data();
    const T* v = x[2]->data();
    const T* out = x[3]->data();
    const T* lse = x[4]->data();
    const T* g = x[5]->data();
    const T* g_lse = x[6]->data();
    const std::size_t tiles = (d.t_k + flash_tile_k - 1) / flash_tile_k, threads = detail::parallel_threads();
    // Threads split the batch indices when there are enough of them, each doing all its key
    // tiles; else the key tiles of one batch index at a time. Either way each writes its own
    // rows of grad_k and grad_v. With key tiles split, grad_q sums over all of them: each thread
    // but the first sums into a grad_q of its own, added in thread order afterwards (the result
    // depends on the thread count, not on timing).
    const bool by_batch = d.batch >= threads;
    const std::size_t chunks = std::min(threads, by_batch ? d.batch : tiles);
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    const std::size_t q_size = d.t_q * d.d_k, k_size = d.t_k * d.d_k, v_size = d.t_k * d.d_v;
    const std::size_t tile_size = (m_attrs.softcap > 0 ? 3 : 2) * bq * bk, parts = by_batch || chunks == 0 ? 0 : chunks - 1;
    // The scratch: D for each query row, two tiles per thread (three with a soft-cap), and the
    // grad_q parts.
    T* row_d = detail::thread_scratch<T, 1>(d.batch * d.t_q + chunks * tile_size + parts * q_size);
    T* tiles_scratch = row_d + d.batch * d.t_q;
    T* grad_q_parts = tiles_scratch + chunks * tile_size;
    // D = rowsum(grad_out * out) - grad_lse, per query row of every batch index.
    for (std::size_t i = 0; i < d.batch * d.t_q; ++i) {
      row_d[i] = detail::row_dot(g + i * d.d_v, out + i * d.d_v, d.d_v, 1) - g_lse[i];
    }
    for (auto* grad : y) std::fill(grad->begin(), grad->end(), T(0));
    T* grad_q = y[0]->data();
    T* grad_k = y[1]->data();
    T* grad_v = y[2]->data();
    const T alpha = static_cast<T>(m_attrs.scale), cap = static_cast<T>(m_attrs.softcap);
    const T inv_cap = m_attrs.softcap > 0 ? static_cast<T>(1.0 / m_attrs.softcap) : T(0);
    // Key tiles [first, last) of batch index b, grad_q summed into gq, on chunk's scratch.
    const auto run = [&](std::size_t b, std::size_t first, std::size_t last, T* gq, std::size_t chunk) {
      T* p = tiles_scratch + chunk * tile_size;
      for (std::size_t t = first; t < last; ++t) {
        const std::size_t j0 = t * flash_tile_k;
        flash_backward(q + b * q_size, k + b * k_size, v + b * v_size, lse + b * d.t_q, g + b * d.t_q * d.d_v,
                       row_d + b * d.t_q, gq, grad_k + b * k_size, grad_v + b * v_size, d, alpha, cap, inv_cap, b,
                       j0, std::min(flash_tile_k, d.t_k - j0), mask, p, p + bq * bk, p + 2 * bq * bk);
      }
    };
    if (by_batch) {
      detail::parallel_blas_chunks(d.batch, chunks, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
        for (std::size_t b = begin; b < end; ++b) run(b, 0, tiles, grad_q + b * q_size, chunk);
      });
      return;
    }
    for (std::size_t b = 0; b < d.batch; ++b) {
      std::fill(grad_q_parts, grad_q_parts + parts * q_size, T(0));
      detail::parallel_blas_chunks(tiles, chunks, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
        run(b, begin, end, chunk == 0 ? grad_q + b * q_size : grad_q_parts + (chunk - 1) * q_size, chunk);
      });
      T* gq = grad_q + b * q_size;
      for (std::size_t c = 0; c < parts; ++c) {
        for (std::size_t i = 0; i < q_size; ++i) gq[i] += grad_q_parts[c * q_size + i];
      }
    }
  }

  // The second-order rule: the forward above, built again from composed nodes as a function of
  // q, k, v, grad_out and grad_lse, then differentiated for the gradients of the three outputs.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    const Var<T>& q = a.x[0];
    const Var<T>& k = a.x[1];
    const Var<T>& v = a.x[2];
    // The rule gives out and lse no gradient and q, k, v the derivative through them: right
    // only when they are the outputs of flash_attention(q, k, v) at this scale, mask and soft-cap.
    const Node<T>& p = a.x[3].node();
    const std::optional<detail::FlashAttentionAttrs> of_p = p.is_leaf() ? std::nullopt : detail::flash_attention_attrs(*p.op);
    std::vector<Slot> inputs = {q.slot(), k.slot(), v.slot()};
    if (m_attrs.mask.key_mask) inputs.push_back(a.x[7].slot());
    if (!of_p || of_p->scale != m_attrs.scale || !(of_p->mask == m_attrs.mask) || of_p->softcap != m_attrs.softcap || a.x[4].id() != a.x[3].id() ||
        a.x[3].output() != 0 || a.x[4].output() != 1 || p.inputs != inputs) {
      throw error("flash_attention_vjp (node " + std::to_string(a.y.id()) + "): its second-order rule needs out and "
                  "lse to be the outputs of flash_attention of the same q, k, v, scale, mask and soft-cap; out is node " +
                  std::to_string(a.x[3].id()) + " (" + p.op_name() + ")");
    }
    // flash_attention composed of ops, then its VJP for the seeds grad_out and grad_lse by the
    // ordinary backward pass: each op's own VJP, no formula written again here. q, k and v
    // enter through identity nodes, so that the results are this node's partial derivatives,
    // one per slot, even when an input is another (k = q).
    const Accumulate<T> sum = sum_contributions<T>;
    const Var<T> q1 = scale(q, 1.0);
    const Var<T> k1 = scale(k, 1.0);
    const Var<T> v1 = scale(v, 1.0);
    Var<T> scores = matmul(scale(q1, m_attrs.scale), k1, false, true);
    if (m_attrs.softcap > 0) scores = scale(tanh(scale(scores, 1.0 / m_attrs.softcap)), m_attrs.softcap);  // C tanh(s / C)
    // The masks, as the composed attention: -inf before softmax. lse takes its own masked
    // scores, filled with the lowest finite value: its log_softmax's column 0 would be
    // -inf - (-inf) = NaN where key 0 is masked. The derivatives agree: exp(lowest - max) is 0,
    // and apply_mask's VJP zeros every masked entry, a fully masked row's too.
    Var<T> logits = scores, finite = scores;
    const auto mask_with = [&](const Var<T>& allowed) {
      logits = apply_mask(logits, allowed, -std::numeric_limits<double>::infinity());
      finite = apply_mask(finite, allowed, static_cast<double>(std::numeric_limits<T>::lowest()));
    };
    if (m_attrs.mask.key_mask) mask_with(a.x[7]);
    if (m_attrs.mask.causal) {
      const detail::AttentionDims d = detail::attention_dims(q.shape(), k.shape(), v.shape());
      const char* name = m_attrs.mask.window > 0 ? "sliding_window_mask" : "causal_mask";
      mask_with(q.graph().constant(name, detail::causal_values<T>(d, m_attrs.mask.window)));  // (T_q, T_k)
    }
    const Var<T> out = matmul(softmax(logits, -1), v1);
    const Var<T> lse_column = slice(add(finite, scale(log_softmax(finite, -1), -1.0)), -1, 0, 1);  // s - log softmax(s)
    const Var<T> lse = reshape(lse_column, a.x[4].shape());
    const std::vector<Var<T>> grads = backward({out, lse}, {q1, k1, v1}, {a.x[5], a.x[6]}, sum, /*through_xs=*/false);
    const std::vector<Var<T>> wrt = {q, k, v, a.x[5], a.x[6]};
    const std::vector<Var<T>> second = backward(grads, wrt, a.grad_outs, sum, /*through_xs=*/false);
    // Partial derivatives (the walk stops at the inputs: grad_out may be computed from q).
    // Each of backward's results is the whole gradient of its node: a node that is several of
    // the inputs (k = q, say) takes it at its first slot and zeros at the others, or the sum
    // the caller forms would count it twice. out and lse take zeros: the composition
    // recomputes them; and the key mask: it has no gradient.
    const std::size_t slots[] = {0, 1, 2, 5, 6};  // the slots of q, k, v, grad_out, grad_lse
    std::vector<Var<T>> result(arity());
    for (std::size_t i = 0; i < 5; ++i) {
      const std::size_t slot = slots[i];
      const bool first = std::none_of(slots, slots + i, [&](std::size_t s) { return a.x[s].slot() == a.x[slot].slot(); });
      if (a.wanted[slot] && first) result[slot] = second[i];
    }
    for (std::size_t slot = 0; slot < result.size(); ++slot) {
      if (a.wanted[slot] && !result[slot].valid()) {
        result[slot] = zeros_like(a.x[slot]);
      }
    }
    return result;
  }

 private:
  detail::FlashAttentionAttrs m_attrs;
};

}  // namespace

template <class T>
FlashGrads<T> flash_attention_vjp(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& out,
                                  const Var<T>& lse, const Var<T>& grad_out, const Var<T>& grad_lse, double scale,
                                  const FlashMask<T>& mask, double softcap) {
  std::vector<Var<T>> x = {q, k, v, out, lse, grad_out, grad_lse};
  if (mask.key_mask.valid()) {
    detail::check_one_graph<T>("flash_attention_vjp", {{"q", &q}, {"the key mask", &mask.key_mask}});
    x.push_back(mask.key_mask);
  }
  const auto op = std::make_shared<FlashAttentionVjpOp>(detail::FlashAttentionAttrs{scale, detail::FlashMaskAttrs::of(mask), softcap});
  const std::vector<Var<T>> grads = q.graph().apply_outputs(op, x);
  return {grads[0], grads[1], grads[2]};
}

std::shared_ptr<const Op> make_flash_attention_vjp_op(const JsonCursor& attrs) {
  return std::make_shared<FlashAttentionVjpOp>(detail::FlashAttentionAttrs::read(attrs));
}

#define XGRAD_INSTANTIATE_FLASH_VJP(T)                                                                   \
  template FlashGrads<T> flash_attention_vjp(const Var<T>&, const Var<T>&, const Var<T>&, const Var<T>&, \
                                             const Var<T>&, const Var<T>&, const Var<T>&, double,         \
                                             const FlashMask<T>&, double);
XGRAD_INSTANTIATE_FLASH_VJP(float)
XGRAD_INSTANTIATE_FLASH_VJP(double)
#undef XGRAD_INSTANTIATE_FLASH_VJP

}  // namespace xgrad
