#include <xgrad/lib/variants.hpp>

#include <cmath>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/layer_norm.hpp>
#include <xgrad/ops/rms_norm.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad {

template <class T>
Var<T> rope_positions(Graph<T>& g, std::size_t t) {
  xt::xarray<T> p = xt::xarray<T>::from_shape({t});
  for (std::size_t i = 0; i < t; ++i) p(i) = static_cast<T>(i);
  return g.constant("positions", std::move(p));
}

template <class T>
Var<T> repeat_kv(const Var<T>& x, std::size_t groups) {
  detail::check_one_graph<T>("repeat_kv", {{"x", &x}});
  const Shape xs = x.shape();
  if (xs.size() < 3) {
    throw error("repeat_kv: x must be (..., H_kv, T, d), the heads third from last, of rank >= 3: x is " + shape_str(xs));
  }
  if (groups == 0) throw error("repeat_kv: groups must be >= 1 (query heads per key/value head), got 0: x is " + shape_str(xs));
  if (groups == 1) return x;
  const std::size_t head_axis = xs.size() - 3;
  Shape split = xs, wide = xs, y = xs;
  split.insert(split.begin() + static_cast<long>(head_axis) + 1, 1);
  wide.insert(wide.begin() + static_cast<long>(head_axis) + 1, groups);
  detail::check_elements(wide, "repeat_kv: x " + shape_str(xs) + " with " + std::to_string(groups) + " groups");
  y[head_axis] *= groups;
  return reshape(broadcast_to(reshape(x, split), wide), y);
}

namespace {
// get_slopes_power_of_2 of the reference code, operation for operation (Python's ** is C's pow).
void power_of_2_slopes(std::size_t n, std::vector<double>& out, std::size_t stride, std::size_t count) {
  const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(n)) - 3.0)));
  for (std::size_t i = 0; i < n && count > 0; i += stride, --count) out.push_back(start * std::pow(start, static_cast<double>(i)));
}
}  // namespace

std::vector<double> alibi_slopes(std::size_t heads) {
  if (heads == 0 || heads > max_array_elements) {
    throw error("alibi_slopes: heads must be in [1, " + std::to_string(max_array_elements) + "], got " +
                std::to_string(heads));
  }
  std::vector<double> slopes;
  slopes.reserve(heads);
  std::size_t p = 1;
  while (p * 2 <= heads) p *= 2;  // the largest power of 2 <= heads
  power_of_2_slopes(p, slopes, 1, p);
  // get_slopes(2p)[0::2][:n - p]: 2p is a power of 2.
  if (p != heads) power_of_2_slopes(2 * p, slopes, 2, heads - p);
  return slopes;
}

template <class T>
Var<T> alibi_bias(Graph<T>& g, std::size_t heads, std::size_t t_q, std::size_t t_k) {
  if (heads == 0) throw error("alibi_bias: heads must be >= 1, got 0 (for T_q = " + std::to_string(t_q) + ", T_k = " + std::to_string(t_k) + ")");
  detail::check_result_shape("alibi_bias", {heads, t_q, t_k}, "bias");
  const std::vector<double> m = alibi_slopes(heads);
  xt::xarray<T> b = xt::xarray<T>::from_shape({heads, t_q, t_k});
  const double offset = static_cast<double>(t_k) - static_cast<double>(t_q);
  for (std::size_t h = 0; h < heads; ++h) {
    for (std::size_t i = 0; i < t_q; ++i) {
      for (std::size_t j = 0; j < t_k; ++j) {
        b.data()[(h * t_q + i) * t_k + j] = static_cast<T>(-m[h] * (static_cast<double>(i) + offset - static_cast<double>(j)));
      }
    }
  }
  return g.constant("alibi", std::move(b));
}

template <class T>
Var<T> softcap(const Var<T>& x, double cap) {
  detail::check_one_graph<T>("softcap", {{"x", &x}});
  if (!(std::isfinite(cap) && cap > 0)) {
    throw error("softcap: cap must be finite and > 0, got " + number_str(cap) + " (for x " + shape_str(x.shape()) + ")");
  }
  return scale(tanh(scale(x, 1.0 / cap)), cap);
}

template <class T>
Var<T> qk_norm(const Var<T>& x, const Var<T>& gain, QkNorm kind, double eps) {
  detail::check_one_graph<T>("qk_norm", {{"x", &x}});
  if (kind == QkNorm::none) return x;
  detail::check_one_graph<T>("qk_norm", {{"x", &x}, {"gain", &gain}});
  const Shape xs = x.shape(), gs = gain.shape();
  if (xs.empty() || xs.back() == 0 || gs != Shape{xs.back()}) {
    throw error(std::string("qk_norm (") + qk_norm_name(kind) + "): x must be (..., d_head), d_head > 0, and gain (d_head): x is " +
                shape_str(xs) + ", gain " + shape_str(gs));
  }
  if (!(eps >= 0) || !std::isfinite(eps)) {
    throw error(std::string("qk_norm (") + qk_norm_name(kind) + "): eps must be finite and >= 0, got " + number_str(eps));
  }
  switch (kind) {
    case QkNorm::rms: return rms_norm(x, gain, eps);
    case QkNorm::layer: return layer_norm(x, gain, x.graph().constant("qk_norm.beta", xt::zeros<T>(gs)), eps);
    case QkNorm::none: break;
  }
  return x;
}

template Var<float> rope_positions(Graph<float>&, std::size_t);
template Var<double> rope_positions(Graph<double>&, std::size_t);
template Var<float> repeat_kv(const Var<float>&, std::size_t);
template Var<double> repeat_kv(const Var<double>&, std::size_t);
template Var<float> alibi_bias(Graph<float>&, std::size_t, std::size_t, std::size_t);
template Var<double> alibi_bias(Graph<double>&, std::size_t, std::size_t, std::size_t);
template Var<float> softcap(const Var<float>&, double);
template Var<double> softcap(const Var<double>&, double);
template Var<float> qk_norm(const Var<float>&, const Var<float>&, QkNorm, double);
template Var<double> qk_norm(const Var<double>&, const Var<double>&, QkNorm, double);

}  // namespace xgrad
