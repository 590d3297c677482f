#include <xgrad/lib/attention.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/flash_mask.hpp>
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
// The mask is a Var of q's graph (or a fixed mask, made a constant once every check passed).
template <class T>
AttentionNodes<T> build_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha,
                                  const Var<T>* mask, const xt::xarray<bool>* fixed_mask = nullptr) {
  check_attention_inputs(q, k, v);
  if (mask) detail::check_one_graph<T>("masked_attention", {{"q", &q}, {"mask", mask}});
  const double factor = checked_scale(q, k, v, alpha);
  const auto& qs = q.value().shape();
  Shape scores(qs.begin(), qs.end() - 1);
  scores.push_back(k.value().shape()[k.value().dimension() - 2]);
  std::optional<Shape> mask_shape;
  if (mask) mask_shape = mask->shape();
  if (fixed_mask) mask_shape = shape_of(*fixed_mask);
  detail::check_scores(scores, mask_shape);
  AttentionNodes<T> a;
  // (scale q) k^T: the scale multiplies q, T_q x d_k numbers, not the T_q x T_k scores, which
  // saves a pass over the scores forward and backward and a T_q x T_k array at each end.
  const Var<T> scaled_q = scale(q, factor);  // one statement per node: ids in order
  a.scores = matmul(scaled_q, transpose(k));
  Var<T> logits = a.scores;
  if (mask || fixed_mask) {
    a.mask = mask ? *mask : q.graph().constant("mask", xt::cast<T>(*fixed_mask));
    a.masked = logits = apply_mask(a.scores, a.mask, -std::numeric_limits<double>::infinity());
  }
  a.weights = softmax(logits, -1);
  a.output = matmul(a.weights, v);
  return a;
}

}  // namespace

void detail::check_scores(const Shape& scores, const std::optional<Shape>& mask) {
  detail::check_elements(scores, "attention: the scores " + shape_str(scores) + " (B..., T_q, T_k)");
  if (mask && !detail::broadcastable(*mask, scores)) {
    throw error("masked_attention: the mask " + shape_str(*mask) + " does not broadcast to the scores " +
                shape_str(scores) + " (B..., T_q, T_k) by numpy's rules (trailing axes aligned; for heads, "
                "a (B, 1, T_q, T_k) mask: padding_mask(..., head_axis = true), or key_padding_mask's (B, 1, 1, T_k))");
  }
}

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha) {
  return build_attention<T>(q, k, v, alpha, nullptr);
}

template <class T>
AttentionNodes<T> masked_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v, const Var<T>& mask,
                                         std::optional<double> alpha) {
  return build_attention(q, k, v, alpha, &mask);
}

template <class T>
AttentionNodes<T> masked_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                         const xt::xarray<bool>& mask, std::optional<double> alpha) {
  return build_attention<T>(q, k, v, alpha, nullptr, &mask);
}

template <class T>
Var<T> fused_attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha,
                       const FlashMask<T>& mask) {
  check_attention_inputs(q, k, v);
  const double factor = checked_scale(q, k, v, alpha);
  if (mask.key_mask.valid()) {
    detail::check_one_graph<T>("fused_attention", {{"q", &q}, {"key_mask", &mask.key_mask}});
    Shape scores = q.shape();
    scores.back() = k.shape()[k.shape().size() - 2];
    detail::check_key_padding_shape(scores, mask.key_mask.shape());
  }
  return flash_attention(q, k, v, factor, mask).out;
}

bool detail::is_causal_mask(const xt::xarray<bool>& mask, std::size_t t_q, std::size_t t_k) {
  const Shape s = shape_of(mask);
  if (s.size() < 2 || s[s.size() - 2] != t_q || s.back() != t_k) return false;
  if (!std::all_of(s.begin(), s.end() - 2, [](std::size_t d) { return d == 1; })) return false;
  const xt::xarray<bool> causal = causal_mask(t_q, t_k);
  return std::equal(causal.begin(), causal.end(), mask.begin());
}

void detail::check_key_padding_shape(const Shape& scores, const Shape& mask) {
  if (!detail::fits_key_mask(mask, Shape(scores.begin(), scores.end() - 2), scores.back())) {
    throw error("fused attention: the mask " + shape_str(mask) + " is no key-padding mask for the scores " +
                shape_str(scores) + " (B..., T_q, T_k): the fused attention takes (B..., 1, T_k) (key_padding_mask) "
                "and the causal mask; other masks need AttentionImpl::composed");
  }
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

xt::xarray<bool> sliding_window_mask(std::size_t t_q, std::size_t t_k, std::size_t window) {
  if (window == 0) {
    throw error("sliding_window_mask: window = 0 lets no query attend to any key; a window holds at least the "
                "query's own position (window >= 1)");
  }
  detail::check_result_shape("sliding_window_mask", {t_q, t_k}, "mask");
  xt::xarray<bool> m = causal_mask(t_q, t_k);
  const long offset = static_cast<long>(t_k) - static_cast<long>(t_q);
  const long w = static_cast<long>(std::min(window, t_k));  // a window of T_k or more keys is causal
  for (std::size_t i = 0; i < t_q; ++i) {
    for (std::size_t j = 0; j < t_k; ++j) m(i, j) = m(i, j) && static_cast<long>(j) > static_cast<long>(i) + offset - w;
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

xt::xarray<bool> key_padding_mask(const std::vector<std::size_t>& lengths, std::size_t t_k) {
  xt::xarray<bool> m = padding_mask(lengths, 1, t_k);
  m.reshape({lengths.size(), std::size_t(1), std::size_t(1), t_k});
  return m;
}

template AttentionNodes<float> attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                               std::optional<double>);
template AttentionNodes<double> attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                std::optional<double>);
template Var<float> fused_attention(const Var<float>&, const Var<float>&, const Var<float>&, std::optional<double>,
                                    const FlashMask<float>&);
template Var<double> fused_attention(const Var<double>&, const Var<double>&, const Var<double>&, std::optional<double>,
                                     const FlashMask<double>&);
template AttentionNodes<float> masked_attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                                      const xt::xarray<bool>&, std::optional<double>);
template AttentionNodes<double> masked_attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                       const xt::xarray<bool>&, std::optional<double>);
template AttentionNodes<float> masked_attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                                      const Var<float>&, std::optional<double>);
template AttentionNodes<double> masked_attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                       const Var<double>&, std::optional<double>);

}  // namespace xgrad
