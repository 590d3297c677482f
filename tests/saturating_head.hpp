// A model-shaped attention for the per-head diagnostics' tests (suites diagnostics and cli):
// q, k, v of (B, H, T, d) = (2, 3, 4, 8), head `head`'s queries scaled by 30 so that its softmax
// rows saturate, in scope "enc.l0.attn", with its backward pass (a random grad_out).
#pragma once

#include <xtensor/xview.hpp>

#include <xgrad/xgrad.hpp>

namespace xgrad::test {

inline void saturating_head(Graph<double>& g, std::size_t head) {
  xt::xarray<double> qv = random_array<double>({2, 3, 4, 8}, 11);
  xt::view(qv, xt::all(), head) *= 30.0;
  const auto q = g.input("q", qv);
  const auto k = g.input("k", random_array<double>({2, 3, 4, 8}, 12));
  const auto v = g.input("v", random_array<double>({2, 3, 4, 8}, 13));
  const auto scope = g.scope("enc.l0.attn");
  grad(attention(q, k, v), {q, k, v}, xt::xarray<double>(random_array<double>({2, 3, 4, 8}, 14)));
}

}  // namespace xgrad::test
