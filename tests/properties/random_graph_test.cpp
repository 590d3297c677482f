// Property tests over random graphs built from every registered op: random shapes (size-1 axes
// and batch axes included), fixed seeds, hundreds of cases. For each graph:
//  - every node's forward value equals a naive float64 reference written in plain loops;
//  - gradcheck in float64 passes for the last node w.r.t. every leaf;
//  - export -> import -> replay -> export is string- and bit-identical.
#include "../check.hpp"
#include "random_graph.hpp"

#include <xgrad/ops/kernels/philox.hpp>

#include <xtensor/xadapt.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <random>

namespace {

// A reference array: a shape and row-major float64 data, computed without xtensor or BLAS.
struct Ref {
  Shape shape;
  std::vector<double> data;
};

std::size_t ravel(const std::vector<std::size_t>& i, const Shape& s) {
  std::size_t flat = 0;
  for (std::size_t a = 0; a < s.size(); ++a) flat = flat * s[a] + i[a];
  return flat;
}
std::size_t norm_axis(long axis, std::size_t rank) { return static_cast<std::size_t>(axis < 0 ? axis + static_cast<long>(rank) : axis); }

std::size_t broadcast_source(std::size_t flat, const Shape& big, const Shape& small);

// op(a) @ op(b), the batch axes of a and b broadcast together.
Ref ref_matmul(const Ref& a, const Ref& b, bool ta, bool tb) {
  const std::size_t ra = a.shape.size(), rb = b.shape.size();
  const std::size_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2], k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const std::size_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  const Shape batch_a(a.shape.begin(), a.shape.end() - 2), batch_b(b.shape.begin(), b.shape.end() - 2);
  Shape batch = batch_a.size() >= batch_b.size() ? batch_a : batch_b;
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const std::size_t lead_a = batch.size() - batch_a.size(), lead_b = batch.size() - batch_b.size();
    const std::size_t da = i < lead_a ? 1 : batch_a[i - lead_a], db = i < lead_b ? 1 : batch_b[i - lead_b];
    batch[i] = da == 1 ? db : da;
  }
  Ref y{batch, {}};
  y.shape.push_back(m);
  y.shape.push_back(n);
  const std::size_t as = a.shape[ra - 2] * a.shape[ra - 1], bs = b.shape[rb - 2] * b.shape[rb - 1];
  for (std::size_t p = 0; p < shape_size(batch); ++p) {
    const std::size_t pa = broadcast_source(p, batch, batch_a), pb = broadcast_source(p, batch, batch_b);
    for (std::size_t i = 0; i < m; ++i) {
      for (std::size_t j = 0; j < n; ++j) {
        double s = 0;
        for (std::size_t l = 0; l < k; ++l) {
          const double av = a.data[pa * as + (ta ? l * m + i : i * k + l)];
          const double bv = b.data[pb * bs + (tb ? j * k + l : l * n + j)];
          s += av * bv;
        }
        y.data.push_back(s);
      }
    }
  }
  return y;
}

Ref ref_transpose(const Ref& x) {
  Ref y{x.shape, std::vector<double>(x.data.size())};
  std::swap(y.shape[y.shape.size() - 1], y.shape[y.shape.size() - 2]);
  for (std::size_t f = 0; f < x.data.size(); ++f) {
    auto i = unravel_index(f, x.shape);
    std::swap(i[i.size() - 1], i[i.size() - 2]);
    y.data[ravel(i, y.shape)] = x.data[f];
  }
  return y;
}

// Calls f(flat indices of one row along axis) for every row.
template <class F>
void for_rows(const Shape& s, std::size_t axis, F&& f) {
  for (std::size_t flat = 0; flat < shape_size(s); ++flat) {
    auto i = unravel_index(flat, s);
    if (i[axis] != 0) continue;
    std::vector<std::size_t> row;
    for (std::size_t j = 0; j < s[axis]; ++j) {
      i[axis] = j;
      row.push_back(ravel(i, s));
    }
    f(row);
  }
}

// The two reductions of a stable softmax over one row of x: its maximum m and sum(exp(x - m)).
struct RowMaxSum {
  double m = -INFINITY, s = 0;
};
RowMaxSum row_max_sum(const Ref& x, const std::vector<std::size_t>& row) {
  RowMaxSum r;
  for (auto f : row) r.m = std::max(r.m, x.data[f]);
  for (auto f : row) r.s += std::exp(x.data[f] - r.m);
  return r;
}

Ref ref_softmax(const Ref& x, long axis) {
  Ref y = x;
  for_rows(x.shape, norm_axis(axis, x.shape.size()), [&](const std::vector<std::size_t>& row) {
    const auto [m, s] = row_max_sum(x, row);
    for (auto f : row) y.data[f] = std::exp(x.data[f] - m) / s;
  });
  return y;
}

Ref ref_softmax_vjp(const Ref& y, const Ref& g, long axis) {
  Ref z = y;
  for_rows(y.shape, norm_axis(axis, y.shape.size()), [&](const std::vector<std::size_t>& row) {
    double s = 0;
    for (auto f : row) s += g.data[f] * y.data[f];
    for (auto f : row) z.data[f] = y.data[f] * (g.data[f] - s);
  });
  return z;
}

// The index into `small` (broadcast to big's shape) of big's element `flat`.
std::size_t broadcast_source(std::size_t flat, const Shape& big, const Shape& small) {
  const auto i = unravel_index(flat, big);
  std::vector<std::size_t> j(small.size());
  const std::size_t lead = big.size() - small.size();
  for (std::size_t a = 0; a < small.size(); ++a) j[a] = small[a] == 1 ? 0 : i[lead + a];
  return ravel(j, small);
}

Ref ref_broadcast_to(const Ref& x, const Shape& to) {
  Ref y{to, std::vector<double>(shape_size(to))};
  for (std::size_t f = 0; f < y.data.size(); ++f) y.data[f] = x.data[broadcast_source(f, to, x.shape)];
  return y;
}

Ref ref_sum_to(const Ref& x, const Shape& to) {
  Ref y{to, std::vector<double>(shape_size(to), 0.0)};
  for (std::size_t f = 0; f < x.data.size(); ++f) y.data[broadcast_source(f, x.shape, to)] += x.data[f];
  return y;
}

// op(a, b), or op(b, a) if swapped, b broadcast to a's shape.
Ref ref_elementwise(const Ref& a, const Ref& b, double (*op)(double, double), bool swap) {
  Ref y = a;
  for (std::size_t f = 0; f < y.data.size(); ++f) {
    const double bv = b.data[broadcast_source(f, a.shape, b.shape)];
    y.data[f] = swap ? op(bv, a.data[f]) : op(a.data[f], bv);
  }
  return y;
}

// cond != 0 ? a : b, the three broadcast together to the largest rank, each axis the longest.
Ref ref_where(const Ref& c, const Ref& a, const Ref& b) {
  Shape to(std::max({c.shape.size(), a.shape.size(), b.shape.size()}), 1);
  for (const Ref* x : {&c, &a, &b}) {
    for (std::size_t i = 0; i < x->shape.size(); ++i) {
      std::size_t& d = to[to.size() - x->shape.size() + i];
      d = std::max(d, x->shape[i]);
    }
  }
  Ref y{to, std::vector<double>(shape_size(to))};
  for (std::size_t f = 0; f < y.data.size(); ++f) {
    y.data[f] = c.data[broadcast_source(f, to, c.shape)] != 0 ? a.data[broadcast_source(f, to, a.shape)]
                                                              : b.data[broadcast_source(f, to, b.shape)];
  }
  return y;
}

// The rows of ops/elementwise.def, each one more op of the generator. A row's reference is its
// own forward on one element (elementwise::name, which the op's suite checks against hand
// values): here the graphs check the machinery around it (broadcasting, VJPs, export, replay).
// A row of domain positive gets x (b for a binary row) as a new leaf drawn from U(0.5, 2).
struct UnaryRow {
  const char* name;
  Var<double> (*op)(const Var<double>&);
  double (*reference)(double);
  elementwise::Domain domain;
};
struct BinaryRow {
  const char* name;
  Var<double> (*op)(const Var<double>&, const Var<double>&);
  double (*reference)(double, double);
  elementwise::Domain domain;
};
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                                     \
  {#NAME, &xgrad::NAME<double>, &elementwise::NAME<double>, elementwise::Domain::DOMAIN},
const UnaryRow unary_rows[] = {
#include <xgrad/ops/elementwise.def>
};
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                           \
  {#NAME, &xgrad::NAME<double>, &elementwise::NAME<double>, elementwise::Domain::DOMAIN},
const BinaryRow binary_rows[] = {
#include <xgrad/ops/elementwise.def>
};

// Sum (or mean) over the sorted axes, kept as 1 or dropped.
Ref ref_reduce(const Ref& x, const std::vector<std::size_t>& axes, bool keepdims, bool average) {
  Shape kept = x.shape;
  std::size_t n = 1;
  for (auto a : axes) {
    n *= kept[a];
    kept[a] = 1;
  }
  Ref y = ref_sum_to(x, kept);
  if (average) {
    for (auto& e : y.data) e /= static_cast<double>(n);
  }
  if (!keepdims) {
    Shape out;
    for (std::size_t i = 0; i < x.shape.size(); ++i) {
      if (std::find(axes.begin(), axes.end(), i) == axes.end()) out.push_back(x.shape[i]);
    }
    y.shape = out;
  }
  return y;
}

Ref ref_log_softmax(const Ref& x, long axis) {
  Ref y = x;
  for_rows(x.shape, norm_axis(axis, x.shape.size()), [&](const std::vector<std::size_t>& row) {
    const auto [m, s] = row_max_sum(x, row);
    for (auto f : row) y.data[f] = x.data[f] - m - std::log(s);
  });
  return y;
}

Ref ref_slice(const Ref& x, std::size_t axis, std::size_t begin, std::size_t end) {
  Ref y{x.shape, {}};
  y.shape[axis] = end - begin;
  for (std::size_t f = 0; f < shape_size(y.shape); ++f) {
    auto i = unravel_index(f, y.shape);
    i[axis] += begin;
    y.data.push_back(x.data[ravel(i, x.shape)]);
  }
  return y;
}

// numpy.concatenate of the parts along axis.
Ref ref_concat(const std::vector<Ref>& parts, std::size_t axis) {
  Ref y{parts[0].shape, {}};
  y.shape[axis] = 0;
  for (const Ref& p : parts) y.shape[axis] += p.shape[axis];
  for (std::size_t f = 0; f < shape_size(y.shape); ++f) {
    auto i = unravel_index(f, y.shape);
    std::size_t k = 0;
    while (i[axis] >= parts[k].shape[axis]) i[axis] -= parts[k++].shape[axis];
    y.data.push_back(parts[k].data[ravel(i, parts[k].shape)]);
  }
  return y;
}

Ref ref_pad(const Ref& x, std::size_t axis, std::size_t before, std::size_t after) {
  Ref y{x.shape, {}};
  y.shape[axis] += before + after;
  for (std::size_t f = 0; f < shape_size(y.shape); ++f) {
    auto i = unravel_index(f, y.shape);
    const bool inside = i[axis] >= before && i[axis] < before + x.shape[axis];
    i[axis] -= inside ? before : 0;
    y.data.push_back(inside ? x.data[ravel(i, x.shape)] : 0.0);
  }
  return y;
}

// Attention per batch index, in plain loops: out and lse (flash_attention) and, given grad_out
// and grad_lse, the gradients w.r.t. q, k and v (flash_attention_vjp); with a soft-cap C > 0
// (scores C tanh(s / C)) and a causal window of W > 0 keys (i' - W < j <= i', i' = i + T_k - T_q;
// drawn only where every row keeps a key, T_q <= T_k).
struct RefAttention {
  std::size_t batch, t_q, t_k, d_k, d_v;
  double cap;
  std::size_t window;
  RefAttention(const Ref& q, const Ref& k, const Ref& v, double softcap, std::size_t w)
      : batch(shape_size(Shape(q.shape.begin(), q.shape.end() - 2))), t_q(q.shape[q.shape.size() - 2]),
        t_k(k.shape[k.shape.size() - 2]), d_k(q.shape.back()), d_v(v.shape.back()), cap(softcap), window(w) {}
  bool allowed(std::size_t i, std::size_t j) const {
    const double last = static_cast<double>(i + t_k) - static_cast<double>(t_q);  // i'
    return window == 0 || (static_cast<double>(j) <= last && static_cast<double>(j) > last - static_cast<double>(window));
  }
  // The weights of batch index b, row i; with `derivative`, the cap's 1 - tanh^2 of each score.
  std::vector<double> weights(const Ref& q, const Ref& k, double alpha, std::size_t b, std::size_t i, double* lse,
                              std::vector<double>* derivative = nullptr) const {
    std::vector<double> w(t_k);
    if (derivative) derivative->assign(t_k, 1.0);
    double max = -INFINITY, sum = 0;
    for (std::size_t j = 0; j < t_k; ++j) {
      double s = 0;
      for (std::size_t l = 0; l < d_k; ++l) s += q.data[(b * t_q + i) * d_k + l] * k.data[(b * t_k + j) * d_k + l];
      w[j] = alpha * s;
      if (cap > 0) {
        const double t = std::tanh(w[j] / cap);
        w[j] = cap * t;
        if (derivative) (*derivative)[j] = 1 - t * t;
      }
      if (!allowed(i, j)) w[j] = -INFINITY;
      max = std::max(max, w[j]);
    }
    for (auto& x : w) sum += (x = std::exp(x - max));
    for (auto& x : w) x /= sum;
    *lse = max + std::log(sum);
    return w;
  }
};

std::vector<Ref> ref_flash_attention(const Ref& q, const Ref& k, const Ref& v, double alpha, double cap, std::size_t window) {
  const RefAttention a(q, k, v, cap, window);
  Ref out{Shape(q.shape.begin(), q.shape.end() - 1), {}}, lse{Shape(q.shape.begin(), q.shape.end() - 1), {}};
  out.shape.push_back(a.d_v);
  for (std::size_t b = 0; b < a.batch; ++b) {
    for (std::size_t i = 0; i < a.t_q; ++i) {
      double row_lse = 0;
      const auto w = a.weights(q, k, alpha, b, i, &row_lse);
      for (std::size_t c = 0; c < a.d_v; ++c) {
        double o = 0;
        for (std::size_t j = 0; j < a.t_k; ++j) o += w[j] * v.data[(b * a.t_k + j) * a.d_v + c];
        out.data.push_back(o);
      }
      lse.data.push_back(row_lse);
    }
  }
  return {out, lse};
}

std::vector<Ref> ref_flash_attention_vjp(const Ref& q, const Ref& k, const Ref& v, const Ref& grad_out,
                                         const Ref& grad_lse, double alpha, double cap, std::size_t window) {
  const RefAttention a(q, k, v, cap, window);
  const std::size_t nq = a.t_q * a.d_k, nk = a.t_k * a.d_k, nv = a.t_k * a.d_v;
  Ref rq{q.shape, std::vector<double>(a.batch * nq, 0.0)}, rk{k.shape, std::vector<double>(a.batch * nk, 0.0)},
      rv{v.shape, std::vector<double>(a.batch * nv, 0.0)};
  for (std::size_t b = 0; b < a.batch; ++b) {
    double* gq = &rq.data[b * nq];
    double* gk = &rk.data[b * nk];
    double* gv = &rv.data[b * nv];
    for (std::size_t i = 0; i < a.t_q; ++i) {
      double lse = 0;
      std::vector<double> capped;  // d c(s) / d s
      const auto w = a.weights(q, k, alpha, b, i, &lse, &capped);
      const double* g = &grad_out.data[(b * a.t_q + i) * a.d_v];
      const double g_lse = grad_lse.data[b * a.t_q + i];
      std::vector<double> dw(a.t_k);
      double dot = 0;
      for (std::size_t j = 0; j < a.t_k; ++j) {
        for (std::size_t c = 0; c < a.d_v; ++c) {
          dw[j] += g[c] * v.data[(b * a.t_k + j) * a.d_v + c];
          gv[j * a.d_v + c] += w[j] * g[c];
        }
        dot += dw[j] * w[j];
      }
      for (std::size_t j = 0; j < a.t_k; ++j) {
        const double ds = alpha * w[j] * (dw[j] - dot + g_lse) * capped[j];
        for (std::size_t l = 0; l < a.d_k; ++l) {
          gq[i * a.d_k + l] += ds * k.data[(b * a.t_k + j) * a.d_k + l];
          gk[j * a.d_k + l] += ds * q.data[(b * a.t_q + i) * a.d_k + l];
        }
      }
    }
  }
  return {rq, rk, rv};
}

// Rows of table (V, d) picked by ids (given as doubles), and the scatter-add back.
Ref ref_embedding(const Ref& table, const Ref& ids) {
  const std::size_t d = table.shape[1];
  Ref y{ids.shape, {}};
  y.shape.push_back(d);
  for (double id : ids.data) {
    for (std::size_t c = 0; c < d; ++c) y.data.push_back(table.data[static_cast<std::size_t>(id) * d + c]);
  }
  return y;
}
Ref ref_embedding_vjp(const Ref& g, const Ref& ids, std::size_t rows) {
  const std::size_t d = g.shape.back();
  Ref y{{rows, d}, std::vector<double>(rows * d, 0.0)};
  for (std::size_t i = 0; i < ids.data.size(); ++i) {
    for (std::size_t c = 0; c < d; ++c) y.data[static_cast<std::size_t>(ids.data[i]) * d + c] += g.data[i * d + c];
  }
  return y;
}

// Each position's entry of x (..., C) at its label, x's leading axes broadcast to the labels'
// shape `ls`, 0 where the label is ignore_index; and the scatter back, (ls..., C).
Ref ref_take_label(const Ref& x, const Ref& labels, std::optional<std::int64_t> ignore) {
  const std::size_t c = x.shape.back();
  const Shape lead(x.shape.begin(), x.shape.end() - 1);
  Ref y{labels.shape, {}};
  for (std::size_t f = 0; f < labels.data.size(); ++f) {
    const auto l = static_cast<std::int64_t>(labels.data[f]);
    y.data.push_back(ignore && l == *ignore ? 0.0 : x.data[broadcast_source(f, labels.shape, lead) * c + static_cast<std::size_t>(l)]);
  }
  return y;
}
Ref ref_take_label_vjp(const Ref& g, const Ref& labels, std::size_t c, std::optional<std::int64_t> ignore) {
  Ref y{labels.shape, std::vector<double>(labels.data.size() * c, 0.0)};
  y.shape.push_back(c);
  for (std::size_t f = 0; f < labels.data.size(); ++f) {
    const auto l = static_cast<std::int64_t>(labels.data[f]);
    if (!(ignore && l == *ignore)) y.data[f * c + static_cast<std::size_t>(l)] = g.data[f];
  }
  return y;
}

// Inverted dropout: element f kept when its Philox bits (the generator its suite checks against
// Random123's known answers) are below floor((1 - p) 2^32); x itself in evaluation or for p = 0.
Ref ref_dropout(const Ref& x, double p, std::uint64_t seed, std::uint64_t step, bool training) {
  Ref y = x;
  if (!training || p == 0) return y;
  const double threshold = std::floor(std::ldexp(1.0 - p, 32));
  for (std::size_t f = 0; f < y.data.size(); ++f) {
    const bool kept = static_cast<double>(detail::philox_bits(seed, step, f)) < threshold;
    y.data[f] = x.data[f] * (kept ? 1.0 / (1.0 - p) : 0.0);
  }
  return y;
}

// A random graph and, node by node, its reference values.
class RandomGraph {
 public:
  explicit RandomGraph(std::uint64_t seed) : m_rng(seed), m_seed(seed) {
    // The run state dropout reads: a few steps, and evaluation mode in one graph of five.
    m_g.set_step(seed % 4);
    m_g.set_training(seed % 5 != 4);
    Shape batch;
    for (std::size_t b = pick(0, 2); b > 0; --b) batch.push_back(pick(1, 2));
    m_batch = batch;
    leaf(with_batch({pick(1, 3), pick(1, 3)}));
    leaf(with_batch({pick(1, 3), pick(1, 3)}));
    for (int step = 0, steps = static_cast<int>(pick(5, 10)); step < steps; ++step) grow();
  }

  Graph<double>& graph() { return m_g; }
  // refs()[node][output]
  const std::vector<std::vector<Ref>>& refs() const { return m_refs; }
  // The inputs, which gradcheck perturbs (masks and ids are constants, mask leaves or index
  // leaves: a 0/1 step and an id have no derivative).
  std::vector<Var<double>> leaves() {
    std::vector<Var<double>> out;
    for (std::size_t i = 0; i < m_g.size(); ++i) {
      if (m_g.node(i).role == Role::input && !m_g.node(i).has_no_gradient()) out.push_back(m_g.var(i));
    }
    return out;
  }
  std::string ops() const {
    std::string s;
    for (std::size_t i = 0; i < m_g.size(); ++i) s += m_g.node(i).op_name() + " " + shape_str(m_g.node(i).shape()) + "; ";
    return s;
  }

 private:
  std::size_t pick(std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(m_rng); }
  Shape with_batch(Shape s) {
    Shape out = m_batch;
    out.insert(out.end(), s.begin(), s.end());
    return out;
  }
  Var<double> leaf(const Shape& shape) {
    const auto v = m_g.input("x" + std::to_string(m_g.size()), random_array<double>(shape, m_seed * 1000 + m_g.size()));
    m_refs.push_back({{shape, std::vector<double>(v.value().begin(), v.value().end())}});
    return v;
  }
  Var<double> positive_leaf(const Shape& shape) {
    const auto v = m_g.input("p" + std::to_string(m_g.size()), xt::xarray<double>::from_shape(shape));
    xt::xarray<double> value = v.value();
    std::uniform_real_distribution<double> u(0.5, 2.0);
    for (auto& e : value) e = u(m_rng);
    m_g.set_value(v, value);
    m_refs.push_back({{shape, std::vector<double>(value.begin(), value.end())}});
    return v;
  }
  // A mask of 1 and 0, never perturbed: a constant or a mask leaf (Graph::mask), new leaves.
  Var<double> mask_leaf(const Shape& shape) {
    Ref mask{shape, std::vector<double>(shape_size(shape))};
    for (auto& m : mask.data) m = static_cast<double>(pick(0, 1));
    const std::string name = "mask" + std::to_string(m_g.size());
    Var<double> v;
    if (pick(0, 1)) {
      xt::xarray<bool> b = xt::xarray<bool>::from_shape(shape);
      std::transform(mask.data.begin(), mask.data.end(), b.begin(), [](double m) { return m != 0; });
      v = m_g.mask(name, b);
    } else {
      v = m_g.constant(name, xt::adapt(mask.data, shape));
    }
    m_refs.push_back({mask});
    return v;
  }
  Var<double> node_or_leaf_like(const Shape& shape) {
    std::vector<std::size_t> same;
    for (std::size_t i = 0; i < m_g.size(); ++i) {  // a mask leaf (no value()) only as a mask
      if (!m_g.node(i).has_no_gradient() && shapes_equal(m_g.node(i).value().shape(), shape)) same.push_back(i);
    }
    if (!same.empty() && pick(0, 1)) return m_g.var(same[pick(0, same.size() - 1)]);
    return leaf(shape);
  }
  const Ref& ref(const Var<double>& v) const { return m_refs[v.id()][v.output()]; }
  // Ids into a table of `rows` rows, of rank 0 to 2: an index leaf or a constant of doubles,
  // either way new leaves (their reference holds the ids as doubles; an index leaf's value is
  // empty, and so is the reference the forward test compares with it).
  std::pair<Var<double>, Ref> ids_leaf(std::size_t rows) {
    Shape s;
    for (std::size_t a = pick(0, 2); a > 0; --a) s.push_back(pick(1, 3));
    Ref ids{s, {}};
    for (std::size_t i = 0; i < shape_size(s); ++i) ids.data.push_back(static_cast<double>(pick(0, rows - 1)));
    const std::string name = "ids" + std::to_string(m_g.size());
    if (pick(0, 1)) {
      xt::xarray<std::int64_t> v = xt::xarray<std::int64_t>::from_shape(s);
      std::copy(ids.data.begin(), ids.data.end(), v.begin());
      const Var<double> leaf = m_g.indices(name, v);
      m_refs.push_back({Ref{{0}, {}}});
      return {leaf, ids};
    }
    const Var<double> leaf = m_g.constant(name, xt::adapt(ids.data, s));
    m_refs.push_back({ids});
    return {leaf, ids};
  }
  // Labels for x (..., C): an index leaf of x's leading shape with some axes of 1 stretched and
  // perhaps a new leading axis, each label a class or (one in four, when there is one) the
  // ignore_index: none, -100, or a class. Its reference holds the labels as doubles.
  std::pair<Var<double>, Ref> labels_leaf(const Shape& x_shape, std::optional<std::int64_t>& ignore) {
    Shape s(x_shape.begin(), x_shape.end() - 1);
    for (auto& d : s) {
      if (d == 1 && pick(0, 1)) d = pick(1, 3);
    }
    if (pick(0, 2) == 0) s.insert(s.begin(), pick(1, 2));
    const std::size_t classes = x_shape.back(), kind = pick(0, 2);
    ignore = kind == 0 ? std::nullopt : kind == 1 ? std::optional<std::int64_t>(-100) : std::optional<std::int64_t>(pick(0, classes - 1));
    Ref labels{s, {}};
    xt::xarray<std::int64_t> v = xt::xarray<std::int64_t>::from_shape(s);
    for (std::size_t i = 0; i < v.size(); ++i) {
      v.data()[i] = ignore && pick(0, 3) == 0 ? *ignore : static_cast<std::int64_t>(pick(0, classes - 1));
      labels.data.push_back(static_cast<double>(v.data()[i]));
    }
    const Var<double> leaf = m_g.indices("labels" + std::to_string(m_g.size()), v);
    m_refs.push_back({Ref{{0}, {}}});
    return {leaf, labels};
  }
  void add_ref(const Var<double>& v, Ref r) { add_refs({v}, {std::move(r)}); }
  // The references of every output of a new node.
  void add_refs(const std::vector<Var<double>>& outputs, std::vector<Ref> r) {
    BOOST_REQUIRE(outputs.front().id() == m_refs.size());
    BOOST_REQUIRE(outputs.size() == r.size());
    for (std::size_t k = 0; k < r.size(); ++k) BOOST_REQUIRE(shapes_equal(outputs[k].value().shape(), r[k].shape));
    m_refs.push_back(std::move(r));
  }

  // One random op on a random earlier node (and, where needed, a second input made to fit).
  void grow() {
    std::size_t node = pick(0, m_g.size() - 1);
    while (m_g.node(node).has_no_gradient()) node = pick(0, m_g.size() - 1);  // ids feed embeddings, masks masks
    const Var<double> x = m_g.var(node, pick(0, m_g.node(node).output_count() - 1));
    const Shape s = shape_of(x);
    const Ref rx = ref(x);  // a copy: leaves made below grow m_refs
    const std::size_t r = s.size();
    // Cases 0-33 of the switch below, then each row of ops/elementwise.def: every one as likely.
    constexpr std::size_t general = 34, unary = std::size(unary_rows), binary = std::size(binary_rows);
    std::size_t op = pick(0, general + unary + binary - 1);
    if (r < 2 && (op < 2 || op == 14 || op == 15 || op == 33)) op = 2;  // matmul, transpose, flash_attention, linear: rank >= 2
    // A scalar (from a full sum): no axis to normalise, sum to, mask, slice or pad; broadcast it instead.
    if (r == 0 && ((op >= 3 && op <= 6) || (op >= 11 && op <= 15) || op == 21 || (op >= 23 && op <= 29) || op == 32)) op = 16;
    if (op >= general && op < general + unary) {
      const UnaryRow& row = unary_rows[op - general];
      const Var<double> in = row.domain == elementwise::Domain::positive ? positive_leaf(s)
                             : row.domain == elementwise::Domain::mask   ? mask_leaf(s)
                                                                         : x;
      Ref y = ref(in);
      for (auto& e : y.data) e = row.reference(e);
      return add_ref(row.op(in), y);
    }
    if (op >= general + unary) {  // b of x's shape, or of a shape that broadcasts to it, either side
      const BinaryRow& row = binary_rows[op - general - unary];
      Shape bs(s.begin() + static_cast<long>(pick(0, 1) ? 0 : pick(0, r)), s.end());
      for (auto& d : bs) {
        if (pick(0, 2) == 0) d = 1;
      }
      const bool positive = row.domain == elementwise::Domain::positive;
      const Var<double> b = positive ? positive_leaf(bs) : row.domain == elementwise::Domain::mask ? mask_leaf(bs) : node_or_leaf_like(bs);
      const Ref rb = ref(b);
      const bool swap = !positive && pick(0, 1);
      return add_ref(swap ? row.op(b, x) : row.op(x, b), ref_elementwise(rx, rb, row.reference, swap));
    }
    switch (op) {
      case 0: {  // matmul, with random transpose flags; b's batch axes x's, or fewer, or some 1
        const bool ta = pick(0, 1), tb = pick(0, 1);
        const std::size_t k = ta ? s[r - 2] : s[r - 1], n = pick(1, 3);
        Shape bs(s.begin() + static_cast<long>(pick(0, 1) ? 0 : pick(0, r - 2)), s.end() - 2);
        for (auto& d : bs) {
          if (pick(0, 2) == 0) d = 1;
        }
        bs.push_back(tb ? n : k);
        bs.push_back(tb ? k : n);
        const Var<double> b = node_or_leaf_like(bs);
        const Ref rb = ref(b);
        const Var<double> y = matmul(x, b, ta, tb);
        return add_ref(y, ref_matmul(rx, rb, ta, tb));
      }
      case 1: return add_ref(transpose(x), ref_transpose(rx));
      case 2: {
        const double alpha = std::uniform_real_distribution<double>(-2, 2)(m_rng);
        Ref y = rx;
        for (auto& e : y.data) e *= alpha;
        return add_ref(scale(x, alpha), y);
      }
      case 3: {
        const long axis = static_cast<long>(pick(0, r - 1)) - (pick(0, 1) ? static_cast<long>(r) : 0);
        return add_ref(softmax(x, axis), ref_softmax(rx, axis));
      }
      case 4: {
        const long axis = static_cast<long>(pick(0, r - 1));
        const Var<double> y = softmax(x, axis);
        add_ref(y, ref_softmax(rx, axis));
        const Var<double> g = node_or_leaf_like(s);
        const Ref rg = ref(g);
        return add_ref(softmax_vjp(y, g, axis), ref_softmax_vjp(ref(y), rg, axis));
      }
      case 5: {  // sum over some axes, dropping some leading ones
        Shape to(s.begin() + static_cast<long>(pick(0, r - 1)), s.end());
        for (auto& d : to) {
          if (pick(0, 1)) d = 1;
        }
        return add_ref(sum_to(x, to), ref_sum_to(rx, to));
      }
      case 6: {  // a 0/1 mask over the last axes, a finite fill
        const Shape ms(s.begin() + static_cast<long>(pick(0, r - 1)), s.end());
        Ref mask{ms, std::vector<double>(shape_size(ms))};
        for (auto& m : mask.data) m = static_cast<double>(pick(0, 1));
        const Var<double> mv = m_g.constant("mask" + std::to_string(m_g.size()), xt::adapt(mask.data, ms));
        m_refs.push_back({mask});
        const double fill = pick(0, 1) ? -3.0 : 0.0;
        Ref y = rx;
        for (std::size_t f = 0; f < y.data.size(); ++f) {
          if (mask.data[broadcast_source(f, s, ms)] == 0) y.data[f] = fill;
        }
        return add_ref(apply_mask(x, mv, fill), y);
      }
      case 7: {  // reshape: merge the last two axes, or add an axis of 1
        Shape to = s;
        if (r >= 2 && pick(0, 1)) {
          to.pop_back();
          to.back() *= s.back();
        } else {
          to.insert(to.begin() + static_cast<long>(pick(0, r)), 1);
        }
        return add_ref(reshape(x, to), Ref{to, rx.data});
      }
      case 8: {  // permute: a random order of the axes
        std::vector<std::size_t> axes(r);
        for (std::size_t i = 0; i < r; ++i) axes[i] = i;
        std::shuffle(axes.begin(), axes.end(), m_rng);
        Shape to;
        for (auto a : axes) to.push_back(s[a]);
        Ref y{to, std::vector<double>(rx.data.size())};
        for (std::size_t f = 0; f < y.data.size(); ++f) {
          const auto i = unravel_index(f, to);
          std::vector<std::size_t> j(r);
          for (std::size_t a = 0; a < r; ++a) j[axes[a]] = i[a];
          y.data[f] = rx.data[ravel(j, s)];
        }
        return add_ref(permute(x, axes), y);
      }
      case 9:
      case 10: {  // sum or mean over a random subset of the axes, in a random order and sign
        std::vector<long> axes;
        std::vector<std::size_t> sorted;
        for (std::size_t a = 0; a < r; ++a) {
          if (pick(0, 1)) continue;
          axes.push_back(static_cast<long>(a) - (pick(0, 1) ? static_cast<long>(r) : 0));
          sorted.push_back(a);
        }
        std::shuffle(axes.begin(), axes.end(), m_rng);
        const bool keepdims = pick(0, 1), average = op == 10;
        return add_ref(average ? mean(x, axes, keepdims) : sum(x, axes, keepdims), ref_reduce(rx, sorted, keepdims, average));
      }
      case 11: {
        const long axis = static_cast<long>(pick(0, r - 1)) - (pick(0, 1) ? static_cast<long>(r) : 0);
        return add_ref(log_softmax(x, axis), ref_log_softmax(rx, axis));
      }
      case 12: {  // slice: a non-empty range of one axis (an empty one would leave softmax no row)
        const std::size_t a = pick(0, r - 1), begin = pick(0, s[a] - 1), end = pick(begin + 1, s[a]);
        const long axis = static_cast<long>(a) - (pick(0, 1) ? static_cast<long>(r) : 0);
        return add_ref(slice(x, axis, begin, end), ref_slice(rx, a, begin, end));
      }
      case 13: {  // pad: up to 2 zeros on either side of one axis
        const std::size_t a = pick(0, r - 1), before = pick(0, 2), after = pick(0, 2);
        const long axis = static_cast<long>(a) - (pick(0, 1) ? static_cast<long>(r) : 0);
        return add_ref(pad(x, axis, before, after), ref_pad(rx, a, before, after));
      }
      case 14:
      case 15: {  // flash_attention with x as q, and with 15 its VJP for a random grad_out and grad_lse;
                  // a third of them with a soft-cap, a third with a causal window (T_k >= T_q)
        const Shape lead(s.begin(), s.end() - 2);
        const double cap = pick(0, 2) == 0 ? std::uniform_real_distribution<double>(0.3, 3)(m_rng) : 0.0;
        const std::size_t window = pick(0, 2) == 0 ? pick(1, 3) : 0;
        const std::size_t t_k = window > 0 ? std::max<std::size_t>(1, s[r - 2] + pick(0, 2)) : pick(1, 3);
        Shape ks = lead, vs = lead;
        ks.insert(ks.end(), {t_k, s[r - 1]});
        vs.insert(vs.end(), {t_k, pick(1, 3)});
        const Var<double> k = node_or_leaf_like(ks);
        const Var<double> v = node_or_leaf_like(vs);
        const Ref rk = ref(k), rv = ref(v);
        const double alpha = std::uniform_real_distribution<double>(0.2, 1.5)(m_rng);
        const FlashMask<double> mask{window > 0, {}, window};
        const FlashOutputs<double> f = flash_attention(x, k, v, alpha, mask, cap);
        add_refs({f.out, f.lse}, ref_flash_attention(rx, rk, rv, alpha, cap, window));
        if (op == 14) return;
        const Var<double> go = node_or_leaf_like(f.out.shape());
        const Var<double> gl = node_or_leaf_like(f.lse.shape());
        const Ref rg = ref(go), rl = ref(gl);
        const FlashGrads<double> grads = flash_attention_vjp(x, k, v, f.out, f.lse, go, gl, alpha, mask, cap);
        return add_refs({grads.grad_q, grads.grad_k, grads.grad_v},
                        ref_flash_attention_vjp(rx, rk, rv, rg, rl, alpha, cap, window));
      }
      case 17:
      case 18: {  // embedding with x as the table if it is a matrix (else a new one), and with 18 its VJP
        const Var<double> table = r == 2 ? x : node_or_leaf_like({pick(1, 3), pick(1, 3)});
        const Ref rt = ref(table);
        const std::size_t rows = rt.shape[0];
        const auto [ids, rids] = ids_leaf(rows);
        const Var<double> y = embedding(table, ids);
        add_ref(y, ref_embedding(rt, rids));
        if (op == 17) return;
        const Var<double> g = node_or_leaf_like(shape_of(y));
        const Ref rg = ref(g);
        return add_ref(embedding_vjp(g, ids, rows), ref_embedding_vjp(rg, rids, rows));
      }
      case 19: {  // dropout: p = 0, p = 1, or in between
        const std::size_t kind = pick(0, 5);
        const double p = kind == 0 ? 0.0 : kind == 1 ? 1.0 : std::uniform_real_distribution<double>(0.1, 0.9)(m_rng);
        const std::uint64_t seed = m_rng();
        return add_ref(dropout(x, p, seed), ref_dropout(rx, p, seed, m_g.step(), m_g.training()));
      }
      case 20: {
        const GeluApprox approx = pick(0, 1) ? GeluApprox::tanh : GeluApprox::none;
        Ref y = rx;
        for (auto& e : y.data) {
          e = approx == GeluApprox::none ? 0.5 * e * (1 + std::erf(e / std::sqrt(2.0)))
                                         : 0.5 * e * (1 + std::tanh(std::sqrt(2 / M_PI) * (e + 0.044715 * e * e * e)));
        }
        return add_ref(gelu(x, approx), y);
      }
      case 22: {  // gelu_vjp: grad_out * gelu'(x)
        const GeluApprox approx = pick(0, 1) ? GeluApprox::tanh : GeluApprox::none;
        const Var<double> g = node_or_leaf_like(s);
        const Ref rg = ref(g);
        Ref z = rx;
        for (std::size_t i = 0; i < z.data.size(); ++i) {
          const double e = rx.data[i];
          double d;
          if (approx == GeluApprox::none) {
            d = 0.5 * (1 + std::erf(e / std::sqrt(2.0))) + e * std::exp(-0.5 * e * e) / std::sqrt(2 * M_PI);
          } else {
            const double c = std::sqrt(2 / M_PI), t = std::tanh(c * (e + 0.044715 * e * e * e));
            d = 0.5 * (1 + t) + 0.5 * e * (1 - t * t) * c * (1 + 3 * 0.044715 * e * e);
          }
          z.data[i] = rg.data[i] * d;
        }
        return add_ref(gelu_vjp(x, g, approx), z);
      }
      case 23: {  // layer_norm_vjp over the last axis, with free mean and rstd
        const std::size_t d = s.back();
        Shape stats = s;
        stats.back() = 1;
        const Var<double> gamma = node_or_leaf_like({d}), mu = node_or_leaf_like(stats), rstd = node_or_leaf_like(stats);
        const Var<double> g = node_or_leaf_like(s);
        const Ref rgam = ref(gamma), rmu = ref(mu), rr = ref(rstd), rg = ref(g);
        Ref gx = rx, gg{{d}, std::vector<double>(d, 0.0)}, gb{{d}, std::vector<double>(d, 0.0)};
        for (std::size_t row = 0; row < rx.data.size() / d; ++row) {
          double a = 0, b = 0;
          for (std::size_t j = 0; j < d; ++j) {
            const double xhat = (rx.data[row * d + j] - rmu.data[row]) * rr.data[row], gy = rg.data[row * d + j] * rgam.data[j];
            a += gy / static_cast<double>(d);
            b += gy * xhat / static_cast<double>(d);
            gg.data[j] += rg.data[row * d + j] * xhat;
            gb.data[j] += rg.data[row * d + j];
          }
          for (std::size_t j = 0; j < d; ++j) {
            const double xhat = (rx.data[row * d + j] - rmu.data[row]) * rr.data[row], gy = rg.data[row * d + j] * rgam.data[j];
            gx.data[row * d + j] = rr.data[row] * (gy - a - xhat * b);
          }
        }
        const LayerNormGrads<double> f = layer_norm_vjp(x, gamma, mu, rstd, g);
        return add_refs({f.grad_x, f.grad_gamma, f.grad_beta}, {gx, gg, gb});
      }
      case 21: {  // layer_norm over the last axis, its three outputs
        const std::size_t d = s.back();
        const Var<double> gamma = node_or_leaf_like({d}), beta = node_or_leaf_like({d});
        const Ref rg = ref(gamma), rb = ref(beta);
        const double eps = pick(0, 1) ? 1e-5 : 0.1;
        Shape stats = s;
        stats.back() = 1;
        Ref y = rx, mu{stats, {}}, rstd{stats, {}};
        for (std::size_t row = 0; row < rx.data.size() / d; ++row) {
          const double* e = &rx.data[row * d];
          double m = 0, v = 0;
          for (std::size_t j = 0; j < d; ++j) m += e[j] / static_cast<double>(d);
          for (std::size_t j = 0; j < d; ++j) v += (e[j] - m) * (e[j] - m) / static_cast<double>(d);
          const double inv = 1 / std::sqrt(v + eps);
          for (std::size_t j = 0; j < d; ++j) y.data[row * d + j] = (e[j] - m) * inv * rg.data[j] + rb.data[j];
          mu.data.push_back(m);
          rstd.data.push_back(inv);
        }
        const Var<double> out = layer_norm(x, gamma, beta, eps);
        return add_refs({out, m_g.var(out.id(), 1), m_g.var(out.id(), 2)}, {y, mu, rstd});
      }
      case 24:
      case 25: {  // take_label of x's last axis by new labels, and with 25 its VJP for a random grad_out
        std::optional<std::int64_t> ignore;
        const auto [labels, rl] = labels_leaf(s, ignore);
        const Var<double> y = take_label(x, labels, ignore);
        add_ref(y, ref_take_label(rx, rl, ignore));
        if (op == 24) return;
        const Var<double> g = node_or_leaf_like(rl.shape);
        const Ref rg = ref(g);
        return add_ref(take_label_vjp(g, labels, s.back(), ignore), ref_take_label_vjp(rg, rl, s.back(), ignore));
      }
      case 26: {  // concat: x and one or two parts of its shape but 1-2 along the axis, in a random order
        const std::size_t a = pick(0, r - 1);
        const long axis = static_cast<long>(a) - (pick(0, 1) ? static_cast<long>(r) : 0);
        std::vector<Var<double>> parts = {x};
        std::vector<Ref> refs = {rx};
        for (std::size_t k = pick(1, 2); k > 0; --k) {
          Shape ps = s;
          ps[a] = pick(1, 2);
          parts.push_back(node_or_leaf_like(ps));
          refs.push_back(ref(parts.back()));
        }
        if (pick(0, 1)) {
          std::swap(parts.front(), parts.back());
          std::swap(refs.front(), refs.back());
        }
        return add_ref(concat(parts, axis), ref_concat(refs, a));
      }
      case 27: {  // rms_norm over the last axis, its two outputs
        const std::size_t d = s.back();
        const Var<double> gamma = node_or_leaf_like({d});
        const Ref rg = ref(gamma);
        const double eps = pick(0, 1) ? 1e-5 : 0.1;
        Shape stats = s;
        stats.back() = 1;
        Ref y = rx, rstd{stats, {}};
        for (std::size_t row = 0; row < rx.data.size() / d; ++row) {
          const double* e = &rx.data[row * d];
          double ms = 0;
          for (std::size_t j = 0; j < d; ++j) ms += e[j] * e[j] / static_cast<double>(d);
          const double inv = 1 / std::sqrt(ms + eps);
          for (std::size_t j = 0; j < d; ++j) y.data[row * d + j] = e[j] * inv * rg.data[j];
          rstd.data.push_back(inv);
        }
        const Var<double> out = rms_norm(x, gamma, eps);
        return add_refs({out, m_g.var(out.id(), 1)}, {y, rstd});
      }
      case 28: {  // rms_norm_vjp over the last axis, with a free rstd
        const std::size_t d = s.back();
        Shape stats = s;
        stats.back() = 1;
        const Var<double> gamma = node_or_leaf_like({d}), rstd = node_or_leaf_like(stats), g = node_or_leaf_like(s);
        const Ref rgam = ref(gamma), rr = ref(rstd), rg = ref(g);
        Ref gx = rx, gg{{d}, std::vector<double>(d, 0.0)};
        for (std::size_t row = 0; row < rx.data.size() / d; ++row) {
          double b = 0;
          for (std::size_t j = 0; j < d; ++j) {
            const double xhat = rx.data[row * d + j] * rr.data[row];
            b += rg.data[row * d + j] * rgam.data[j] * xhat / static_cast<double>(d);
            gg.data[j] += rg.data[row * d + j] * xhat;
          }
          for (std::size_t j = 0; j < d; ++j) {
            const double xhat = rx.data[row * d + j] * rr.data[row];
            gx.data[row * d + j] = rr.data[row] * (rg.data[row * d + j] * rgam.data[j] - xhat * b);
          }
        }
        const RmsNormGrads<double> f = rms_norm_vjp(x, gamma, rstd, g);
        return add_refs({f.grad_x, f.grad_gamma}, {gx, gg});
      }
      case 29: {  // split: 1-3 blocks of one axis, none empty (an empty one would leave softmax no row), or chunk
        const std::size_t a = pick(0, r - 1), len = s[a];
        const long axis = static_cast<long>(a) - (pick(0, 1) ? static_cast<long>(r) : 0);
        std::vector<std::size_t> sizes;
        if (pick(0, 1)) {
          sizes = chunk_sizes(len, pick(1, 3));
        } else {  // cut at 0-2 distinct points of 1 .. len - 1
          std::set<std::size_t> cuts;
          const std::size_t count = std::min<std::size_t>(pick(0, 2), len - 1);
          while (cuts.size() < count) cuts.insert(pick(1, len - 1));
          std::size_t at = 0;
          for (std::size_t c : cuts) {
            sizes.push_back(c - at);
            at = c;
          }
          sizes.push_back(len - at);
        }
        std::vector<Ref> refs;
        std::size_t begin = 0;
        for (std::size_t n : sizes) {
          refs.push_back(ref_slice(rx, a, begin, begin + n));
          begin += n;
        }
        return add_refs(split(x, sizes, axis), refs);
      }
      case 30: {  // where: cond of 1 and 0 (a mask, or a comparison of two nodes), x in either branch; all three broadcast
        const auto trailing = [&] {  // x's last axes, some of them 1; all of them perhaps with one more ahead
          Shape t(s.begin() + static_cast<long>(pick(0, r)), s.end());
          for (auto& d : t) {
            if (pick(0, 2) == 0) d = 1;
          }
          if (t.size() == r && pick(0, 3) == 0) t.insert(t.begin(), pick(1, 2));
          return t;
        };
        const Shape cs = trailing(), bs = trailing();
        Var<double> cond;
        if (pick(0, 1)) {
          cond = mask_leaf(cs);
        } else {
          const Var<double> u = node_or_leaf_like(cs), w = node_or_leaf_like(cs);
          const Ref ru = ref(u), rw = ref(w);
          cond = greater(u, w);
          add_ref(cond, ref_elementwise(ru, rw, &elementwise::greater<double>, false));
        }
        const Var<double> b = node_or_leaf_like(bs);
        const Ref rc = ref(cond), rb = ref(b);
        const bool swap = pick(0, 1);
        return add_ref(swap ? where(cond, b, x) : where(cond, x, b), ref_where(rc, swap ? rb : rx, swap ? rx : rb));
      }
      case 31: {  // pow: integer exponents on x, the others on a new positive leaf
        const double exponents[] = {2, 3, 0, 1, -1, 0.5, 1.5, -0.5, 2.5};
        const double p = exponents[pick(0, std::size(exponents) - 1)];
        const bool on_x = p >= 0 && p == std::floor(p);
        const Var<double> in = on_x ? x : positive_leaf(s);
        Ref y = ref(in);
        for (auto& e : y.data) e = std::pow(e, p);
        return add_ref(pow(in, p), y);
      }
      case 32: {  // rope over the last axis (x doubled along it by concat if odd; rank 1 x made (1, n)), positions broadcasting
        Var<double> in = x;
        Ref rin = rx;
        if (r < 2) {
          in = reshape(x, {1, s.empty() ? 1 : s[0]});
          rin.shape = in.shape();
          add_ref(in, rin);
        }
        if (in.shape().back() % 2 != 0) {
          const Ref half = rin;
          in = concat(std::vector<Var<double>>{in, in}, -1);
          rin = ref_concat({half, half}, half.shape.size() - 1);
          add_ref(in, rin);
        }
        const Shape is = in.shape(), lead(is.begin(), is.end() - 1);
        Shape ps(lead.begin() + static_cast<long>(pick(0, lead.size() - 1)), lead.end());
        for (auto& d : ps) {
          if (pick(0, 2) == 0) d = 1;
        }
        const Var<double> positions = node_or_leaf_like(ps);
        const Ref rp = ref(positions);
        const double base = pick(0, 1) ? 10000.0 : 3.0;
        const std::size_t d = is.back(), h = d / 2;
        Ref y = rin;
        for (std::size_t row = 0; row < rin.data.size() / d; ++row) {
          const double p = rp.data[broadcast_source(row, lead, ps)];
          for (std::size_t i = 0; i < h; ++i) {
            const double a = p * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d));
            const double x1 = rin.data[row * d + i], x2 = rin.data[row * d + i + h];
            y.data[row * d + i] = x1 * std::cos(a) - x2 * std::sin(a);
            y.data[row * d + i + h] = x2 * std::cos(a) + x1 * std::sin(a);
          }
        }
        return add_ref(rope(in, positions, base), y);
      }
      case 33: {  // linear: x w + b, w (k, 1-3), b (n)
        const std::size_t k = s[r - 1], n = pick(1, 3);
        const Var<double> w = node_or_leaf_like({k, n});
        const Ref rw = ref(w);
        const Var<double> b = node_or_leaf_like({n});
        const Ref rb = ref(b);
        Ref y = ref_matmul(rx, rw, false, false);
        for (std::size_t i = 0; i < y.data.size(); ++i) y.data[i] += rb.data[i % n];
        return add_ref(linear(x, w, b), y);
      }
      default: {  // 16: broadcast a size-1 axis or a new leading axis
        Shape to = s;
        for (auto& d : to) {
          if (d == 1) d = pick(1, 3);
        }
        if (pick(0, 1)) to.insert(to.begin(), pick(1, 2));
        return add_ref(broadcast_to(x, to), ref_broadcast_to(rx, to));
      }
    }
  }

  std::mt19937_64 m_rng;
  std::uint64_t m_seed;
  Shape m_batch;
  Graph<double> m_g;
  std::vector<std::vector<Ref>> m_refs;
};

constexpr int cases = 640;  // at least 50 nodes of every op kind (registry/every_op_is_in_the_property_generator)

}  // namespace

std::map<std::string, std::size_t> xgrad::test::random_graph_op_uses() {
  std::map<std::string, std::size_t> uses;
  for (int c = 0; c < cases; ++c) {
    RandomGraph rg(static_cast<std::uint64_t>(c));
    for (std::size_t i = 0; i < rg.graph().size(); ++i) ++uses[rg.graph().node(i).op_name()];
  }
  return uses;
}

BOOST_AUTO_TEST_SUITE(properties)

BOOST_AUTO_TEST_CASE(forward_matches_a_naive_float64_reference) {
  // That every op appears in many of these graphs is checked by registry/every_op_is_in_the_property_generator.
  std::size_t nodes = 0;
  for (int c = 0; c < cases; ++c) {
    RandomGraph rg(static_cast<std::uint64_t>(c));
    BOOST_TEST_CONTEXT("seed " << c << ": " << rg.ops()) {
      for (std::size_t i = 0; i < rg.graph().size(); ++i) {
        BOOST_TEST_REQUIRE(rg.refs()[i].size() == rg.graph().node(i).output_count());
        for (std::size_t k = 0; k < rg.refs()[i].size(); ++k) {
          const auto& value = rg.graph().node(i).value(k);
          const Ref& ref = rg.refs()[i][k];
          BOOST_TEST_REQUIRE(shapes_equal(value.shape(), ref.shape));
          for (std::size_t f = 0; f < ref.data.size(); ++f) {
            // Absolute near 0 (sums that cancel), relative elsewhere.
            const double diff = std::abs(value.data()[f] - ref.data[f]);
            BOOST_TEST(diff <= 1e-12 * (1 + std::abs(ref.data[f])), "node " << i << " output " << k << " element " << f
                                                                           << ": " << value.data()[f] << " vs " << ref.data[f]);
          }
        }
        ++nodes;
      }
    }
  }
  BOOST_TEST(nodes > std::size_t(cases) * 5);
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  for (int c = 0; c < cases; ++c) {
    RandomGraph rg(static_cast<std::uint64_t>(c));
    Graph<double>& g = rg.graph();
    BOOST_TEST_CONTEXT("seed " << c << ": " << rg.ops()) {
      test::check_gradients(g.var(g.size() - 1), rg.leaves());
    }
  }
}

BOOST_AUTO_TEST_CASE(export_import_replay_is_bit_identical) {
  for (int c = 0; c < cases; ++c) {
    RandomGraph rg(static_cast<std::uint64_t>(c));
    Graph<double>& g = rg.graph();
    const Var<double> y = g.var(g.size() - 1);
    g.set_output("y", y);
    const auto grads = grad(y, rg.leaves());
    for (std::size_t i = 0; i < grads.size(); ++i) g.set_grad("x" + std::to_string(i), grads[i]);
    const std::string text = to_json(g, ExportValues::all).dump();
    const auto back = graph_from_json<double>(text);
    back->replay();
    BOOST_TEST_CONTEXT("seed " << c << ": " << rg.ops()) {
      BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
      for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(same_bits_any_nan(back->node(i).value(), g.node(i).value()), "node " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(lean_replay_gives_a_full_replays_bits) {
  // Two copies of each graph, with its gradients in two cases of three: one replayed in full,
  // one lean (keep_only), twice each with new inputs, so that the second lean replay runs in
  // reused buffers and ops that allow it write over inputs (Op::overwrites_input), aliased
  // inputs included. (Without gradients more inputs are read for the last time by their op.)
  // The ops that declare Op::overwrites_input, each checked with y the very array of its input
  // by lean/ops_that_overwrite_inputs_give_the_same_bits: these and the rows of
  // ops/elementwise.def, which that test walks; another op must be added there.
  std::set<std::string> checked_ops = {"softmax", "softmax_vjp", "scale", "dropout", "gelu", "gelu_vjp", "reshape", "apply_mask",
                                       "where", "pow"};
  for (const UnaryRow& row : unary_rows) checked_ops.insert(row.name);
  for (const BinaryRow& row : binary_rows) checked_ops.insert(row.name);
  std::set<std::string> declaring;
  std::size_t viewed = 0;  // nodes left out as views (Op::view_of): they occur in these graphs
  for (int c = 0; c < cases; ++c) {
    RandomGraph full(static_cast<std::uint64_t>(c)), lean(static_cast<std::uint64_t>(c));
    std::vector<Var<double>> kept;
    for (RandomGraph* rg : {&full, &lean}) {
      Graph<double>& g = rg->graph();
      const Var<double> y = g.var(g.size() - 1);
      g.set_output("y", y);
      if (c % 3 == 0) continue;
      const auto grads = grad(y, rg->leaves());
      for (std::size_t i = 0; i < grads.size(); ++i) g.set_grad("x" + std::to_string(i), grads[i]);
    }
    Graph<double>& g = lean.graph();
    for (std::size_t id = 0; c % 2 && id < g.size(); id += 3) kept.push_back(g.var(id));  // some kept too
    g.keep_only(kept);
    for (std::size_t id = 0; id < g.size(); ++id) {
      const Node<double>& n = g.node(id);
      for (std::size_t j = 0; n.op && j < n.inputs.size(); ++j) {
        if (n.op->overwrites_input(j)) declaring.insert(n.op_name());
      }
    }
    BOOST_TEST_CONTEXT("seed " << c << ": " << full.ops()) {
      for (std::uint64_t round = 1; round <= 2; ++round) {
        for (RandomGraph* rg : {&full, &lean}) {
          std::uint64_t seed = static_cast<std::uint64_t>(c) * 10 + round;
          for (const auto& x : rg->leaves()) {
            const Shape s = shape_of(x);
            rg->graph().set_value(x, random_array<double>(s, seed++));
          }
          rg->graph().replay();
        }
        viewed += g.viewed_nodes();
        for (std::size_t id = 0; id < g.size(); ++id) {
          if (g.node(id).released) continue;
          BOOST_TEST(same_bits(g.node(id).value(), full.graph().node(id).value()), "node " << id << ", round " << round);
        }
      }
      for (const auto& [name, slot] : g.outputs()) BOOST_TEST(!g.node(slot.node).released);
      for (const auto& [name, slot] : g.grads()) BOOST_TEST(!g.node(slot.node).released);
      for (const auto& v : kept) BOOST_TEST(!v.node().released);
      BOOST_TEST(g.held_elements() <= full.graph().held_elements());
    }
  }
  BOOST_TEST(declaring == checked_ops);
  BOOST_TEST(viewed >= 40u, viewed << " nodes read as views");  // 58 at 640 cases
}

BOOST_AUTO_TEST_SUITE_END()
