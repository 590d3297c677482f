// Lean replays: after keep_only, a replay holds only the values still to be read.
#include <cstdio>
#include <xgrad/xgrad.hpp>

int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  using namespace xgrad;
  const std::size_t t = 1024, d = 64;
  Graph<float> g;
  const auto q = g.input("q", he_normal<float>({t, d}, 1));
  const auto k = g.input("k", he_normal<float>({t, d}, 2));
  const auto v = g.input("v", he_normal<float>({t, d}, 3));
  const auto out = attention(q, k, v);
  const auto grads = grad(out, {q, k, v});
  const xt::xarray<float> grad_k = grads[1].value();
  const auto mib = [&] { return double(g.held_elements() * sizeof(float)) / (1 << 20); };
  std::printf("every node's value: %.1f MiB\n", mib());

  g.keep_only({out, grads[0], grads[1], grads[2]});  // the scores, weights, ... are released
  g.replay();
  std::printf("lean, after a replay: %.1f MiB\n", mib());
  const bool same = grads[1].value() == grad_k;
  std::printf("%s: the lean replay gives the same grad_k bits\n", same ? "PASS" : "FAIL");
  return same ? 0 : 1;
}
