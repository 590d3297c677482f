#include <xgrad/lib/variant_attention.hpp>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/optim.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/flash_attention.hpp>
#include <xgrad/ops/flash_mask.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/transpose.hpp>

namespace xgrad {

namespace {

// What the checks found: the factor of q k^T, the query heads per kv head, the sigmoid's b.
struct VariantPlan {
  double scale = 1;
  std::size_t groups = 1;
  double sigmoid_bias = 0;
  Shape scores;
};

// The variants flash_attention has not, refused with impl fused: a bias (or the block's ALiBi),
// sigmoid weights, a mask that is not a key-padding mask for the scores (B..., Hq, T_q, T_k).
template <class T>
void check_fused(const std::string& who, const VariantOptions<T>& o, bool alibi, const Shape& scores) {
  if (o.bias.valid() || alibi) {
    throw error(who + ": impl fused has no additive bias (ALiBi), got " +
                (alibi ? std::string("alibi = true") : "a bias " + shape_str(o.bias.shape())) +
                ": use AttentionImpl::composed");
  }
  if (o.weights != AttentionWeights::softmax) {
    throw error(who + ": impl fused has softmax weights only (its online softmax normalises each row), got " +
                attention_weights_name(o.weights) + " weights: use AttentionImpl::composed");
  }
  const Shape batch(scores.begin(), scores.end() - 2);
  if (o.mask.valid() && !detail::fits_key_mask(o.mask.shape(), batch, scores.back())) {
    Shape expected = batch;
    expected.insert(expected.end(), {1, scores.back()});
    throw error(who + ": impl fused takes a key-padding mask (B..., 1, T_k) broadcasting to " + shape_str(expected) +
                " (key_padding_mask), not the mask " + shape_str(o.mask.shape()) + " for the scores " +
                shape_str(scores) + ": for a causal mask or a sliding window set causal = true and window instead; "
                "other masks: use AttentionImpl::composed");
  }
}

// Every check of variant_attention on the shapes of q, k, v (those the block will build, too),
// before the first node; `alibi`: the block adds an ALiBi bias to o.bias. The options' Vars
// must be of the graph of q (check_option_graphs).
template <class T>
VariantPlan check_variant(const std::string& who, const Shape& q, const Shape& k, const Shape& v,
                          const VariantOptions<T>& o, bool alibi = false) {
  const auto all = [&] { return "q is " + shape_str(q) + ", k is " + shape_str(k) + ", v is " + shape_str(v); };
  const std::size_t r = q.size();
  if (r < 3 || k.size() != r || v.size() != r) {
    throw error(who + ": q, k and v must be (B..., H, T, d) of one rank >= 3, the heads third from last: " + all());
  }
  if (!std::equal(q.begin(), q.end() - 3, k.begin()) || !std::equal(q.begin(), q.end() - 3, v.begin()) ||
      k[r - 3] != v[r - 3]) {
    throw error(who + ": the leading axes B... of q, k and v and the heads of k and v must be equal: " + all());
  }
  const std::size_t hq = q[r - 3], hkv = k[r - 3];
  if (hkv == 0 || hq % hkv != 0) {
    throw error(who + ": the " + std::to_string(hkv) + " key/value heads do not divide the " + std::to_string(hq) +
                " query heads (grouped-query attention needs Hkv dividing Hq): " + all());
  }
  const std::size_t d_k = q[r - 1], t_k = k[r - 2];
  if (k[r - 1] != d_k) {
    throw error(who + ": d_k differs: q has d_k = " + std::to_string(d_k) + ", k has d_k = " + std::to_string(k[r - 1]) +
                ": " + all());
  }
  if (v[r - 2] != t_k) {
    throw error(who + ": T_k differs: k has T_k = " + std::to_string(t_k) + ", v has T_k = " + std::to_string(v[r - 2]) +
                ": " + all());
  }
  if (t_k == 0) throw error(who + ": T_k = 0, attention over no keys is undefined: " + all());
  VariantPlan plan;
  plan.groups = hq / hkv;
  if (plan.groups > 1) {
    Shape k2 = k, v2 = v;
    k2[r - 3] = v2[r - 3] = hq;
    detail::check_elements(k2, who + ": k repeated to " + shape_str(k2));
    detail::check_elements(v2, who + ": v repeated to " + shape_str(v2));
  }
  plan.scores = Shape(q.begin(), q.end() - 1);
  plan.scores.push_back(t_k);
  const bool fused = o.impl == AttentionImpl::fused;
  if (!fused) {  // the fused attention holds no scores, only tiles of them
    detail::check_elements(plan.scores, who + ": the scores " + shape_str(plan.scores) + " (B..., Hq, T_q, T_k)");
  }
  if (o.scale) {
    if (!std::isfinite(*o.scale)) throw error(who + ": the scale must be finite, got " + number_str(*o.scale));
    plan.scale = *o.scale;
  } else if (d_k == 0) {
    throw error(who + ": d_k = 0, the default scale 1/sqrt(d_k) is undefined: " + all());
  } else {
    plan.scale = 1.0 / std::sqrt(static_cast<double>(d_k));
  }
  if (!(std::isfinite(o.softcap) && o.softcap >= 0)) {
    throw error(who + ": softcap must be finite and > 0 (0 for none), got " + number_str(o.softcap));
  }
  for (const auto& [name, var] : {std::pair<const char*, const Var<T>*>{"bias", &o.bias}, {"mask", &o.mask}}) {
    if (var->valid() && !detail::broadcastable(var->shape(), plan.scores)) {
      throw error(who + ": the " + name + " " + shape_str(var->shape()) + " does not broadcast to the scores " +
                  shape_str(plan.scores) + " (B..., Hq, T_q, T_k) by numpy's rules (trailing axes aligned)");
    }
  }
  if (o.weights == AttentionWeights::softmax && o.sigmoid_bias) {
    throw error(who + ": sigmoid_bias is for sigmoid weights; these are softmax (set weights = AttentionWeights::sigmoid)");
  }
  if (o.sigmoid_bias && !std::isfinite(*o.sigmoid_bias)) {
    throw error(who + ": sigmoid_bias must be finite, got " + number_str(*o.sigmoid_bias));
  }
  if (o.window > 0 && !o.causal) {
    throw error(who + ": window = " + std::to_string(o.window) + " is a causal sliding window (query i sees the keys j "
                "with i' - window < j <= i', i' = i + T_k - T_q): set causal = true too; a bidirectional window is not "
                "supported");
  }
  if (fused) check_fused(who, o, alibi, plan.scores);
  plan.sigmoid_bias = o.sigmoid_bias ? *o.sigmoid_bias : -std::log(static_cast<double>(t_k));
  return plan;
}

// The options' Vars, when given, of the graph of `anchor` (named `first`).
template <class T>
void check_option_graphs(const std::string& who, const char* first, const Var<T>& anchor, const VariantOptions<T>& o) {
  if (o.bias.valid()) detail::check_one_graph<T>(who, {{first, &anchor}, {"bias", &o.bias}});
  if (o.mask.valid()) detail::check_one_graph<T>(who, {{first, &anchor}, {"mask", &o.mask}});
}

// The nodes, once every check has passed.
template <class T>
VariantAttentionNodes<T> build_variant(const Var<T>& q, const Var<T>& k, const Var<T>& v, const VariantOptions<T>& o,
                                       const VariantPlan& plan) {
  VariantAttentionNodes<T> a;
  const Var<T> k2 = repeat_kv(k, plan.groups), v2 = repeat_kv(v, plan.groups);
  if (o.impl == AttentionImpl::fused) {  // scores, logits, weights stay empty: no node holds them
    a.output = flash_attention(q, k2, v2, plan.scale, FlashMask<T>{o.causal, o.mask, o.window}, o.softcap).out;
    return a;
  }
  Var<T> mask = o.mask;
  if (o.causal) {  // a constant; the caller's mask stays an input, so a new value of a mask leaf is read
    const std::size_t t_q = plan.scores[plan.scores.size() - 2], t_k = plan.scores.back();
    const bool windowed = o.window > 0;
    const Var<T> fixed = q.graph().constant(
        windowed ? "sliding_window_mask" : "causal_mask",
        xt::cast<T>(windowed ? sliding_window_mask(t_q, t_k, o.window) : causal_mask(t_q, t_k)));
    mask = mask.valid() ? logical_and(mask, fixed) : fixed;
  }
  const Var<T> scaled_q = scale(q, plan.scale);  // (scale q) k^T, as attention: no pass over the scores
  a.scores = matmul(scaled_q, transpose(k2));
  Var<T> s = a.scores;
  if (o.softcap > 0) s = softcap(s, o.softcap);
  if (o.bias.valid()) s = add(s, o.bias);
  if (o.weights == AttentionWeights::softmax) {
    a.logits = mask.valid() ? apply_mask(s, mask, -std::numeric_limits<double>::infinity()) : s;
    a.weights = softmax(a.logits, -1);
  } else {
    xt::xarray<T> b = xt::xarray<T>::from_shape({});
    b() = static_cast<T>(plan.sigmoid_bias);
    a.logits = add(s, q.graph().constant("sigmoid_bias", std::move(b)));
    const Var<T> w = sigmoid(a.logits);
    a.weights = mask.valid() ? apply_mask(w, mask, 0.0) : w;
  }
  a.output = matmul(a.weights, v2);
  return a;
}

// (B, T, h d_head) -> (B, h, T, d_head)
template <class T>
Var<T> split_heads(const Var<T>& x, std::size_t heads) {
  const Shape s = x.shape();
  return permute(reshape(x, Shape{s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

}  // namespace

template <class T>
VariantAttentionNodes<T> variant_attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                                 const VariantOptions<T>& o) {
  detail::check_one_graph<T>("variant_attention", {{"q", &q}, {"k", &k}, {"v", &v}});
  check_option_graphs("variant_attention", "q", q, o);
  const VariantPlan plan = check_variant("variant_attention", q.shape(), k.shape(), v.shape(), o);
  return build_variant(q, k, v, o, plan);
}

template <class T>
VariantAttentionParams<T> variant_attention_params(Graph<T>& g, std::size_t d_model, std::size_t heads,
                                                   std::size_t kv_heads, bool qk_norm, std::uint64_t seed,
                                                   const std::string& prefix) {
  if (heads == 0 || d_model % heads != 0 || kv_heads == 0 || heads % kv_heads != 0) {
    throw error("variant_attention_params: needs heads dividing d_model and kv_heads dividing heads, got d_model = " +
                std::to_string(d_model) + ", heads = " + std::to_string(heads) + ", kv_heads = " + std::to_string(kv_heads));
  }
  const std::size_t d_head = d_model / heads, d_kv = d_head * kv_heads;
  const auto weight = [&](const char* name, std::size_t cols, std::uint64_t s) {
    return g.parameter(prefix + "." + name, glorot_uniform<T>({d_model, cols}, s));
  };
  const auto zeros = [&](const char* name, std::size_t n) { return g.parameter(prefix + "." + name, xt::zeros<T>({n})); };
  VariantAttentionParams<T> p;
  p.w_q = weight("w_q", d_model, seed);
  p.b_q = zeros("b_q", d_model);
  p.w_k = weight("w_k", d_kv, seed + 1);
  p.b_k = zeros("b_k", d_kv);
  p.w_v = weight("w_v", d_kv, seed + 2);
  p.b_v = zeros("b_v", d_kv);
  p.w_o = weight("w_o", d_model, seed + 3);
  p.b_o = zeros("b_o", d_model);
  if (qk_norm) {
    p.q_gain = g.parameter(prefix + ".q_gain", xt::ones<T>({d_head}));
    p.k_gain = g.parameter(prefix + ".k_gain", xt::ones<T>({d_head}));
  }
  return p;
}

template <class T>
VariantBlockNodes<T> variant_multi_head_attention_nodes(const Var<T>& x, const VariantAttentionParams<T>& p,
                                                        std::size_t heads, std::size_t kv_heads,
                                                        const VariantBlockOptions<T>& o) {
  const std::string who = "variant_multi_head_attention";
  detail::check_one_graph<T>(who, {{"x", &x}, {"w_q", &p.w_q}, {"b_q", &p.b_q}, {"w_k", &p.w_k}, {"b_k", &p.b_k},
                                   {"w_v", &p.w_v}, {"b_v", &p.b_v}, {"w_o", &p.w_o}, {"b_o", &p.b_o}});
  const bool normed = o.qk_norm != QkNorm::none;
  if (normed) detail::check_one_graph<T>(who, {{"x", &x}, {"q_gain", &p.q_gain}, {"k_gain", &p.k_gain}});
  check_option_graphs(who, "x", x, o.attention);
  const Shape xs = x.shape();
  if (xs.size() != 3 || xs[1] == 0 || xs[2] == 0) {
    throw error(who + ": x must be (B, T, d_model) with T > 0 and d_model > 0: x is " + shape_str(xs));
  }
  const std::size_t b = xs[0], t = xs[1], d = xs[2];
  if (heads == 0 || d % heads != 0) {
    throw error(who + ": " + std::to_string(heads) + " heads do not divide d_model = " + std::to_string(d));
  }
  if (kv_heads == 0 || heads % kv_heads != 0) {
    throw error(who + ": " + std::to_string(kv_heads) + " kv_heads do not divide the " + std::to_string(heads) +
                " heads (grouped-query attention needs kv_heads dividing heads)");
  }
  const std::size_t d_head = d / heads, d_kv = d_head * kv_heads;
  if (o.rope && d_head % 2 != 0) {
    throw error(who + ": rope needs an even head dimension (it pairs dimension i with i + d_head/2), got d_head = " +
                std::to_string(d_head) + " (d_model = " + std::to_string(d) + ", " + std::to_string(heads) + " heads)");
  }
  if (o.rope && !(std::isfinite(o.rope_base) && o.rope_base > 0)) {
    throw error(who + ": rope_base must be finite and > 0, got " + number_str(o.rope_base));
  }
  if (normed && !(o.qk_norm_eps >= 0 && std::isfinite(o.qk_norm_eps))) {
    throw error(who + ": qk_norm_eps must be finite and >= 0, got " + number_str(o.qk_norm_eps));
  }
  std::vector<std::tuple<const char*, const Var<T>*, Shape>> expected = {
      {"w_q", &p.w_q, {d, d}},    {"b_q", &p.b_q, {d}},    {"w_k", &p.w_k, {d, d_kv}}, {"b_k", &p.b_k, {d_kv}},
      {"w_v", &p.w_v, {d, d_kv}}, {"b_v", &p.b_v, {d_kv}}, {"w_o", &p.w_o, {d, d}},    {"b_o", &p.b_o, {d}}};
  if (normed) {
    expected.emplace_back("q_gain", &p.q_gain, Shape{d_head});
    expected.emplace_back("k_gain", &p.k_gain, Shape{d_head});
  }
  for (const auto& [name, var, shape] : expected) {
    if (var->shape() != shape) {
      throw error(who + ": " + name + " is " + shape_str(var->shape()) + ", expected " + shape_str(shape) +
                  " for d_model = " + std::to_string(d) + ", " + std::to_string(heads) + " heads and " +
                  std::to_string(kv_heads) + " kv_heads (d_head = " + std::to_string(d_head) + ")");
    }
  }
  VariantOptions<T> attn = o.attention;
  const Shape q_shape{b, heads, t, d_head}, kv_shape{b, kv_heads, t, d_head};
  const VariantPlan plan = check_variant(who, q_shape, kv_shape, kv_shape, attn, o.alibi);

  Graph<T>& g = x.graph();
  const auto scope = detail::parameter_scope(p.w_q, "w_q");  // its nodes' scope: the parameters' prefix
  Var<T> q = split_heads(linear(x, p.w_q, p.b_q), heads);      // (B, heads, T, d_head)
  Var<T> k = split_heads(linear(x, p.w_k, p.b_k), kv_heads);   // (B, kv_heads, T, d_head)
  const Var<T> v = split_heads(linear(x, p.w_v, p.b_v), kv_heads);
  if (normed) {
    q = qk_norm(q, p.q_gain, o.qk_norm, o.qk_norm_eps);
    k = qk_norm(k, p.k_gain, o.qk_norm, o.qk_norm_eps);
  }
  if (o.rope) {
    const Var<T> positions = rope_positions(g, t);
    q = rope(q, positions, o.rope_base);
    k = rope(k, positions, o.rope_base);
  }
  if (o.alibi) {
    const Var<T> alibi = alibi_bias(g, heads, t, t);
    attn.bias = attn.bias.valid() ? add(attn.bias, alibi) : alibi;
  }
  VariantBlockNodes<T> out;
  out.attention = build_variant(q, k, v, attn, plan);
  const Var<T> merged = reshape(permute(out.attention.output, {0, 2, 1, 3}), Shape{b, t, d});
  out.output = linear(merged, p.w_o, p.b_o);
  return out;
}

#define XGRAD_INSTANTIATE_VARIANT_ATTENTION(T)                                                                     \
  template VariantAttentionNodes<T> variant_attention_nodes(const Var<T>&, const Var<T>&, const Var<T>&,           \
                                                            const VariantOptions<T>&);                             \
  template VariantAttentionParams<T> variant_attention_params(Graph<T>&, std::size_t, std::size_t, std::size_t,    \
                                                              bool, std::uint64_t, const std::string&);            \
  template VariantBlockNodes<T> variant_multi_head_attention_nodes(const Var<T>&, const VariantAttentionParams<T>&, \
                                                                   std::size_t, std::size_t, const VariantBlockOptions<T>&);
XGRAD_INSTANTIATE_VARIANT_ATTENTION(float)
XGRAD_INSTANTIATE_VARIANT_ATTENTION(double)
#undef XGRAD_INSTANTIATE_VARIANT_ATTENTION

}  // namespace xgrad
