// A pre-LN transformer block written with operators, trained for 100 steps to predict each
// token's successor; then its parameters are saved and loaded back.
#include <cstdio>
#include <xgrad/xgrad.hpp>

using namespace xgrad;

int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  const std::size_t B = 4, T = 8, d = 16, vocab = 10;
  Graph<float> g;
  const auto weight = [&](const char* name, std::size_t rows, std::size_t cols) {
    return g.parameter(name, glorot_uniform<float>({rows, cols}, g.size()));
  };
  const auto ones = [&](const char* name) { return g.parameter(name, xt::ones<float>({d})); };
  const auto zeros = [&](const char* name) { return g.parameter(name, xt::zeros<float>({d})); };
  const auto zeros4 = [&](const char* name) { return g.parameter(name, xt::zeros<float>({4 * d})); };
  xt::xarray<std::int64_t> batch = xt::zeros<std::int64_t>({B, T});
  const auto ids = g.indices("ids", batch);                                  // (B, T) tokens
  const auto target = g.input("target", xt::zeros<float>({B, T, vocab}));   // one-hot successors
  const auto wte = weight("wte", vocab, d);

  const auto x = embedding(wte, ids) + weight("wpe", T, d);                  // (B, T, d)
  const auto a = layer_norm(x, ones("ln1.g"), zeros("ln1.b"));
  const auto h = x + multi_head_attention(a, a, attention_params(g, d, 7), 2, causal_mask(T, T));
  const auto u = layer_norm(h, ones("ln2.g"), zeros("ln2.b"));              // (B, T, d) @ (d, 4d):
  const auto mlp = matmul(gelu(matmul(u, weight("w1", d, 4 * d)) + zeros4("b1")), weight("w2", 4 * d, d));
  const auto y = h + dropout(mlp, 0.1, 42);                                 // the batch broadcasts
  const auto logits = matmul(layer_norm(y, ones("lnf.g"), zeros("lnf.b")), wte, false, true);
  const auto loss = cross_entropy(logits, target);

  const auto feed = [&](std::int64_t shift) {  // a batch of tokens and their successors
    batch = (xt::arange<std::int64_t>(B * T).reshape({B, T}) + shift) % vocab;
    xt::xarray<float> t = xt::zeros<float>({B, T, vocab});
    for (std::size_t b = 0; b < B; ++b) {
      for (std::size_t i = 0; i < T; ++i) t(b, i, (batch(b, i) + 1) % vocab) = 1;
    }
    g.set_value(ids, batch);
    g.set_value(target, t);
  };

  const auto params = g.parameters();
  const auto grads = grad(loss, params);
  AdamW<float> opt(params, 1e-2);
  for (std::uint64_t step = 0; step <= 100; ++step) {
    feed(static_cast<std::int64_t>(step) * 3);
    g.set_step(step);  // a fresh dropout mask
    g.replay();
    if (step % 50 == 0) std::printf("step %3d  loss %.4f\n", static_cast<int>(step), loss.value()());
    clip_grad_norm(grads, 1.0);
    opt.step(grads);
  }
  feed(1);
  g.set_training(false);  // evaluation: dropout is the identity
  save_parameters(g, "block.safetensors", {{"d_model", "16"}});
  load_parameters(g, "block.safetensors");
  g.replay();
  std::printf("eval loss %.4f, %zu parameters saved and loaded\n", loss.value()(), params.size());
}
