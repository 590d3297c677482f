// The fused attention against its composed graph, for flash_attention_test.cpp (plain and
// masked) and flash_attention_variants_test.cpp (soft-cap and sliding window): one problem's
// inputs, the composed scores and logsumexp, and the comparison of the two in values and
// gradients.
#pragma once

#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include <xgrad/graph/backward.hpp>
#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/ops/kernels/parallel.hpp>

namespace xgrad::test {

inline Shape with(Shape batch, std::size_t rows, std::size_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

inline Shape lse_shape(Shape batch, std::size_t t_q) {
  batch.push_back(t_q);
  return batch;
}

// max |a - b| / max |b| over the finite elements, where a and b have the same infinities (else
// +inf); NaN anywhere gives NaN; max |a - b| when b is all zero.
template <class T>
double relative_error(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  BOOST_TEST_REQUIRE(shapes_equal(a.shape(), b.shape()));
  constexpr double inf = std::numeric_limits<double>::infinity();
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a.data()[i]), y = static_cast<double>(b.data()[i]);
    if (std::isnan(x) || std::isnan(y)) return std::nan("");
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return inf;
      continue;
    }
    diff = std::max(diff, std::abs(x - y));
    scale = std::max(scale, std::abs(y));
  }
  return scale > 0 ? diff / scale : diff;
}

// One problem: shapes, the causal flag, the window (0: causal only if `causal`), the soft-cap
// (0: none), the key mask's shape ({}: none) and the spread of q and k (3: saturated scores).
// The key mask's rows (each over T_k): row 0 forbids every key when empty_row is set, odd rows
// are padding (a prefix of allowed keys, the rest forbidden), even rows have holes (1 in 4
// forbidden).
struct FlashCase {
  Shape batch;
  std::size_t t_q, t_k, d_k, d_v;
  bool causal = false;
  std::size_t window = 0;
  double softcap = 0;
  Shape key_shape = {};
  bool empty_row = false;
  double stddev = 1;
};

inline std::string str(const FlashCase& c) {
  return "batch " + shape_str(c.batch) + ", T_q " + std::to_string(c.t_q) + ", T_k " + std::to_string(c.t_k) + ", d_k " +
         std::to_string(c.d_k) + ", d_v " + std::to_string(c.d_v) + (c.causal ? ", causal" : "") +
         (c.window ? ", window " + std::to_string(c.window) : "") + (c.softcap > 0 ? ", softcap " + number_str(c.softcap) : "") +
         (c.key_shape.empty() ? "" : ", key mask " + shape_str(c.key_shape)) + (c.empty_row ? ", an empty row" : "") +
         ", stddev " + number_str(c.stddev);
}

// Draws the random cases of the agreement tests.
class RandomCases {
 public:
  explicit RandomCases(std::uint64_t seed) : m_rng(seed) {}
  // Uniform in [lo, hi].
  std::size_t pick(std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(m_rng); }
  double uniform(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(m_rng); }
  // 0 to 2 batch axes of 1 to 3 each.
  Shape batch() {
    Shape b(pick(0, 2));
    for (auto& n : b) n = pick(1, 3);
    return b;
  }
  // A key mask's shape for keys of length t_k: these batch axes, each kept or 1, then (1, t_k).
  Shape key_shape(Shape axes, std::size_t t_k) {
    for (auto& n : axes) n = pick(0, 1) ? n : 1;
    axes.insert(axes.end(), {1, t_k});
    return axes;
  }

 private:
  std::mt19937_64 m_rng;
};

inline xt::xarray<bool> key_mask_of(const FlashCase& c, std::uint64_t seed) {
  xt::xarray<bool> m = xt::xarray<bool>::from_shape(c.key_shape);
  std::mt19937_64 rng(seed);
  const std::size_t rows = m.size() / c.t_k;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t length = c.t_k * (r + 1) / (rows + 1) + 1;  // of an odd row's prefix
    for (std::size_t j = 0; j < c.t_k; ++j) {
      m.data()[r * c.t_k + j] = c.empty_row && r == 0 ? false : r % 2 == 1 ? j < length : rng() % 4 != 0;
    }
  }
  return m;
}

// The gradients w.r.t. xs of the ys with these seeds, summed (graph/backward.hpp).
template <class T>
std::vector<Var<T>> grads_of(const std::vector<Var<T>>& ys, const std::vector<Var<T>>& xs, const std::vector<Var<T>>& seeds) {
  const Accumulate<T> sum = sum_contributions<T>;
  return backward(ys, xs, seeds, sum);
}

// The composed attention's masked, capped scores for q, k and the key mask (if valid):
// matmul(scale(q, alpha), k^T), scale(tanh(scale(., 1/C)), C), then the masks' -inf.
template <class T>
Var<T> composed_scores(const FlashCase& c, const Var<T>& q, const Var<T>& k, const Var<T>& key_mask, double alpha) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  Graph<T>& g = q.graph();
  Var<T> s = matmul(scale(q, alpha), k, false, true);
  if (c.softcap > 0) s = scale(tanh(scale(s, 1.0 / c.softcap)), c.softcap);
  if (key_mask.valid()) s = apply_mask(s, key_mask, -inf);
  if (c.window > 0) {
    s = apply_mask(s, g.constant("window", xt::cast<T>(sliding_window_mask(c.t_q, c.t_k, c.window))), -inf);
  } else if (c.causal) {
    s = apply_mask(s, g.constant("causal", xt::cast<T>(causal_mask(c.t_q, c.t_k))), -inf);
  }
  return s;
}

// out, lse and the gradients w.r.t. q, k, v of sum(r * out) + sum(h * lse), in one graph: the
// fused node, or the composition with lse = m + log(sum(exp(masked - m)) + z), m each row's
// largest allowed score (0 if none) and z = 1 on a row of no allowed key, whose composed lse is
// then 0 where the fused one is -inf (set to -inf here) and whose gradient is exactly 0.
template <class T>
std::vector<xt::xarray<T>> flash_results(const FlashCase& c, bool fused, std::uint64_t seed) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  Graph<T> g;
  const auto q = g.input("q", random_array<T>(with(c.batch, c.t_q, c.d_k), seed, c.stddev));
  const auto k = g.input("k", random_array<T>(with(c.batch, c.t_k, c.d_k), seed + 1, c.stddev));
  const auto v = g.input("v", random_array<T>(with(c.batch, c.t_k, c.d_v), seed + 2));
  const auto r = g.constant("r", random_array<T>(with(c.batch, c.t_q, c.d_v), seed + 3));
  const auto h = g.constant("h", random_array<T>(lse_shape(c.batch, c.t_q), seed + 4));
  const Var<T> key_mask = c.key_shape.empty() ? Var<T>() : g.mask("key_mask", key_mask_of(c, seed + 5));
  const double alpha = 0.7;
  Var<T> out, lse;
  xt::xarray<T> z;
  if (fused) {
    const auto f = xgrad::flash_attention(q, k, v, alpha, FlashMask<T>{c.causal, key_mask, c.window}, c.softcap);
    out = f.out;
    lse = f.lse;
  } else {
    const Var<T> masked = composed_scores(c, q, k, key_mask, alpha);
    out = matmul(softmax(masked, -1), v);
    const Shape column = with(c.batch, c.t_q, 1);
    xt::xarray<T> m = xt::zeros<T>(column);
    z = xt::ones<T>(column);
    for (std::size_t i = 0; i < m.size(); ++i) {
      for (std::size_t j = 0; j < c.t_k; ++j) {
        const T s = masked.value().data()[i * c.t_k + j];
        if (s == -inf) continue;
        m.data()[i] = z.data()[i] != 0 ? s : std::max(m.data()[i], s);
        z.data()[i] = 0;
      }
    }
    const auto mc = g.constant("m", m), zc = g.constant("z", z);
    lse = reshape(add(mc, log(add(sum(exp(sub(masked, mc)), {-1}, true), zc))), lse_shape(c.batch, c.t_q));
  }
  std::vector<xt::xarray<T>> values = {out.value(), lse.value()};
  for (const auto& gr : grads_of<T>({out, lse}, {q, k, v}, {r, h})) values.push_back(gr.value());
  for (std::size_t i = 0; i < z.size(); ++i) {
    if (z.data()[i] != 0) values[1].data()[i] = -std::numeric_limits<T>::infinity();
  }
  return values;
}

// The fused results against the composed ones within tol (relative; the same infinities: lse
// -inf exactly on the rows of no allowed key; NaN fails). Returns the worst error.
template <class T>
double check_flash_agreement(const FlashCase& c, std::uint64_t seed, double tol) {
  const auto fused = flash_results<T>(c, true, seed);
  const auto composed = flash_results<T>(c, false, seed);
  const char* names[] = {"out", "lse", "grad_q", "grad_k", "grad_v"};
  double worst = 0;
  for (std::size_t i = 0; i < 5; ++i) {
    const double e = relative_error(fused[i], composed[i]);
    BOOST_TEST(e <= tol, str(c) << ": " << names[i] << " differs by " << e << " (relative), more than " << tol);
    worst = std::max(worst, e);
  }
  return worst;
}

// check_flash_agreement for each case, in T, with the seeds first_seed + 10, + 20, ...; the
// worst error, also as a test message naming `what`.
template <class T>
double check_flash_agreement(const std::vector<FlashCase>& cases, std::uint64_t first_seed, double tol,
                             const std::string& what) {
  double worst = 0;
  std::uint64_t seed = first_seed;
  for (const FlashCase& c : cases) worst = std::max(worst, check_flash_agreement<T>(c, seed += 10, tol));
  BOOST_TEST_MESSAGE(what << ", " << dtype_name<T>() << ": worst relative difference " << worst);
  return worst;
}

// The first-order gradients w.r.t. q, k, v of sum(s * out) (checked by finite differences if
// check_fd), and the second-order ones of sum(r_i * first_i) w.r.t. q, k, v, s.
inline std::vector<xt::xarray<double>> flash_second_order(const FlashCase& c, bool fused, bool check_fd) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>(with(c.batch, c.t_q, c.d_k), 200, c.stddev));
  const auto k = g.input("k", random_array<double>(with(c.batch, c.t_k, c.d_k), 201, c.stddev));
  const auto v = g.input("v", random_array<double>(with(c.batch, c.t_k, c.d_v), 202));
  const auto s = g.input("s", random_array<double>(with(c.batch, c.t_q, c.d_v), 203));
  const Var<double> key_mask = c.key_shape.empty() ? Var<double>() : g.mask("key_mask", key_mask_of(c, 204));
  const Var<double> out = fused ? xgrad::flash_attention(q, k, v, 0.8, FlashMask<double>{c.causal, key_mask, c.window}, c.softcap).out
                                : matmul(softmax(composed_scores(c, q, k, key_mask, 0.8), -1), v);
  const auto first = grad(out, {q, k, v}, s);
  if (check_fd) {
    for (std::size_t i = 0; i < 3; ++i) check_gradients(first[i], {q, k, v, s});
  }
  std::vector<xt::xarray<double>> values;
  for (std::size_t i = 0; i < 3; ++i) {
    const xt::xarray<double> r = random_array<double>(shape_of(first[i].value()), 205 + i);
    for (const auto& second : grad(first[i], {q, k, v, s}, r)) values.push_back(second.value());
  }
  return values;
}

// y = sum(r * grad_x), grad_x the gradient of sum(s * out): the fused node's first order by
// finite differences, its second order equal to the composed attention's within 1e-12.
inline void check_flash_second_order(const FlashCase& c) {
  BOOST_TEST_CONTEXT(str(c)) {
    const auto fused = flash_second_order(c, true, true);
    const auto composed = flash_second_order(c, false, false);
    for (std::size_t i = 0; i < fused.size(); ++i) {
      const double e = relative_error(fused[i], composed[i]);  // NaN fails
      BOOST_TEST(e <= 1e-12, "second-order gradient " << i << " differs by " << e);
    }
  }
}

// out = attend(q, k, v) and the gradients of sum(r * out) w.r.t. q, k, v with 1 and 2 threads,
// for 3 batch indices (the backward split by batch index) and 1 (split by key tile, each thread
// summing its own grad_q): out, grad_k and grad_v repeat their bits, and grad_q does when split
// by batch index.
inline void check_tiles_split_by_threads(
    std::size_t t_q, std::size_t t_k,
    const std::function<Var<double>(const Var<double>&, const Var<double>&, const Var<double>&)>& attend) {
  BlasThreads threads_set(1);
  for (const std::size_t batch : {3, 1}) {
    std::vector<xt::xarray<double>> values[2];
    for (int threads : {1, 2}) {
      threads_set.set(threads);
      BOOST_TEST_REQUIRE(detail::parallel_threads() == std::size_t(threads));
      Graph<double> g;
      const auto q = g.input("q", random_array<double>({batch, t_q, 8}, 30));
      const auto k = g.input("k", random_array<double>({batch, t_k, 8}, 31));
      const auto v = g.input("v", random_array<double>({batch, t_k, 4}, 32));
      const auto out = attend(q, k, v);
      values[threads - 1].push_back(out.value());
      for (const auto& gr : grad(out, {q, k, v}, random_array<double>({batch, t_q, 4}, 33))) values[threads - 1].push_back(gr.value());
      BOOST_TEST(openblas_get_num_threads() == threads);  // restored after the fused nodes
    }
    BOOST_TEST_CONTEXT("batch " << batch) {
      for (std::size_t i : {0, 2, 3}) BOOST_TEST(values[0][i] == values[1][i], "value " << i);
      if (batch == 3) BOOST_TEST(values[0][1] == values[1][1]);
      BOOST_TEST(relative_error(values[1][1], values[0][1]) <= 1e-14);
    }
  }
}

// g's outputs and gradients through to_onnx and back (import_onnx), its float64 inputs given
// their values and, if `mask` names one, a mask leaf its booleans: each within 1e-12 (relative).
inline void check_onnx_round_trip(Graph<double>& g, const std::vector<Var<double>>& inputs,
                                  const std::string& mask = "", const xt::xarray<bool>& keep = {}) {
  OnnxImportOptions options;
  for (const auto& x : inputs) {
    OnnxTensor t;
    t.dtype = "float64";
    t.real = x.value();
    options.inputs[x.node().name] = t;
  }
  if (!mask.empty()) {
    OnnxTensor t;
    t.dtype = "bool";
    t.ints = xt::cast<std::int64_t>(keep);
    options.inputs[mask] = t;
  }
  const auto back = import_onnx_bytes<double>(to_onnx_bytes(g), "flash_attention", options);
  for (const auto& [name, slot] : g.outputs()) {
    BOOST_TEST(relative_error(back->var(back->outputs().at(name)).value(), g.var(slot).value()) <= 1e-12, name);
  }
  for (const auto& [name, slot] : g.grads()) {
    BOOST_TEST(relative_error(back->var(back->outputs().at("grad_" + name)).value(), g.var(slot).value()) <= 1e-12, name);
  }
}

}  // namespace xgrad::test
