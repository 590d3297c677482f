// forward: out = softmax(c(a q k^T) + M) v,  lse = logsumexp(c(a q k^T) + M) per query row: two
//          outputs (B..., T_q, d_k), (B..., T_k, d_k), (B..., T_k, d_v) [, key mask (B..., 1, T_k)]
//          -> (B..., T_q, d_v), (B..., T_q); M is -inf where the masks forbid (ops/flash_mask.hpp),
//          c(s) = C tanh(s / C) with a soft-cap C > 0, else s.
//          Per tile of query rows: for each tile of keys the masks leave, S = c(a Q K^T) with -inf
//          where they forbid, then the online softmax
//          m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P,
//          acc = acc e^(m - m') + P V; at the end out = acc / l and lse = m + log l.
// VJP:     [grad_q, grad_k, grad_v] = flash_attention_vjp(q, k, v, out, lse, grad_out, grad_lse[, key mask]),
//          one node; zeros stand in for the gradient of an output none reaches; the key mask
//          gets none (zeros where wanted, as apply_mask's mask).
// saves:   its output (out and lse); no T_q x T_k array. Scratch: one score tile and one
//          accumulator tile per thread, kept by the calling thread for the next call.
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/flash_mask.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/softmax.hpp>

#include <xtensor/xbuilder.hpp>

namespace xgrad {

namespace detail {

AttentionDims attention_dims(const Shape& q, const Shape& k, const Shape& v) {
  const auto all = [&] { return "q is " + shape_str(q) + ", k is " + shape_str(k) + ", v is " + shape_str(v); };
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) throw error("q, k and v need rank >= 2 (..., T, d): " + all());
  if (q.size() != k.size() || q.size() != v.size() || !std::equal(q.begin(), q.end() - 2, k.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin())) {
    throw error("batch axes differ (the leading axes of q, k and v must be equal): " + all());
  }
  AttentionDims d{Shape(q.begin(), q.end() - 2), 1, q[q.size() - 2], k[k.size() - 2], q.back(), v.back()};
  if (k.back() != d.d_k) {
    throw error("d_k differs: q has d_k = " + std::to_string(d.d_k) + ", k has d_k = " + std::to_string(k.back()) + ": " + all());
  }
  if (v[v.size() - 2] != d.t_k) {
    throw error("T_k differs: k has T_k = " + std::to_string(d.t_k) + ", v has T_k = " + std::to_string(v[v.size() - 2]) +
                ": " + all());
  }
  if (d.t_k == 0) throw error("T_k = 0, softmax over no keys is undefined: " + all());
  for (std::size_t x : {d.t_q, d.t_k, d.d_k, d.d_v}) {
    if (x > static_cast<std::size_t>(INT_MAX)) throw error("a matrix axis exceeds INT_MAX: " + all());
  }
  for (std::size_t b : d.batch_axes) d.batch *= b;
  return d;
}

namespace {

// The sum of clamp(x, 0, hi) over x = a, ..., a + n - 1.
double clamped_sum(long a, long n, long hi) {
  const long low = std::max(a, 1L), high = std::min(a + n - 1, hi - 1);  // the x in (0, hi)
  double sum = high >= low ? (static_cast<double>(low) + static_cast<double>(high)) * static_cast<double>(high - low + 1) / 2 : 0;
  const long at_hi = a + n - std::max(a, hi);  // the x >= hi
  return sum + (at_hi > 0 ? static_cast<double>(at_hi) * static_cast<double>(hi) : 0);
}

}  // namespace

double flash_weights_work(const std::vector<Shape>& x, FlashPass pass, const FlashMaskAttrs& mask, bool softcap) {
  const AttentionDims d = attention_dims(x[0], x[1], x[2]);
  // The weights of one batch index the kernels compute: with the causal mask, query tile
  // [i0, i0 + bq) against keys [window_key_begin(i0), causal_key_end) only, of which each row i
  // allows clamp(i' + 1, 0, T_k) - clamp(i' + 1 - W, 0, T_k), i' = i + T_k - T_q (W = T_k
  // without a window: the second term 0), and the kernels write -inf over the rest.
  double computed = static_cast<double>(d.t_q) * static_cast<double>(d.t_k), filled = 0;
  if (mask.causal) {
    computed = 0;
    const long offset = static_cast<long>(d.t_k) - static_cast<long>(d.t_q), t_k = static_cast<long>(d.t_k);
    const long window = mask.window > 0 ? static_cast<long>(std::min(mask.window, d.t_k)) : t_k;
    for (std::size_t i0 = 0; i0 < d.t_q; i0 += flash_tile_q) {
      const std::size_t bq = std::min(flash_tile_q, d.t_q - i0);
      const std::size_t keys = causal_key_end(d, i0, bq) - window_key_begin(d, mask.window, i0);
      const double tile = static_cast<double>(bq) * static_cast<double>(keys);
      const long first = static_cast<long>(i0) + 1 + offset, rows = static_cast<long>(bq);
      computed += tile;
      filled += tile - (clamped_sum(first, rows, t_k) - clamped_sum(first - window, rows, t_k));
    }
  }
  const double batch = static_cast<double>(d.batch), weights = batch * computed;
  const double dk = static_cast<double>(d.d_k), dv = static_cast<double>(d.d_v);
  // Forward: the scores (d_k each) and the weighted values (d_v). VJP: the scores again, the
  // weights' gradient (d_v), grad_v (d_v), grad_q and grad_k (d_k each).
  const double multiply_adds = weights * (pass == FlashPass::forward ? dk + dv : 3 * dk + 2 * dv);
  // Each weight is also written to a tile and read back, exponentiated, on every pass; with a
  // key mask, each reads its entry of the mask (1 visit), and the causal -inf are written.
  // A soft-cap: a tanh per weight (12 visits, as the tanh row), and in the VJP its derivative
  // written to a tile and read back.
  const double cap = softcap ? (pass == FlashPass::forward ? 12 : 14) * weights : 0;
  return (pass == FlashPass::forward ? 2 : 4) * weights + Op::multiply_add_work(multiply_adds) +
         (mask.key_mask ? weights : 0) + batch * filled + cap;
}

void check_attention_scale(double scale) {
  if (!std::isfinite(scale)) throw error("the scale must be finite, got " + number_str(scale));
}

void check_attention_softcap(double softcap) {
  if (!(softcap == 0 || (std::isfinite(softcap) && softcap > 0))) {
    throw error("the soft-cap must be finite and > 0 (0 for none), got " + number_str(softcap));
  }
}

}  // namespace detail

namespace {

using detail::flash_tile_q;
using detail::flash_tile_k;

// The scratch of one thread: a tile of scores, a tile of output sums, and per row m and l.
template <class T>
struct ForwardScratch {
  T *scores, *acc, *m, *l;
  static std::size_t size(const detail::AttentionDims& d) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    return bq * bk + bq * d.d_v + 2 * bq;
  }
  ForwardScratch(const detail::AttentionDims& d, T* buffer) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    scores = buffer;
    acc = scores + bq * bk;
    m = acc + bq * d.d_v;
    l = m + bq;
  }
};

// Query rows [i0, i0 + bq) of batch index b: q (t_q, d_k), k (t_k, d_k), v (t_k, d_v) -> those
// rows of out (t_q, d_v) and lse (t_q). Keys before mask.key_begin and from mask.key_end on,
// which every row's masks forbid, are skipped: their weights are 0. cap > 0: the soft-cap, and
// inv_cap 1 / cap rounded to T.
template <class T>
void flash_forward(const T* q, const T* k, const T* v, T* out, T* lse, const detail::AttentionDims& d, T alpha,
                   T cap, T inv_cap, std::size_t b, std::size_t i0, std::size_t bq,
                   const detail::FlashMaskRows<T>& mask, ForwardScratch<T>& w) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t dv = d.d_v, key_begin = mask.key_begin(i0), t_k = mask.key_end(b, i0, bq);
  T *scores = w.scores, *acc = w.acc, *m = w.m, *l = w.l;
  std::fill(m, m + bq, minus_inf);
  std::fill(l, l + bq, T(0));
  for (std::size_t j0 = key_begin; j0 < t_k; j0 += flash_tile_k) {
    const std::size_t bk = std::min(flash_tile_k, t_k - j0);
    const bool first = j0 == key_begin;
    detail::gemm(false, true, bq, bk, d.d_k, alpha, q + i0 * d.d_k, d.d_k, k + j0 * d.d_k, d.d_k, T(0), scores, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        T* s = scores + r * bk;
        if (cap > 0) detail::soft_cap(s, bk, cap, inv_cap);
        mask.fill(s, b, i0 + r, j0, bk);
        const T m_new = std::max(m[r], detail::row_max(s, bk, 1));  // a NaN maximum keeps m: NaN flows on through exp
        if (m_new == minus_inf && !detail::row_has_nan(s, bk, 1)) {  // no score above -inf yet: weights 0
          std::fill(s, s + bk, T(0));
          continue;
        }
        const T c = std::exp(m[r] - m_new);  // 0 while m is -inf
        l[r] = l[r] * c + detail::row_exp(s, m_new, s, bk, 1);
        if (!first && c != T(1)) detail::row_scale(acc + r * dv, c, acc + r * dv, dv, 1);
        m[r] = m_new;
      }
    });
    detail::gemm(false, false, bq, dv, bk, T(1), scores, bk, v + j0 * dv, dv, first ? T(0) : T(1), acc, dv);
  }
  for (std::size_t r = 0; r < bq; ++r) {
    T* row = out + (i0 + r) * dv;
    if (l[r] == T(0)) {  // every score -inf (or every key masked): out 0, lse -inf, as the composed softmax
      std::fill(row, row + dv, T(0));
      lse[i0 + r] = minus_inf;
    } else {
      detail::row_scale(acc + r * dv, T(1) / l[r], row, dv, 1);
      lse[i0 + r] = m[r] + std::log(l[r]);
    }
  }
}

class FlashAttentionOp final : public OpFor<FlashAttentionOp, 2> {
 public:
  explicit FlashAttentionOp(detail::FlashAttentionAttrs attrs) : m_attrs(attrs) {}

  std::string name() const override { return "flash_attention"; }
  std::size_t arity() const override { return m_attrs.mask.key_mask ? 4 : 3; }  // q, k, v[, key mask]
  Json attrs() const override { return m_attrs.json(); }
  const detail::FlashAttentionAttrs& typed_attrs() const { return m_attrs; }
  // ONNX: the composition, s = scale q k^T, capped (onnx_soft_cap: C Tanh(s / C)), with -inf
  // where the masks forbid (onnx_flash_mask), out = softmax(s) v and lse = m + Log(sum) per row
  // (onnx_exp_rows: out 0 and lse -inf on a row of only -inf, as here). The T_q x T_k scores
  // exist then: the memory bound of the fused node is lost.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::size_t rank = n.input_shapes[0].size();
    const std::string k_t = e.op("Transpose", {n.inputs[1]}, {{"perm", onnx_swap_last_two(rank)}});
    Shape scores = n.output_shapes[0];  // (B..., T_q, T_k)
    scores.back() = n.input_shapes[1][rank - 2];
    const std::string raw = e.op("Mul", {e.op("MatMul", {n.inputs[0], k_t}), e.factor(m_attrs.scale, scores)});
    const std::string s = detail::onnx_flash_mask(e, n, 3, m_attrs.mask, detail::onnx_soft_cap(e, raw, scores, m_attrs.softcap).s);
    const OnnxExpRows rows = onnx_exp_rows(e, s, static_cast<std::int64_t>(rank - 1));
    const std::string lse = e.op("Add", {rows.m, e.op("Log", {rows.sum})});
    return {e.op("MatMul", {onnx_softmax(e, rows), n.inputs[2]}), e.op("Reshape", {lse, e.int64s(onnx_dims(n.output_shapes[1]))})};
  }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + detail::flash_weights_work(x, detail::FlashPass::forward, m_attrs.mask, m_attrs.softcap > 0);
  }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    const detail::AttentionDims d = m_attrs.check(x, 3);
    return {d.out_shape(), d.lse_shape()};
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const detail::AttentionDims d = detail::attention_dims(shape_of(*x[0]), shape_of(*x[1]), shape_of(*x[2]));
    const detail::FlashMaskRows<T> mask(d, m_attrs.mask, m_attrs.mask.key_mask ? x[3] : nullptr);
    // Work items: (batch index, tile of queries), independent of each other, split over threads.
    const std::size_t tiles = (d.t_q + flash_tile_q - 1) / flash_tile_q;
    const T alpha = static_cast<T>(m_attrs.scale), cap = static_cast<T>(m_attrs.softcap);
    const T inv_cap = m_attrs.softcap > 0 ? static_cast<T>(1.0 / m_attrs.softcap) : T(0);
    const std::size_t chunks = std::min(detail::parallel_threads(), d.batch * tiles);
    T* buffer = detail::thread_scratch<T, 0>(chunks * ForwardScratch<T>::size(d));
    std::vector<ForwardScratch<T>> scratches;
    for (std::size_t c = 0; c < chunks; ++c) scratches.emplace_back(d, buffer + c * ForwardScratch<T>::size(d));
    T* out = y[0]->data();
    T* lse = y[1]->data();
    detail::parallel_blas_chunks(d.batch * tiles, chunks, [&](std::size_t chunk, std::size_t begin, std::size_t end) {
      ForwardScratch<T>& scratch = scratches[chunk];
      for (std::size_t item = begin; item < end; ++item) {
        const std::size_t b = item / tiles, i0 = item % tiles * flash_tile_q;
        flash_forward(x[0]->data() + b * d.t_q * d.d_k, x[1]->data() + b * d.t_k * d.d_k,
                      x[2]->data() + b * d.t_k * d.d_v, out + b * d.t_q * d.d_v, lse + b * d.t_q, d, alpha, cap, inv_cap, b, i0,
                      std::min(flash_tile_q, d.t_q - i0), mask, scratch);
      }
    });
  }

  // One flash_attention_vjp node; zeros for the gradient of an output that none reaches. The
  // key mask gets no gradient: zeros where wanted (a mask that is a node of T), as apply_mask.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    Graph<T>& g = a.x[0].graph();
    std::vector<Var<T>> grad_outs = a.grad_outs;
    for (std::size_t k = 0; k < 2; ++k) {
      if (grad_outs[k].valid()) continue;
      grad_outs[k] = zeros_like(a.ys[k]);
      g.set_grad_of(grad_outs[k].slot(), a.ys[k].slot());  // the gradient of that output: none
    }
    const FlashMask<T> mask{m_attrs.mask.causal, m_attrs.mask.key_mask ? a.x[3] : Var<T>(), m_attrs.mask.window};
    const FlashGrads<T> grads = flash_attention_vjp(a.x[0], a.x[1], a.x[2], a.ys[0], a.ys[1], grad_outs[0], grad_outs[1],
                                                    m_attrs.scale, mask, m_attrs.softcap);
    std::vector<Var<T>> result = {grads.grad_q, grads.grad_k, grads.grad_v};
    for (std::size_t i = 0; i < 3; ++i) {
      if (!a.wanted[i]) result[i] = Var<T>();
    }
    if (m_attrs.mask.key_mask) result.push_back(a.wanted[3] ? zeros_like(a.x[3]) : Var<T>());
    return result;
  }

 private:
  detail::FlashAttentionAttrs m_attrs;
};

}  // namespace

template <class T>
FlashOutputs<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale,
                                const FlashMask<T>& mask, double softcap) {
  std::vector<Var<T>> x = {q, k, v};
  if (mask.key_mask.valid()) {
    detail::check_one_graph<T>("flash_attention", {{"q", &q}, {"the key mask", &mask.key_mask}});
    x.push_back(mask.key_mask);
  }
  const auto op = std::make_shared<FlashAttentionOp>(detail::FlashAttentionAttrs{scale, detail::FlashMaskAttrs::of(mask), softcap});
  const std::vector<Var<T>> outs = q.graph().apply_outputs(op, x);
  return {outs[0], outs[1]};
}

std::optional<detail::FlashAttentionAttrs> detail::flash_attention_attrs(const Op& op) {
  const auto* flash = dynamic_cast<const FlashAttentionOp*>(&op);
  return flash ? std::optional<FlashAttentionAttrs>(flash->typed_attrs()) : std::nullopt;
}

std::shared_ptr<const Op> make_flash_attention_op(const JsonCursor& attrs) {
  return std::make_shared<FlashAttentionOp>(detail::FlashAttentionAttrs::read(attrs));
}

#define XGRAD_INSTANTIATE_FLASH(T)                                                                         \
  template FlashOutputs<T> flash_attention(const Var<T>&, const Var<T>&, const Var<T>&, double, \
                                           const FlashMask<T>&, double);
XGRAD_INSTANTIATE_FLASH(float)
XGRAD_INSTANTIATE_FLASH(double)
#undef XGRAD_INSTANTIATE_FLASH

}  // namespace xgrad
