// forward: packed = [out | lse],  out = softmax(a q k^T) v,  lse = logsumexp(a q k^T) per query row
//          (B..., T_q, d_k), (B..., T_k, d_k), (B..., T_k, d_v) -> (B..., T_q, d_v + 1)
//          Per tile of query rows: for each tile of keys, S = a Q K^T, then the online softmax
//          m' = max(m, rowmax S), P = exp(S - m'), l = l e^(m - m') + rowsum P,
//          acc = acc e^(m - m') + P V; at the end out = acc / l and lse = m + log l.
// VJP:     grads = flash_attention_vjp(q, k, v, packed, grad_packed), sliced into grad_q, grad_k
//          and grad_v and reshaped to q's, k's and v's shapes.
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
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/slice.hpp>

namespace xgrad {

namespace detail {

FlashDims flash_dims(const Shape& q, const Shape& k, const Shape& v) {
  const std::string all = "q is " + shape_str(q) + ", k is " + shape_str(k) + ", v is " + shape_str(v);
  if (q.size() < 2 || k.size() < 2 || v.size() < 2) throw error("q, k and v need rank >= 2 (..., T, d): " + all);
  if (q.size() != k.size() || q.size() != v.size() || !std::equal(q.begin(), q.end() - 2, k.begin()) ||
      !std::equal(q.begin(), q.end() - 2, v.begin())) {
    throw error("batch axes differ (the leading axes of q, k and v must be equal): " + all);
  }
  FlashDims d{Shape(q.begin(), q.end() - 2), 1, q[q.size() - 2], k[k.size() - 2], q.back(), v.back()};
  if (k.back() != d.d_k) throw error("d_k differs: q has d_k = " + std::to_string(d.d_k) + ", k has " + std::to_string(k.back()) + ": " + all);
  if (v[v.size() - 2] != d.t_k) {
    throw error("T_k differs: k has T_k = " + std::to_string(d.t_k) + ", v has " + std::to_string(v[v.size() - 2]) + ": " + all);
  }
  if (d.t_k == 0) throw error("T_k = 0, softmax over no keys is undefined: " + all);
  for (std::size_t x : {d.t_q, d.t_k, d.d_k, d.d_v + 1}) {
    if (x > static_cast<std::size_t>(INT_MAX)) throw error("a matrix axis exceeds INT_MAX: " + all);
  }
  for (std::size_t b : d.batch_axes) d.batch *= b;
  return d;
}

double flash_weights_work(const std::vector<Shape>& x, FlashPass pass) {
  const FlashDims d = flash_dims(x[0], x[1], x[2]);
  const double weights = static_cast<double>(d.batch) * static_cast<double>(d.t_q) * static_cast<double>(d.t_k);
  const double dk = static_cast<double>(d.d_k), dv = static_cast<double>(d.d_v);
  // Forward: the scores (d_k each) and the weighted values (d_v). VJP: the scores again, the
  // weights' gradient (d_v), grad_v (d_v), grad_q and grad_k (d_k each).
  const double multiply_adds = weights * (pass == FlashPass::forward ? dk + dv : 3 * dk + 2 * dv);
  // Each weight is also written to a tile and read back, exponentiated, on every pass.
  return (pass == FlashPass::forward ? 2 : 4) * weights + Op::multiply_add_work(multiply_adds);
}

void check_flash_scale(double scale) {
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
  static std::size_t size(const detail::FlashDims& d) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    return bq * bk + bq * d.d_v + 2 * bq;
  }
  ForwardScratch(const detail::FlashDims& d, T* buffer) {
    const std::size_t bq = std::min(flash_tile_q, d.t_q), bk = std::min(flash_tile_k, d.t_k);
    scores = buffer;
    acc = scores + bq * bk;
    m = acc + bq * d.d_v;
    l = m + bq;
  }
};

// Query rows [i0, i0 + bq) of one batch index: q (t_q, d_k), k (t_k, d_k), v (t_k, d_v) -> those
// rows of y (t_q, d_v + 1).
template <class T>
void flash_forward(const T* q, const T* k, const T* v, T* y, const detail::FlashDims& d, T alpha, std::size_t i0,
                   std::size_t bq, ForwardScratch<T>& w) {
  constexpr T minus_inf = -std::numeric_limits<T>::infinity();
  const std::size_t dv = d.d_v, ldy = dv + 1;
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
    T* row = y + (i0 + r) * ldy;
    if (l[r] == T(0)) {  // every score -inf: out 0, lse -inf, as the composed softmax
      std::fill(row, row + dv, T(0));
      row[dv] = minus_inf;
    } else {
      detail::row_scale(acc + r * dv, T(1) / l[r], row, dv, 1);
      row[dv] = m[r] + std::log(l[r]);
    }
  }
}

class FlashAttentionOp final : public OpFor<FlashAttentionOp> {
 public:
  explicit FlashAttentionOp(double scale) : m_scale(scale) {}

  std::string name() const override { return "flash_attention"; }
  std::size_t arity() const override { return 3; }
  Json attrs() const override { return {{key_scale, m_scale}}; }
  double work(const std::vector<Shape>& x, const Shape& y) const override {
    return Op::work(x, y) + detail::flash_weights_work(x, detail::FlashPass::forward);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    detail::check_flash_scale(m_scale);
    return detail::flash_dims(x[0], x[1], x[2]).packed_shape();
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const auto shape = [](const xt::xarray<T>& a) { return Shape(a.shape().begin(), a.shape().end()); };
    const detail::FlashDims d = detail::flash_dims(shape(*x[0]), shape(*x[1]), shape(*x[2]));
    // Work items: (batch index, tile of queries), independent of each other, split over threads.
    const std::size_t tiles = (d.t_q + flash_tile_q - 1) / flash_tile_q;
    const T alpha = static_cast<T>(m_scale);
    const std::size_t chunks = std::min(detail::parallel_threads(), d.batch * tiles);
    T* buffer = detail::thread_scratch<T, 0>(chunks * ForwardScratch<T>::size(d));  // here: the threads must not throw
    std::vector<ForwardScratch<T>> scratches;
    for (std::size_t c = 0; c < chunks; ++c) scratches.emplace_back(d, buffer + c * ForwardScratch<T>::size(d));
    detail::parallel_blas_chunks(d.batch * tiles, chunks,
                                 [&](std::size_t chunk, std::size_t begin, std::size_t end) {
                                   ForwardScratch<T>& scratch = scratches[chunk];
                                   for (std::size_t item = begin; item < end; ++item) {
                                     const std::size_t b = item / tiles, i0 = item % tiles * flash_tile_q;
                                     flash_forward(x[0]->data() + b * d.t_q * d.d_k, x[1]->data() + b * d.t_k * d.d_k,
                                                   x[2]->data() + b * d.t_k * d.d_v, y.data() + b * d.t_q * (d.d_v + 1),
                                                   d, alpha, i0, std::min(flash_tile_q, d.t_q - i0), scratch);
                                   }
                                 });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    const auto shape = [](const Var<T>& x) { return Shape(x.value().shape().begin(), x.value().shape().end()); };
    const Shape qs = shape(a.x[0]), ks = shape(a.x[1]), vs = shape(a.x[2]);
    const detail::FlashDims d = detail::flash_dims(qs, ks, vs);
    const Var<T> grads = flash_attention_vjp(a.x[0], a.x[1], a.x[2], a.y, a.grad_out, m_scale);
    // grads holds grad_q, grad_k, grad_v one after the other along its last axis.
    const std::size_t ends[] = {d.t_q * d.d_k, d.t_q * d.d_k + d.t_k * d.d_k, d.grads_size()};
    const Shape* shapes[] = {&qs, &ks, &vs};
    std::vector<Var<T>> result(3);
    for (std::size_t i = 0; i < 3; ++i) {
      if (!a.wanted[i]) continue;
      const Var<T> part = slice(grads, -1, i == 0 ? 0 : ends[i - 1], ends[i]);
      result[i] = reshape(part, *shapes[i]);
    }
    return result;
  }

 private:
  double m_scale;
};

}  // namespace

template <class T>
Var<T> flash_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale) {
  return q.graph().apply(std::make_shared<FlashAttentionOp>(scale), {q, k, v});
}

std::shared_ptr<const Op> make_flash_attention_op(const JsonCursor& attrs) {
  attrs.check_object({key_scale});
  return std::make_shared<FlashAttentionOp>(attrs[key_scale].number());
}

template Var<float> flash_attention(const Var<float>&, const Var<float>&, const Var<float>&, double);
template Var<double> flash_attention(const Var<double>&, const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
