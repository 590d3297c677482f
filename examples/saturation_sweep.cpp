// How softmax saturation shrinks gradients, with xgrad's diagnostics: first one attention node
// inspected row by row, then the scale sweep of `xgrad saturation` through the library.
#include <cstdio>

#include <xgrad/xgrad.hpp>

int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  // Unscaled attention (scale 1) on wide keys: scores of variance d_k = 256.
  const std::size_t t_q = 4, t_k = 8, d_k = 256, d_v = 4;
  xgrad::NormalStream normal(7);  // standard normal entries, one seeded stream
  const auto draw = [&](std::size_t rows, std::size_t cols) { return normal.array<double>({rows, cols}); };
  xgrad::Graph<double> g;
  const auto q = g.input("q", draw(t_q, d_k));
  const auto k = g.input("k", draw(t_k, d_k));
  const auto v = g.input("v", draw(t_k, d_v));
  const auto unscaled = xgrad::attention_nodes(q, k, v, 1.0);
  const auto scaled = xgrad::attention_nodes(q, k, v);  // 1 / sqrt(d_k)
  xgrad::grad(unscaled.output, {q}, draw(t_q, d_v));
  xgrad::grad(scaled.output, {q}, draw(t_q, d_v));

  // One entry per softmax node; rows along its axis; gains from its backward pass.
  for (const auto& d : xgrad::softmax_diagnostics(g)) {
    std::printf("softmax node %zu (%s): %.0f%% of rows saturated\n", d.node,
                d.node == unscaled.weights.id() ? "unscaled" : "scaled", 100 * d.saturated_fraction);
    for (const auto& r : d.rows) {
      std::printf("  max weight %.3f  H/log n %.3f  exp(H) %.2f  |J|_F %.3f  gain %.4f\n", r.max_weight,
                  r.normalized_entropy, r.effective_support, r.jacobian_norm, *r.gradient_gain);
    }
  }

  // The sweep over d_k: the spec's variance argument, and what saturation does to gradients.
  xgrad::SweepOptions options;
  options.d_k = {1, 16, 256};
  options.trials = 10;
  const auto rows = xgrad::saturation_sweep(options);
  std::printf("\n%s", xgrad::sweep_to_table(rows).c_str());
}
