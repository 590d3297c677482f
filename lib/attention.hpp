// Scaled dot-product attention, assembled from graph nodes.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Shapes, one legend: B... leading batch axes (none, (B), (B, H), ...), equal in q, k and v;
// T_q queries, T_k keys, d_k key width, d_v value width.
//   q (B..., T_q, d_k), k (B..., T_k, d_k), v (B..., T_k, d_v) -> out (B..., T_q, d_v)
//
// out = softmax(q k^T / sqrt(d_k), axis = -1) v, built from the nodes
//   kt = transpose(k); scores = scale(matmul(q, kt), 1/sqrt(d_k)); weights = softmax(scores);
//   out = matmul(weights, v).
// No hand-written backward: grad() differentiates through those nodes.
//
// Throws xgrad::error, naming the shapes, when a rank is < 2, the batch axes differ, d_k of q
// and k differ, T_k of k and v differ, T_k = 0 (softmax over no keys) or d_k = 0 (1/sqrt(0)),
// or the Vars belong to different graphs.
template <class T>
struct AttentionNodes {
  Var<T> scores;   // (B..., T_q, T_k), already scaled
  Var<T> weights;  // (B..., T_q, T_k), rows sum to 1
  Var<T> output;   // (B..., T_q, d_v)
};

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v);

template <class T>
Var<T> attention(const Var<T>& q, const Var<T>& k, const Var<T>& v) {
  return attention_nodes(q, k, v).output;
}

}  // namespace xgrad
