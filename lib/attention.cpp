#include <xgrad/lib/attention.hpp>

#include <cmath>
#include <limits>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/transpose.hpp>

namespace xgrad {

namespace {

// The checks of attention's inputs, one rule with flash_attention's (detail::attention_dims),
// made before the first node is built; messages start "attention: ".
template <class T>
void check_attention_inputs(const Var<T>& q, const Var<T>& k, const Var<T>& v) {
  detail::check_one_graph<T>("attention", {{"q", &q}, {"k", &k}, {"v", &v}});
  with_context([] { return std::string("attention: "); }, [&] { detail::attention_dims(q.shape(), k.shape(), v.shape()); });
}

template <class T>
double checked_scale(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha) {
  if (alpha) {
    with_context([] { return std::string("attention: "); }, [&] { detail::check_attention_scale(*alpha); });
    return *alpha;
  }
  const std::size_t d_k = q.shape().back();
  if (d_k == 0) {
    throw error("attention: d_k = 0, the default scale 1/sqrt(d_k) is undefined: q is " + shape_str(q.shape()) +
                ", k is " + shape_str(k.shape()) + ", v is " + shape_str(v.shape()));
  }
  return 1.0 / std::sqrt(static_cast<double>(d_k));
}

// The spec's three steps, with the mask's -inf added to the scores when there is one. Every
// check is made before the first node is built.
template <class T>
AttentionNodes<T> build_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha,
                                  const xt::xarray<bool>* mask) {
  check_attention_inputs(q, k, v);
  const double factor = checked_scale(q, k, v, alpha);
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
  if (mask && !detail::broadcastable(shape_of(*mask), scores)) {
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
  const double factor = checked_scale(q, k, v, alpha);
  return flash_attention(q, k, v, factor).out;
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
