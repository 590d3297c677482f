// forward: grads = [grad_q | grad_k | grad_v] per batch index, flattened: the VJP of
//          flash_attention. With out, lse from packed and g = grad_out, h = grad_lse from
//          grad_packed: D = rowsum(g * out) - h, then for each tile of keys j and of queries i
//            P = exp(a Q_i K_j^T - lse_i)           the weights, recomputed
//            grad_V_j += P^T g_i;  dP = g_i V_j^T;  dS = P * (dP - D_i)
//            grad_Q_i += a dS K_j;  grad_K_j += a dS^T Q_i
//          (rowsum(dP * P) = rowsum(g * out), a T_q x d_v pass, not T_q x T_k; and the gradient of
//          lse w.r.t. the scores is P, hence the - h).
// VJP:     the composed graph's: flash_attention built from scale, matmul, softmax, log_softmax,
//          add, slice and pad nodes, its VJP taken by the ordinary backward pass (each op's own
//          rule), laid out as this node's output, and differentiated again.
//          packed gets no contribution: the composition recomputes out and lse from q, k and v.
//          An input that is also another (k = q) gets its whole gradient once.
// saves:   nothing beyond its inputs. Scratch: two tiles of weights (P and dS) per thread and,
//          when threads split the key tiles of one batch index, a T_q x d_k grad_q for each
//          thread but the first; kept by the calling thread for the next call.
#include <xgrad/ops/flash_attention.hpp>

#include <algorithm>
#include <limits>

#include <xtensor/xbuilder.hpp>

#include <xgrad/graph/backward.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_scale = "scale";

using detail::flash_tile_q;
using detail::flash_tile_k;

// Key rows [j0, j0 + bk) of one batch index: adds those rows' share to gq (t_q, d_k) and writes
// rows [j0, j0 + bk) of gk (t_k, d_k) and gv (t_k, d_v), which start at 0. y and g are
// (t_q, d_v + 1); row_d holds D for each query row. p and ds: scratch of two tiles.
template <class T>
void flash_backward(const T* q, const T* k, const T* v, const T* y, const T* g, const T* row_d, T* gq, T* gk, T* gv,
                    const detail::FlashDims& d, T alpha, std::size_t j0, std::size_t bk, T* p, T* ds) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t dk = d.d_k, dv = d.d_v, ldy = dv + 1;
  for (std::size_t i0 = 0; i0 < d.t_q; i0 += flash_tile_q) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q - i0);
    detail::gemm(false, true, bq, bk, dk, alpha, q + i0 * dk, dk, k + j0 * dk, dk, T(0), p, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        const T lse = y[(i0 + r) * ldy + dv];
        if (lse == minus_inf) {  // a row with every score -inf has weights 0
          std::fill(p + r * bk, p + (r + 1) * bk, T(0));
        } else {
          detail::row_exp(p + r * bk, lse, p + r * bk, bk, 1);
        }
      }
    });
    detail::gemm(true, false, bk, dv, bq, T(1), p, bk, g + i0 * ldy, ldy, T(1), gv + j0 * dv, dv);
    detail::gemm(false, true, bq, bk, dv, T(1), g + i0 * ldy, ldy, v + j0 * dv, dv, T(0), ds, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        detail::row_softmax_vjp(p + r * bk, ds + r * bk, row_d[i0 + r], ds + r * bk, bk, 1);
      }
    });
    detail::gemm(false, false, bq, dk, bk, alpha, ds, bk, k + j0 * dk, dk, T(1), gq + i0 * dk, dk);
    detail::gemm(true, false, bk, dk, bq, alpha, ds, bk, q + i0 * dk, dk, T(1), gk + j0 * dk, dk);
  }
}

class FlashAttentionVjpOp final : public OpFor<FlashAttentionVjpOp> {
 public:
  explicit FlashAttentionVjpOp(double scale) : m_scale(scale) {}

  std::string name() const override { return "flash_attention_vjp"; }
  std::size_t arity() const override { return 5; }
  Json attrs() const override { return {{key_scale, m_scale}}; }
  double work(const std::vector<Shape>& x, const Shape& y) const override {
    return Op::work(x, y) + detail::flash_weights_work(x, detail::FlashPass::vjp);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    detail::check_flash_scale(m_scale);
    const detail::FlashDims d = detail::flash_dims(x[0], x[1], x[2]);
    const Shape packed = d.packed_shape();
    if (x[3] != packed || x[4] != packed) {
      throw error("packed is " + shape_str(x[3]) + " and grad_packed is " + shape_str(x[4]) + ", both must be " +
                  shape_str(packed) + " (B..., T_q, d_v + 1) for q " + shape_str(x[0]) + " and v " + shape_str(x[2]));
    }
    Shape y = d.batch_axes;
    y.push_back(d.grads_size());
    return y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const auto shape = [](const xt::xarray<T>& a) { return Shape(a.shape().begin(), a.shape().end()); };
    const detail::FlashDims d = detail::flash_dims(shape(*x[0]), shape(*x[1]), shape(*x[2]));
    const std::size_t ldy = d.d_v + 1, n = d.grads_size();
    const T* q = x[0]->data();
    const T* k = x[1]->data();
    const T* v = x[2]->data();
    const T* packed = x[3]->data();
    const T* g = x[4]->data();
    const std::size_t tiles = (d.t_k + flash_tile_k - 1) / flash_tile_k, threads = detail::parallel_threads();
    // Threads split the batch indices when there are enough of them, each doing all its key
    // tiles; else the key tiles of one batch index at a time. Either way each writes its own
    // rows of grad_k and grad_v. With key tiles split, grad_q sums over all of them: each thread
    // but the first sums into a grad_q of its own, added in thread order afterwards (the result
    // depends on the thread count, not on timing).
    const bool by_batch = d.batch >= threads;
    const std::size_t chunks = std::min(threads, by_batch ? d.batch : tiles);
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    const std::size_t q_size = d.t_q * d.d_k, tile_size = 2 * bq * bk, parts = by_batch || chunks == 0 ? 0 : chunks - 1;
    // The scratch, allocated here (the threads must not throw): D for each query row, two
    // tiles per thread, and the grad_q parts.
    T* row_d = detail::thread_scratch<T, 1>(d.batch * d.t_q + chunks * tile_size + parts * q_size);
    T* tiles_scratch = row_d + d.batch * d.t_q;
    T* grad_q_parts = tiles_scratch + chunks * tile_size;
    // D = rowsum(grad_out * out) - grad_lse, per query row of every batch index.
    for (std::size_t i = 0; i < d.batch * d.t_q; ++i) {
      row_d[i] = detail::row_dot(g + i * ldy, packed + i * ldy, d.d_v, 1) - g[i * ldy + d.d_v];
    }
    std::fill(y.begin(), y.end(), T(0));
    const T alpha = static_cast<T>(m_scale);
    // Key tiles [first, last) of batch index b, grad_q summed into gq, on chunk's scratch.
    const auto run = [&](std::size_t b, std::size_t first, std::size_t last, T* gq, std::size_t chunk) {
      T* grads = y.data() + b * n;
      T* p = tiles_scratch + chunk * tile_size;
      for (std::size_t t = first; t < last; ++t) {
        const std::size_t j0 = t * flash_tile_k;
        flash_backward(q + b * q_size, k + b * d.t_k * d.d_k, v + b * d.t_k * d.d_v, packed + b * d.t_q * ldy,
                       g + b * d.t_q * ldy, row_d + b * d.t_q, gq, grads + q_size, grads + q_size + d.t_k * d.d_k, d,
                       alpha, j0, std::min(flash_tile_k, d.t_k - j0), p, p + bq * bk);
      }
    };
    if (by_batch) {
      detail::parallel_blas_chunks(d.batch, chunks, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
        for (std::size_t b = begin; b < end; ++b) run(b, 0, tiles, y.data() + b * n, chunk);
      });
      return;
    }
    for (std::size_t b = 0; b < d.batch; ++b) {
      std::fill(grad_q_parts, grad_q_parts + parts * q_size, T(0));
      detail::parallel_blas_chunks(tiles, chunks, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
        run(b, begin, end, chunk == 0 ? y.data() + b * n : grad_q_parts + (chunk - 1) * q_size, chunk);
      });
      T* gq = y.data() + b * n;
      for (std::size_t c = 0; c < parts; ++c) {
        for (std::size_t i = 0; i < q_size; ++i) gq[i] += grad_q_parts[c * q_size + i];
      }
    }
  }

  // The second-order rule: the forward above, built again from composed nodes as a function of
  // q, k, v and grad_packed, then differentiated with grad_out as the seed.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    const Var<T>& q = a.x[0];
    const Var<T>& k = a.x[1];
    const Var<T>& v = a.x[2];
    const Var<T>& gp = a.x[4];
    const auto shape = [](const Var<T>& x) { return Shape(x.value().shape().begin(), x.value().shape().end()); };
    const detail::FlashDims d = detail::flash_dims(shape(q), shape(k), shape(v));
    // The rule gives packed no gradient and q, k, v the derivative through packed: right only
    // when packed is flash_attention(q, k, v) at this scale.
    const Node<T>& p = a.x[3].node();
    if (!p.op || p.op->name() != "flash_attention" || p.inputs != std::vector<std::size_t>{q.id(), k.id(), v.id()} ||
        p.op->attrs() != attrs()) {
      throw error("flash_attention_vjp (node " + std::to_string(a.y.id()) + "): its second-order rule needs packed to be "
                  "flash_attention of the same q, k, v and scale; packed is node " + std::to_string(a.x[3].id()) + " (" +
                  p.op_name() + ")");
    }
    // flash_attention composed of ops, then its VJP for the seed grad_packed by the ordinary
    // backward pass: each op's own VJP, no formula written again here. q, k and v enter through
    // identity nodes, so that the results are this node's partial derivatives, one per slot,
    // even when an input is another (k = q).
    const Accumulate<T> sum = [](const Var<T>& x, const Var<T>& y) { return add(x, y); };
    const Var<T> q1 = scale(q, 1.0);
    const Var<T> k1 = scale(k, 1.0);
    const Var<T> v1 = scale(v, 1.0);
    const Var<T> qs = scale(q1, m_scale);
    const Var<T> scores = matmul(qs, k1, false, true);
    const Var<T> out = matmul(softmax(scores, -1), v1);
    const Var<T> log_weights = log_softmax(scores, -1);
    const Var<T> lse = slice(add(scores, scale(log_weights, -1.0)), -1, 0, 1);  // s - log softmax(s)
    const Var<T> out_part = pad(out, -1, 0, 1);
    const Var<T> packed = add(out_part, pad(lse, -1, d.d_v, 0));
    const std::vector<Var<T>> grads_of_packed = backward(packed, {q1, k1, v1}, gp, sum, /*through_xs=*/false);
    const Var<T>& grad_q = grads_of_packed[0];
    const Var<T>& grad_k = grads_of_packed[1];
    const Var<T>& grad_v = grads_of_packed[2];
    // Flattened and laid end to end, as the forward's output.
    const Var<T>* parts[] = {&grad_q, &grad_k, &grad_v};
    const std::size_t sizes[] = {d.t_q * d.d_k, d.t_k * d.d_k, d.t_k * d.d_v};
    Var<T> grads;
    std::size_t before = 0;
    for (std::size_t i = 0; i < 3; ++i) {
      Shape flat = d.batch_axes;
      flat.push_back(sizes[i]);
      const Var<T> placed = pad(reshape(*parts[i], flat), -1, before, d.grads_size() - before - sizes[i]);
      grads = grads.valid() ? add(grads, placed) : placed;
      before += sizes[i];
    }
    const std::vector<Var<T>> wrt = {q, k, v, gp};
    const std::vector<Var<T>> second = backward(grads, wrt, a.grad_out, sum, /*through_xs=*/false);
    // Partial derivatives (the walk stops at the inputs: grad_packed may be computed from q).
    // Each of backward's results is the whole gradient of its node: a node that is several of
    // the inputs (k = q, say) takes it at its first slot and zeros at the others, or the sum
    // the caller forms would count it twice. packed takes zeros: the composition recomputes it.
    const std::size_t slots[] = {0, 1, 2, 4};  // the slots of q, k, v, grad_packed
    std::vector<Var<T>> result(5);
    for (std::size_t i = 0; i < 4; ++i) {
      const std::size_t slot = slots[i];
      const bool first = std::none_of(slots, slots + i, [&](std::size_t s) { return a.x[s].id() == a.x[slot].id(); });
      if (a.wanted[slot] && first) result[slot] = second[i];
    }
    for (std::size_t slot = 0; slot < 5; ++slot) {
      if (a.wanted[slot] && !result[slot].valid()) {
        result[slot] = q.graph().constant("zeros", xt::zeros<T>(a.x[slot].value().shape()));
      }
    }
    return result;
  }

 private:
  double m_scale;
};

}  // namespace

template <class T>
Var<T> flash_attention_vjp(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& packed,
                           const Var<T>& grad_packed, double scale) {
  return q.graph().apply(std::make_shared<FlashAttentionVjpOp>(scale), {q, k, v, packed, grad_packed});
}

std::shared_ptr<const Op> make_flash_attention_vjp_op(const JsonCursor& attrs) {
  attrs.check_object({key_scale});
  return std::make_shared<FlashAttentionVjpOp>(attrs[key_scale].number());
}

template Var<float> flash_attention_vjp(const Var<float>&, const Var<float>&, const Var<float>&, const Var<float>&,
                                        const Var<float>&, double);
template Var<double> flash_attention_vjp(const Var<double>&, const Var<double>&, const Var<double>&,
                                         const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
