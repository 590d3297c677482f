// Multi-head attention, composed of graph nodes only (no hand-written backward).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <xgrad/graph/graph.hpp>
#include <xgrad/lib/attention.hpp>

namespace xgrad {

// The projections of one attention block: W_q, W_k, W_v, W_o of shape (d_model, d_model) and
// their biases of shape (d_model), as parameter leaves.
template <class T>
struct AttentionParams {
  Var<T> w_q, b_q, w_k, b_k, w_v, b_v, w_o, b_o;
};

// Parameters "<prefix>.w_q", ... in g: Glorot-uniform weights from `seed` (one seed per matrix:
// seed, seed + 1, ...), zero biases.
template <class T>
AttentionParams<T> attention_params(Graph<T>& g, std::size_t d_model, std::uint64_t seed,
                                    const std::string& prefix = "attn");

// x_q (B, T_q, d_model), x_kv (B, T_k, d_model) -> (B, T_q, d_model):
//   Q = x_q W_q + b_q, K = x_kv W_k + b_k, V = x_kv W_v + b_v, each split into `heads` heads of
//   d_model / heads: (B, H, T, d_head) by reshape and permute; attention per head, masked when a
//   mask is given (its shape broadcasts to the scores (B, H, T_q, T_k) by numpy's rules: (T_q,
//   T_k), (B, 1, T_q, T_k), key_padding_mask's (B, 1, 1, T_k); a (B, T_q, T_k) mask does not,
//   as its B would meet the heads axis); heads merged back; out = merged W_o + b_o. Built from
//   linear, broadcast_to, reshape, permute and the attention nodes, so grad()
//   differentiates it like any graph. `impl` chooses the attention nodes (lib/attention.hpp):
//   fused, for long sequences, takes a key-padding mask Var (B, 1, 1, T_k) and, as the fixed
//   mask, causal_mask(T_q, T_k); any other mask with fused is an error naming what it takes.
//   Its nodes carry the named scope of its parameters' prefix ("h0.attn" for w_q named
//   "h0.attn.w_q", as attention_params names them; detail::parameter_scope).
//   The mask Var is a mask leaf (Graph::mask: set_value per batch) or a node of 1 and 0; the
//   fixed mask (xt::xarray<bool>) becomes a constant that no replay changes (see
//   masked_attention).
// Throws xgrad::error naming the shapes if x_q or x_kv is not (B, T, d_model) with one B and
// d_model, heads does not divide d_model, d_model or T_k is 0, a parameter has the wrong shape,
// a Var is empty or of another graph than x_q, the mask does not broadcast to the scores or
// the scores (B, H, T_q, T_k) would hold more than max_array_elements = 2^28 elements; and if
// a mask that fused does not take is given with AttentionImpl::fused. Every check comes before the first node: a
// rejected call adds no node. attention_params throws as glorot_uniform does for a d_model
// whose (d_model, d_model) weights exceed that bound.
template <class T>
Var<T> multi_head_attention(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& params,
                            std::size_t heads, const std::optional<xt::xarray<bool>>& mask = std::nullopt,
                            AttentionImpl impl = AttentionImpl::composed);

template <class T>
Var<T> multi_head_attention(const Var<T>& x_q, const Var<T>& x_kv, const AttentionParams<T>& params,
                            std::size_t heads, const Var<T>& mask, AttentionImpl impl = AttentionImpl::composed);

namespace detail {

// The named scope (Graph::scope) of a block whose parameters are named "<prefix>.<name>", for
// the nodes it builds: the prefix ("h0.attn" of "h0.attn.w_q"), or, inside a scope the prefix
// extends ("h0"), the rest of it ("attn"), so that the nodes' scope is the prefix; none when the
// parameter's name is not "<prefix>.<name>" or the scope is the prefix already.
template <class T>
std::optional<typename Graph<T>::Scope> parameter_scope(const Var<T>& parameter, const std::string& name) {
  const std::string& full = parameter.node().name;
  const std::string tail = "." + name;
  if (full.size() <= tail.size() || full.compare(full.size() - tail.size(), tail.size(), tail) != 0) return std::nullopt;
  std::string prefix = full.substr(0, full.size() - tail.size());
  const std::string& current = parameter.graph().current_scope();
  if (prefix == current) return std::nullopt;
  if (!current.empty() && prefix.size() > current.size() && prefix.compare(0, current.size(), current) == 0 &&
      prefix[current.size()] == '.') {
    prefix.erase(0, current.size() + 1);
  }
  if (!scope_name_fault(prefix).empty()) return std::nullopt;
  return parameter.graph().scope(prefix);
}

}  // namespace detail

}  // namespace xgrad
