// forward: out = softmax(a q k^T) v,  lse = logsumexp(a q k^T) per query row: two outputs
//          (B..., T_q, d_k), (B..., T_k, d_k), (B..., T_k, d_v) -> (B..., T_q, d_v), (B..., T_q)
//          Per tile of query rows: for each tile of keys, S = a Q K^T, then the online softmax
//          m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P,
//          acc = acc e^(m - m') + P V; at the end out = acc / l and lse = m + log l.
// VJP:     [grad_q, grad_k, grad_v] = flash_attention_vjp(q, k, v, out, lse, grad_out, grad_lse),
//          one node; zeros stand in for the gradient of an output none reaches.
// saves:   its output (out and lse); no T_q x T_k array. Scratch: one score tile and one
//          accumulator tile per thread, kept by the calling thread for the next call.
#include <xgrad/ops/flash_attention.hpp>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/softmax.hpp>

#include <xtensor/xbuilder.hpp>

namespace xgrad {

namespace detail {

AttentionDims attention_dims(const Shape& q, const Shape& k, const Shape& v) {
  const std::string all = "q is " + shape_str(q) + ", k is " + shape_str(k) + ", v is " + shape_str(v);
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) throw error("q, k and v need rank >= 2 (..., T, d): " + all);
  if (q.size() != k.size() || q.size() != v.size() || !std::equal(q.begin(), q.end() - 2, k.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin())) {
    throw error("batch axes differ (the leading axes of q, k and v must be equal): " + all);
  }
  AttentionDims d{Shape(q.begin(), q.end() - 2), 1, q[q.size() - 2], k[k.size() - 2], q.back(), v.back()};
  if (k.back() != d.d_k) {
    throw error("d_k differs: q has d_k = " + std::to_string(d.d_k) + ", k has d_k = " + std::to_string(k.back()) + ": " + all);
  }
  if (v[v.size() - 2] != d.t_k) {
    throw error("T_k differs: k has T_k = " + std::to_string(d.t_k) + ", v has T_k = " + std::to_string(v[v.size() - 2]) +
                ": " + all);
  }
  if (d.t_k == 0) throw error("T_k = 0, softmax over no keys is undefined: " + all);
  for (std::size_t x : {d.t_q, d.t_k, d.d_k, d.d_v}) {
    if (x > static_cast<std::size_t>(INT_MAX)) throw error("a matrix axis exceeds INT_MAX: " + all);
  }
  for (std::size_t b : d.batch_axes) d.batch *= b;
  return d;
}

double flash_weights_work(const std::vector<Shape>& x, FlashPass pass) {
  const AttentionDims d = attention_dims(x[0], x[1], x[2]);
  const double weights = static_cast<double>(d.batch) * static_cast<double>(d.t_q) * static_cast<double>(d.t_k);
  const double dk = static_cast<double>(d.d_k), dv = static_cast<double>(d.d_v);
  // Forward: the scores (d_k each) and the weighted values (d_v). VJP: the scores again, the
  // weights' gradient (d_v), grad_v (d_v), grad_q and grad_k (d_k each).
  const double multiply_adds = weights * (pass == FlashPass::forward ? dk + dv : 3 * dk + 2 * dv);
  // Each weight is also written to a tile and read back, exponentiated, on every pass.
  return (pass == FlashPass::forward ? 2 : 4) * weights + Op::multiply_add_work(multiply_adds);
}

void check_attention_scale(double scale) {
  if (!std::isfinite(scale)) throw error("the scale must be finite, got " + number_str(scale));
}

}  // namespace detail

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_scale = "scale";

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

// Query rows [i0, i0 + bq) of one batch index: q (t_q, d_k), k (t_k, d_k), v (t_k, d_v) -> those
// rows of out (t_q, d_v) and lse (t_q).
template <class T>
void flash_forward(const T* q, const T* k, const T* v, T* out, T* lse, const detail::AttentionDims& d, T alpha,
                   std::size_t i0, std::size_t bq, ForwardScratch<T>& w) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t dv = d.d_v;
  T *scores = w.scores, *acc = w.acc, *m = w.m, *l = w.l;
  std::fill(m, m + bq, minus_inf);
  std::fill(l, l + bq, T(0));
  for (std::size_t j0 = 0; j0 < d.t_k; j0 += flash_tile_k) {
    const std::size_t bk = std::min(flash_tile_k, d.t_k - j0);
    const bool first = j0 == 0;
    detail::gemm(false, true, bq, bk, d.d_k, alpha, q + i0 * d.d_k, d.d_k, k + j0 * d.d_k, d.d_k, T(0), scores, bk);
    detail::parallel_rows(bq, bk, [&](std::size_t begin, std::size_t end) {
      for (std::size_t r = begin; r < end; ++r) {
        T* s = scores + r * bk;
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
    if (l[r] == T(0)) {  // every score -inf: out 0, lse -inf, as the composed softmax
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
  explicit FlashAttentionOp(double scale) : m_scale(scale) {}

  std::string name() const override { return "flash_attention"; }
  std::size_t arity() const override { return 3; }
  Json attrs() const override { return {{key_scale, m_scale}}; }
  double scale() const { return m_scale; }
  // ONNX: the composition, s = scale q k^T, out = softmax(s) v and lse = m + Log(sum) per row
  // (onnx_exp_rows: out 0 and lse -inf on a row of only -inf, as here). The T_q x T_k scores
  // exist then: the memory bound of the fused node is lost.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::size_t rank = n.input_shapes[0].size();
    const std::string k_t = e.op("Transpose", {n.inputs[1]}, {{"perm", onnx_swap_last_two(rank)}});
    Shape scores = n.output_shapes[0];  // (B..., T_q, T_k)
    scores.back() = n.input_shapes[1][rank - 2];
    const std::string s = e.op("Mul", {e.op("MatMul", {n.inputs[0], k_t}), e.factor(m_scale, scores)});
    const OnnxExpRows rows = onnx_exp_rows(e, s, static_cast<std::int64_t>(rank - 1));
    const std::string lse = e.op("Add", {rows.m, e.op("Log", {rows.sum})});
    return {e.op("MatMul", {onnx_softmax(e, rows), n.inputs[2]}), e.op("Reshape", {lse, e.int64s(onnx_dims(n.output_shapes[1]))})};
  }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + detail::flash_weights_work(x, detail::FlashPass::forward);
  }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    detail::check_attention_scale(m_scale);
    const detail::AttentionDims d = detail::attention_dims(x[0], x[1], x[2]);
    return {d.out_shape(), d.lse_shape()};
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const detail::AttentionDims d = detail::attention_dims(shape_of(*x[0]), shape_of(*x[1]), shape_of(*x[2]));
    // Work items: (batch index, tile of queries), independent of each other, split over threads.
    const std::size_t tiles = (d.t_q + flash_tile_q - 1) / flash_tile_q;
    const T alpha = static_cast<T>(m_scale);
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
                      x[2]->data() + b * d.t_k * d.d_v, out + b * d.t_q * d.d_v, lse + b * d.t_q, d, alpha, i0,
                      std::min(flash_tile_q, d.t_q - i0), scratch);
      }
    });
  }

  // One flash_attention_vjp node; zeros for the gradient of an output that none reaches.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    Graph<T>& g = a.x[0].graph();
    std::vector<Var<T>> grad_outs = a.grad_outs;
    for (std::size_t k = 0; k < 2; ++k) {
      if (grad_outs[k].valid()) continue;
      grad_outs[k] = zeros_like(a.ys[k]);
      g.set_grad_of(grad_outs[k].slot(), a.ys[k].slot());  // the gradient of that output: none
    }
    const FlashGrads<T> grads =
        flash_attention_vjp(a.x[0], a.x[1], a.x[2], a.ys[0], a.ys[1], grad_outs[0], grad_outs[1], m_scale);
    std::vector<Var<T>> result = {grads.grad_q, grads.grad_k, grads.grad_v};
    for (std::size_t i = 0; i < 3; ++i) {
      if (!a.wanted[i]) result[i] = Var<T>();
    }
    return result;
  }

 private:
  double m_scale;
};

}  // namespace

template <class T>
FlashOutputs<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale) {
  const std::vector<Var<T>> outs = q.graph().apply_outputs(std::make_shared<FlashAttentionOp>(scale), {q, k, v});
  return {outs[0], outs[1]};
}

std::optional<double> flash_attention_scale(const Op& op) {
  const auto* flash = dynamic_cast<const FlashAttentionOp*>(&op);
  return flash ? std::optional<double>(flash->scale()) : std::nullopt;
}

std::shared_ptr<const Op> make_flash_attention_op(const JsonCursor& attrs) {
  attrs.check_object({key_scale});
  return std::make_shared<FlashAttentionOp>(attrs[key_scale].number());
}

template FlashOutputs<float> flash_attention(const Var<float>&, const Var<float>&, const Var<float>&, double);
template FlashOutputs<double> flash_attention(const Var<double>&, const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
