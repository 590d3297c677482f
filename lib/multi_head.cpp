#include <xgrad/lib/multi_head.hpp>

#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/attention.hpp>
#include <xgrad/lib/optim.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/reshape.hpp>

namespace xgrad {

namespace {

// x (B, T, d) -> x W + b: linear makes it one GEMM of the B T rows, b added inside it, and its
// gradient w.r.t. W one product of them.
template <class T>
Var<T> project(const Var<T>& x, const Var<T>& w, const Var<T>& b) {
  return linear(x, w, b);
}

// (B, T, d_model) -> (B, H, T, d_head)
template <class T>
Var<T> split_heads(const Var<T>& x, std::size_t heads) {
  const auto& s = x.value().shape();
  return permute(reshape(x, Shape{s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

// Every check of the block before its first node: a rejected call adds no node.
// The mask is a Var (mask) or fixed (fixed_mask), or neither.
template <class T>
void check_block(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& p, std::size_t heads,
                 const Var<T>* mask, const xt::xarray<bool>* fixed_mask, AttentionImpl impl) {
  detail::check_one_graph<T>("multi_head_attention",
                             {{"x_q", &x_q}, {"x_kv", &x_kv}, {"w_q", &p.w_q}, {"b_q", &p.b_q}, {"w_k", &p.w_k},
                              {"b_k", &p.b_k}, {"w_v", &p.w_v}, {"b_v", &p.b_v}, {"w_o", &p.w_o}, {"b_o", &p.b_o}});
  if (mask) detail::check_one_graph<T>("multi_head_attention", {{"x_q", &x_q}, {"mask", mask}});
  const Shape q = shape_of(x_q), kv = shape_of(x_kv);
  if (q.size() != 3 || kv.size() != 3 || q[0] != kv[0] || q[2] != kv[2]) {
    throw error("multi_head_attention: x_q and x_kv must be (B, T, d_model) with the same B and d_model: x_q is " +
                shape_str(q) + ", x_kv is " + shape_str(kv));
  }
  const std::size_t d = q[2];
  if (heads == 0 || d % heads != 0) {
    throw error("multi_head_attention: " + std::to_string(heads) + " heads do not divide d_model = " + std::to_string(d));
  }
  if (d == 0 || kv[1] == 0) {
    throw error("multi_head_attention: needs d_model > 0 and T_k > 0 (softmax over no keys is undefined): x_q is " +
                shape_str(q) + ", x_kv is " + shape_str(kv));
  }
  const std::pair<const char*, const Var<T>*> all[] = {{"w_q", &p.w_q}, {"b_q", &p.b_q}, {"w_k", &p.w_k}, {"b_k", &p.b_k},
                                                       {"w_v", &p.w_v}, {"b_v", &p.b_v}, {"w_o", &p.w_o}, {"b_o", &p.b_o}};
  for (const auto& [name, v] : all) {
    const Shape expected = name[0] == 'w' ? Shape{d, d} : Shape{d};
    if (!v->valid() || shape_of(*v) != expected) {
      throw error(std::string("multi_head_attention: ") + name + " is " + (v->valid() ? shape_str(shape_of(*v)) : "empty") +
                  ", expected " + shape_str(expected) + " for d_model = " + std::to_string(d));
    }
  }
  const Shape scores{q[0], heads, q[1], kv[1]};
  if (impl == AttentionImpl::fused) {
    if (fixed_mask && !detail::is_causal_mask(*fixed_mask, q[1], kv[1])) {
      throw error("multi_head_attention: the fused attention takes causal_mask(" + std::to_string(q[1]) + ", " +
                  std::to_string(kv[1]) + ") as its fixed mask, not this " + shape_str(shape_of(*fixed_mask)) +
                  " mask; give a key-padding mask as a Var (B, 1, 1, T_k), or use AttentionImpl::composed");
    }
    if (mask) with_context([] { return std::string("multi_head_attention: "); },
                           [&] { detail::check_key_padding_shape(scores, mask->shape()); });
    return;
  }
  // The scores (B, H, T_q, T_k) of the composed attention (the fused one holds none).
  std::optional<Shape> mask_shape;
  if (mask) mask_shape = mask->shape();
  if (fixed_mask) mask_shape = shape_of(*fixed_mask);
  detail::check_scores(scores, mask_shape);
}

template <class T>
Var<T> build_block(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& p, std::size_t heads,
                   const Var<T>* mask, const xt::xarray<bool>* fixed_mask, AttentionImpl impl) {
  check_block(x_q, x_kv, p, heads, mask, fixed_mask, impl);
  const auto scope = detail::parameter_scope(p.w_q, "w_q");
  const Var<T> q = split_heads(project(x_q, p.w_q, p.b_q), heads);
  const Var<T> k = split_heads(project(x_kv, p.w_k, p.b_k), heads);
  const Var<T> v = split_heads(project(x_kv, p.w_v, p.b_v), heads);
  Var<T> per_head;  // (B, H, T_q, d_head)
  if (impl == AttentionImpl::fused) {
    FlashMask<T> flash;
    flash.causal = fixed_mask != nullptr;  // check_block let only causal_mask through
    if (mask) flash.key_mask = *mask;
    per_head = fused_attention(q, k, v, std::nullopt, flash);
  } else if (mask) {
    per_head = masked_attention(q, k, v, *mask);
  } else if (fixed_mask) {
    per_head = masked_attention(q, k, v, *fixed_mask);
  } else {
    per_head = attention(q, k, v);
  }
  const auto& s = x_q.value().shape();
  const Var<T> merged = reshape(permute(per_head, {0, 2, 1, 3}), Shape{s[0], s[1], s[2]});
  return project(merged, p.w_o, p.b_o);
}

}  // namespace

template <class T>
AttentionParams<T> attention_params(Graph<T>& g, std::size_t d_model, std::uint64_t seed, const std::string& prefix) {
  const auto weight = [&](const char* name, std::uint64_t s) {
    return g.parameter(prefix + "." + name, glorot_uniform<T>({d_model, d_model}, s));
  };
  const auto bias = [&](const char* name) { return g.parameter(prefix + "." + name, xt::zeros<T>({d_model})); };
  AttentionParams<T> p;
  p.w_q = weight("w_q", seed);
  p.b_q = bias("b_q");
  p.w_k = weight("w_k", seed + 1);
  p.b_k = bias("b_k");
  p.w_v = weight("w_v", seed + 2);
  p.b_v = bias("b_v");
  p.w_o = weight("w_o", seed + 3);
  p.b_o = bias("b_o");
  return p;
}

template <class T>
Var<T> multi_head_attention(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& p, std::size_t heads,
                            const std::optional<xt::xarray<bool>>& mask, AttentionImpl impl) {
  return build_block<T>(x_q, x_kv, p, heads, nullptr, mask ? &*mask : nullptr, impl);
}

template <class T>
Var<T> multi_head_attention(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& p, std::size_t heads,
                            const Var<T>& mask, AttentionImpl impl) {
  return build_block<T>(x_q, x_kv, p, heads, &mask, nullptr, impl);
}

template AttentionParams<float> attention_params(Graph<float>&, std::size_t, std::uint64_t, const std::string&);
template AttentionParams<double> attention_params(Graph<double>&, std::size_t, std::uint64_t, const std::string&);
template Var<float> multi_head_attention(const Var<float>&, const Var<float>&, const AttentionParams<float>&, std::size_t,
                                         const std::optional<xt::xarray<bool>>&, AttentionImpl);
template Var<double> multi_head_attention(const Var<double>&, const Var<double>&, const AttentionParams<double>&,
                                          std::size_t, const std::optional<xt::xarray<bool>>&, AttentionImpl);
template Var<float> multi_head_attention(const Var<float>&, const Var<float>&, const AttentionParams<float>&, std::size_t,
                                         const Var<float>&, AttentionImpl);
template Var<double> multi_head_attention(const Var<double>&, const Var<double>&, const AttentionParams<double>&,
                                          std::size_t, const Var<double>&, AttentionImpl);

}  // namespace xgrad
