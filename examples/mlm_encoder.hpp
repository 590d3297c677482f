// The model of examples/mlm_encoder.cpp: a BERT-style encoder trained as a masked language
// model on batches of variable-length sequences. A header of its own so that
// tests/examples/mlm_encoder_test.cpp checks the very model the program trains against PyTorch
// (tests/data/make_mlm_fixture.py). What it shows: the padding mask as a mask leaf (a new one
// each batch through set_value, read by every replay), the loss over the masked positions only
// (cross_entropy with ignore_index) and AdamW with nanoGPT's two parameter groups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/xgrad.hpp>

namespace mlm_encoder {

using xgrad::Graph;
using xgrad::Var;

struct Config {
  std::size_t layers = 2, heads = 2, d_model = 16, block = 8, vocab = 12;
};

// Token 0 pads a sequence, token 1 replaces a masked one; a label of -100 is not predicted.
inline constexpr std::int64_t pad_id = 0, mask_id = 1, ignore_label = -100;

// What the program feeds, ids and labels (B, T) and the key-padding mask (B, 1, 1, T), and what
// it reads, the logits (B, T, vocab) and the loss: the mean cross-entropy of the masked tokens.
template <class T>
struct Model {
  Var<T> ids, labels, pad, logits, loss;
};

// Builds the model for batches of `batch` sequences in g, pre-LN:
//   x = wte[ids] + wpe;  per layer: x += attention(ln1(x), pad); x += w2 gelu(w1 ln2(x) + b1) + b2;
//   logits = lnf(x) head.w + head.b;  loss = cross_entropy(logits, labels, ignore_index -100).
// Weights N(0, 0.1^2) from seed, seed + 1, ... (one each, in creation order), biases 0, layer
// norms (1, 0). Parameter names as make_mlm_fixture.py's: wte, wpe, l0.ln1.g, l0.attn.w_q, ...
template <class T>
Model<T> build_model(Graph<T>& g, const Config& c, std::size_t batch, std::uint64_t seed) {
  std::uint64_t next_seed = seed;
  const auto weight = [&](const std::string& name, std::size_t rows, std::size_t cols) {
    return g.parameter(name, xgrad::random_array<T>({rows, cols}, next_seed++, 0.1));
  };
  const auto vector = [&](const std::string& name, std::size_t n, T value) {
    return g.parameter(name, xt::xarray<T>(xt::zeros<T>({n}) + value));
  };
  const std::size_t d = c.d_model;
  Model<T> m;
  m.ids = g.indices("ids", xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({batch, c.block})));
  m.labels = g.indices("labels", xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({batch, c.block}) + ignore_label));
  m.pad = g.mask("pad", xgrad::key_padding_mask(std::vector<std::size_t>(batch, c.block), c.block));
  // Named scopes (Graph::scope) for pictures and inspection: embed, l0 (l0.attn, l0.mlp), ..., head, loss.
  Var<T> x;
  {
    const auto scope = g.scope("embed");
    const Var<T> wte = weight("wte", c.vocab, d), wpe = weight("wpe", c.block, d);
    x = xgrad::embedding(wte, m.ids) + wpe;  // (B, T, d) + (T, d)
  }
  for (std::size_t l = 0; l < c.layers; ++l) {
    const std::string h = "l" + std::to_string(l) + ".";
    const auto layer = g.scope("l" + std::to_string(l));  // the attention's nodes: l<l>.attn (its parameters' prefix)
    const Var<T> ln1_g = vector(h + "ln1.g", d, 1), ln1_b = vector(h + "ln1.b", d, 0);
    xgrad::AttentionParams<T> attn;
    attn.w_q = weight(h + "attn.w_q", d, d);
    attn.b_q = vector(h + "attn.b_q", d, 0);
    attn.w_k = weight(h + "attn.w_k", d, d);
    attn.b_k = vector(h + "attn.b_k", d, 0);
    attn.w_v = weight(h + "attn.w_v", d, d);
    attn.b_v = vector(h + "attn.b_v", d, 0);
    attn.w_o = weight(h + "attn.w_o", d, d);
    attn.b_o = vector(h + "attn.b_o", d, 0);
    const Var<T> ln2_g = vector(h + "ln2.g", d, 1), ln2_b = vector(h + "ln2.b", d, 0);
    const Var<T> w1 = weight(h + "mlp.w1", d, 4 * d), b1 = vector(h + "mlp.b1", 4 * d, 0);
    const Var<T> w2 = weight(h + "mlp.w2", 4 * d, d), b2 = vector(h + "mlp.b2", d, 0);

    const Var<T> a = xgrad::layer_norm(x, ln1_g, ln1_b);
    x = x + xgrad::multi_head_attention(a, a, attn, c.heads, m.pad);
    const Var<T> u = xgrad::layer_norm(x, ln2_g, ln2_b);
    const auto mlp = g.scope("mlp");
    x = x + xgrad::linear(xgrad::gelu(xgrad::linear(u, w1, b1)), w2, b2);
  }
  {
    const auto scope = g.scope("head");
    const Var<T> lnf_g = vector("lnf.g", d, 1), lnf_b = vector("lnf.b", d, 0);
    const Var<T> head_w = weight("head.w", d, c.vocab), head_b = vector("head.b", c.vocab, 0);
    m.logits = xgrad::linear(xgrad::layer_norm(x, lnf_g, lnf_b), head_w, head_b);
  }
  const auto scope = g.scope("loss");
  xgrad::CrossEntropyOptions<T> loss;
  loss.ignore_index = ignore_label;
  m.loss = xgrad::cross_entropy(m.logits, m.labels, loss);
  return m;
}

// Feeds a batch: ids and labels (B, T), and each sequence's length (its first lengths[b] tokens
// are real, the rest padding), which becomes the mask leaf's new value. Call replay() then.
template <class T>
void feed(Graph<T>& g, const Model<T>& m, const xt::xarray<std::int64_t>& ids, const xt::xarray<std::int64_t>& labels,
          const std::vector<std::size_t>& lengths) {
  g.set_value(m.ids, ids);
  g.set_value(m.labels, labels);
  g.set_value(m.pad, xgrad::key_padding_mask(lengths, ids.shape()[1]));
}

// AdamW's settings: weight decay on the rank >= 2 tensors only (decay_groups).
inline constexpr double lr = 1e-2, beta1 = 0.9, beta2 = 0.99, adam_eps = 1e-8, weight_decay = 0.01;

template <class T>
xgrad::AdamW<T> optimizer(Graph<T>& g) {
  return xgrad::AdamW<T>(xgrad::decay_groups(g.parameters(), weight_decay), lr, beta1, beta2, adam_eps);
}

}  // namespace mlm_encoder
