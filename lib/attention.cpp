#include <xgrad/lib/attention.hpp>

#include <cmath>
#include <limits>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/transpose.hpp>

namespace xgrad {

namespace {

template <class T>
void check_attention_inputs(const Var<T>& q, const Var<T>& k, const Var<T>& v) {
  detail::check_one_graph<T>("attention", {{"q", &q}, {"k", &k}, {"v", &v}});
  const auto shape = [](const Var<T>& x) {
    return Shape(x.value().shape().begin(), x.value().shape().end());
  };
  const Shape qs = shape(q), ks = shape(k), vs = shape(v);
  const auto node = [](const char* name, const Var<T>& x, const Shape& s) {
    return std::string(name) + " (node " + std::to_string(x.id()) + ") is " + shape_str(s);
  };
  const std::string all = node("q", q, qs) + ", " + node("k", k, ks) + ", " + node("v", v, vs);
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2) {
    throw error("attention: q, k and v need rank >= 2 (..., T, d): " + all);
  }
  if (qs.size() != ks.size() || qs.size() != vs.size() ||
      !std::equal(qs.begin(), qs.end() - 2, ks.begin()) ||
      !std::equal(qs.begin(), qs.end() - 2, vs.begin())) {
    throw error("attention: batch axes differ (the leading axes of q, k and v must be equal): " + all);
  }
  const std::size_t d_k = qs.back(), t_k = ks[ks.size() - 2];
  if (ks.back() != d_k) {
    throw error("attention: d_k differs: q has d_k = " + std::to_string(d_k) + ", k has d_k = " +
                std::to_string(ks.back()) + ": " + all);
  }
  if (vs[vs.size() - 2] != t_k) {
    throw error("attention: T_k differs: k has T_k = " + std::to_string(t_k) + ", v has T_k = " +
                std::to_string(vs[vs.size() - 2]) + ": " + all);
  }
  if (t_k == 0) throw error("attention: T_k = 0, softmax over no keys is undefined: " + all);
  if (d_k == 0) throw error("attention: d_k = 0, the scale 1/sqrt(d_k) is undefined: " + all);
}

template <class T>
double checked_scale(const Var<T>& q, std::optional<double> alpha) {
  if (alpha && !std::isfinite(*alpha)) {
    throw error("attention: the scale must be finite, got " + number_str(*alpha));
  }
  return alpha.value_or(1.0 / std::sqrt(static_cast<double>(q.value().shape().back())));
}

// The spec's three steps, with the mask's -inf added to the scores when there is one. Every
// check is made before the first node is built.
template <class T>
AttentionNodes<T> build_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha,
                                  const xt::xarray<bool>* mask) {
  check_attention_inputs(q, k, v);
  const double factor = checked_scale(q, alpha);
  const auto& qs = q.value().shape();
  Shape scores(qs.begin(), qs.end() - 1);
  scores.push_back(k.value().shape()[k.value().dimension() - 2]);
  detail::check_scores(scores, mask);
  AttentionNodes<T> a;
  // (scale q) k^T: the scale multiplies q, T_q x d_k numbers, not the T_q x T_k scores, which
  // saves a pass over the scores forward and backward and a T_q x T_k array at each end.
  const Var<T> scaled_q = scale(q, factor);  // one statement per node: ids in order
  a.scores = matmul(scaled_q, transpose(k));
  Var<T> logits = a.scores;
  if (mask) {
    a.mask = q.graph().constant("mask", xt::cast<T>(*mask));
    a.masked = logits = apply_mask(a.scores, a.mask, -std::numeric_limits<double>::infinity());
  }
  a.weights = softmax(logits, -1);
  a.output = matmul(a.weights, v);
  return a;
}

}  // namespace

void detail::check_scores(const Shape& scores, const xt::xarray<bool>* mask) {
  detail::check_elements(scores, "attention: the scores " + shape_str(scores) + " (B..., T_q, T_k)");
  if (mask && !detail::broadcastable(Shape(mask->shape().begin(), mask->shape().end()), scores)) {
    throw error("masked_attention: the mask " + shape_str(mask->shape()) + " does not broadcast to the scores " +
                shape_str(scores) + " (B..., T_q, T_k)");
  }
}

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha) {
  return build_attention(q, k, v, alpha, nullptr);
}

template <class T>
AttentionNodes<T> masked_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                         const xt::xarray<bool>& mask, std::optional<double> alpha) {
  return build_attention(q, k, v, alpha, &mask);
}

template <class T>
Var<T> fused_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha) {
  check_attention_inputs(q, k, v);
  const double factor = checked_scale(q, alpha);
  const Var<T> packed = flash_attention(q, k, v, factor);
  return slice(packed, -1, 0, v.value().shape().back());
}

xt::xarray<bool> causal_mask(std::size_t t_q, std::size_t t_k) {
  detail::check_result_shape("causal_mask", {t_q, t_k}, "mask");
  xt::xarray<bool> m = xt::xarray<bool>::from_shape({t_q, t_k});
  const long offset = static_cast<long>(t_k) - static_cast<long>(t_q);
  for (std::size_t i = 0; i < t_q; ++i) {
    for (std::size_t j = 0; j < t_k; ++j) m(i, j) = static_cast<long>(j) <= static_cast<long>(i) + offset;
  }
  return m;
}

xt::xarray<bool> padding_mask(const std::vector<std::size_t>& lengths, std::size_t t_q, std::size_t t_k, bool head_axis) {
  Shape shape{lengths.size()};
  if (head_axis) shape.push_back(1);
  shape.push_back(t_q);
  shape.push_back(t_k);
  detail::check_result_shape("padding_mask", shape, "mask");
  xt::xarray<bool> m = xt::xarray<bool>::from_shape(shape);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] > t_k) {
      throw error("padding_mask: sequence " + std::to_string(b) + " has length " + std::to_string(lengths[b]) +
                  ", more than T_k = " + std::to_string(t_k));
    }
    for (std::size_t i = 0; i < t_q; ++i) {
      for (std::size_t j = 0; j < t_k; ++j) m.data()[(b * t_q + i) * t_k + j] = j < lengths[b];
    }
  }
  return m;
}

template AttentionNodes<float> attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                               std::optional<double>);
template AttentionNodes<double> attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                std::optional<double>);
template Var<float> fused_attention(const Var<float>&, const Var<float>&, const Var<float>&, std::optional<double>);
template Var<double> fused_attention(const Var<double>&, const Var<double>&, const Var<double>&, std::optional<double>);
template AttentionNodes<float> masked_attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                                      const xt::xarray<bool>&, std::optional<double>);
template AttentionNodes<double> masked_attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                       const xt::xarray<bool>&, std::optional<double>);

}  // namespace xgrad
