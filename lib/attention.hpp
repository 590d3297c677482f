// Scaled dot-product attention, assembled from graph nodes.
#pragma once

#include <optional>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Shapes, one legend: B... leading batch axes (none, (B), (B, H), ...), equal in q, k and v;
// T_q queries, T_k keys, d_k key width, d_v value width.
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> out (B..., T_q, d_v)
//
// out = softmax(scale * q k^T, axis = -1) v, scale = 1/sqrt(d_k) unless given, built from the
// nodes
//   kt = transpose(k); scores = scale(matmul(q, kt), scale); weights = softmax(scores);
//   out = matmul(weights, v).
// scale = 1 gives the unscaled variant, for comparison (see softmax_diagnostics).
// No hand-written backward: grad() differentiates through those nodes.
//
// Throws xgrad::error, naming the shapes, when a rank is < 2, the batch axes differ, d_k of q
// and k differ, T_k of k and v differ, T_k = 0 (softmax over no keys) or d_k = 0 (1/sqrt(0)),
// or the Vars belong to different graphs; and when a given scale is not finite.
template <class T>
struct AttentionNodes {
  Var<T> scores;   // (B..., T_q, T_k), already scaled
  Var<T> weights;  // (B..., T_q, T_k), rows sum to 1
  Var<T> output;   // (B..., T_q, d_v)
};

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v,
                                  std::optional<double> scale = std::nullopt);

template <class T>
Var<T> attention(const Var<T>& q, const Var<T>& k, const Var<T>& v) {
  return attention_nodes(q, k, v).output;
}

template <class T>
Var<T> attention(const Var<T>& q, const Var<T>& k, const Var<T>& v, double scale) {
  return attention_nodes(q, k, v, scale).output;
}

}  // namespace xgrad
