// The model of examples/char_gpt.cpp: a GPT in the nanoGPT / GPT-2 shape, built with xgrad's
// public API only. A header of its own so that tests/examples/char_gpt_test.cpp checks the very
// model the program trains against PyTorch (bench/char_gpt_torch.py, docs/char-gpt.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <xgrad/xgrad.hpp>

namespace char_gpt {

using xgrad::Graph;
using xgrad::Var;

struct Config {
  std::size_t layers = 4, heads = 4, d_model = 128, block = 64, vocab = 0;
  double dropout = 0;
  // The attention variants of docs/attention-variants.md; the defaults are GPT-2's block, whose
  // runs they leave as they were, bit for bit.
  bool rope = false;             // rotary embeddings of q and k (and no learned position embedding)
  std::size_t kv_heads = 0;      // key/value heads shared by groups of query heads (GQA); 0: heads
  std::string norm = "layer";    // the blocks' and the final norm: "layer" (gain and bias) or "rms" (gain)
  bool qk_norm = false;          // RMS norm of q and k per head (a gain each), before RoPE
  double softcap = 0;            // > 0: the scores become softcap tanh(s / softcap)
  std::size_t window = 0;        // > 0: each query attends to its last `window` positions only
  std::string attn = "softmax";  // the attention weights: "softmax" or "sigmoid"
  std::size_t kv() const { return kv_heads ? kv_heads : heads; }
  bool variant() const { return rope || kv() != heads || qk_norm || softcap > 0 || window > 0 || attn != "softmax"; }
};

// nanoGPT's schedule: the learning rate of update `it` (0 for the first), rising linearly over
// `warmup` updates to lr, then a cosine from lr down to lr / 10 at update decay_steps, and
// lr / 10 after it.
struct Schedule {
  double lr = 1e-3;
  std::size_t warmup = 100, decay_steps = 2000;
};

inline double learning_rate(const Schedule& s, std::size_t it) {
  const double min_lr = s.lr / 10;
  if (it < s.warmup) return s.lr * static_cast<double>(it + 1) / static_cast<double>(s.warmup + 1);
  if (it >= s.decay_steps) return min_lr;
  const double ratio = static_cast<double>(it - s.warmup) / static_cast<double>(s.decay_steps - s.warmup);
  return min_lr + 0.5 * (1 + std::cos(std::acos(-1.0) * ratio)) * (s.lr - min_lr);
}

// What the program reads and feeds: the token ids (B, T) and one-hot targets (B, T, vocab) in,
// the logits (B, T, vocab) and the mean cross-entropy out. The parameters are split as AdamW
// decays them (nanoGPT's groups): the 2-D weights of products and embeddings, and the rest
// (biases, layer-norm gains and offsets).
template <class T>
struct Model {
  Var<T> ids, targets, logits, loss;
  std::vector<Var<T>> decayed, not_decayed;
  std::vector<Var<T>> attention_weights;  // each layer's attention weights (B, H, T, T): its softmax
  std::vector<Var<T>> attention_logits;   // with sigmoid weights, what each layer's sigmoid reads
};

// Builds the model for batches of `batch` windows in g. Initial values as GPT-2's: weights of
// products and embeddings N(0, 0.02^2), the two projections into the residual stream (attn.w_o,
// mlp.w2) N(0, 0.02^2 / (2 layers)), biases 0, layer norms (1, 0); each tensor drawn from its own
// seed, seed + its index. Dropout (when c.dropout > 0) after the embeddings and on both branches
// into the residual stream, each node with its own mask seed. With an attention variant of
// Config the attention is variant_multi_head_attention (lib/variant_attention.hpp) over a
// constant mask (causal, or the sliding window); --norm rms makes every norm rms_norm, with a
// gain and no bias; w_k, w_v and their biases are (d, d kv / heads).
template <class T>
Model<T> build_model(Graph<T>& g, const Config& c, std::size_t batch, std::uint64_t seed) {
  Model<T> m;
  std::uint64_t next_seed = seed;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.layers));
  const auto weight = [&](const std::string& name, std::size_t rows, std::size_t cols, double stddev = 0.02) {
    m.decayed.push_back(g.parameter(name, xgrad::random_array<T>({rows, cols}, next_seed++, stddev)));
    return m.decayed.back();
  };
  const auto vector = [&](const std::string& name, std::size_t n, T value) {
    ++next_seed;
    m.not_decayed.push_back(g.parameter(name, xt::xarray<T>(xt::zeros<T>({n}) + value)));
    return m.not_decayed.back();
  };
  const std::size_t d = c.d_model;
  std::uint64_t drop_seed = seed + 1'000'003;
  const auto drop = [&](const Var<T>& x) { return c.dropout > 0 ? xgrad::dropout(x, c.dropout, drop_seed++) : x; };

  m.ids = g.indices("ids", xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({batch, c.block})));
  m.targets = g.input("targets", xt::zeros<T>({batch, c.block, c.vocab}));
  // Named scopes (Graph::scope) for pictures and inspection: embed, h0 (h0.attn, h0.mlp), ..., head, loss.
  Var<T> x;
  {
    const auto scope = g.scope("embed");
    const Var<T> wte = weight("wte", c.vocab, d);
    // With RoPE the positions enter through the rotations of q and k only.
    x = drop(c.rope ? xgrad::embedding(wte, m.ids) : xgrad::embedding(wte, m.ids) + weight("wpe", c.block, d));
  }
  const auto mask = c.window ? xgrad::sliding_window_mask(c.block, c.block, c.window) : xgrad::causal_mask(c.block, c.block);
  const Var<T> keep = c.variant() ? g.constant("attn.mask", xt::xarray<T>(xt::cast<T>(mask))) : Var<T>();
  // A norm's parameters, made where the default model makes them (their seeds follow), and the
  // norm of x with them.
  struct Norm {
    Var<T> gain, bias;
  };
  const auto norm_params = [&](const std::string& name) {
    Norm n{vector(name + ".g", d, 1), Var<T>()};
    if (c.norm != "rms") n.bias = vector(name + ".b", d, 0);
    return n;
  };
  const auto norm = [&](const Var<T>& v, const Norm& n) {
    return c.norm == "rms" ? xgrad::rms_norm(v, n.gain, 1e-5) : xgrad::layer_norm(v, n.gain, n.bias);
  };
  const std::size_t d_kv = d / c.heads * c.kv();
  for (std::size_t l = 0; l < c.layers; ++l) {
    const std::string h = "h" + std::to_string(l) + ".";
    const auto layer = g.scope("h" + std::to_string(l));  // the attention's nodes: h<l>.attn (its parameters' prefix)
    const Norm ln1 = norm_params(h + "ln1");
    xgrad::VariantAttentionParams<T> attn;
    attn.w_q = weight(h + "attn.w_q", d, d);
    attn.b_q = vector(h + "attn.b_q", d, 0);
    attn.w_k = weight(h + "attn.w_k", d, d_kv);
    attn.b_k = vector(h + "attn.b_k", d_kv, 0);
    attn.w_v = weight(h + "attn.w_v", d, d_kv);
    attn.b_v = vector(h + "attn.b_v", d_kv, 0);
    attn.w_o = weight(h + "attn.w_o", d, d, residual_std);
    attn.b_o = vector(h + "attn.b_o", d, 0);
    if (c.qk_norm) {
      attn.q_gain = vector(h + "attn.q_gain", d / c.heads, 1);
      attn.k_gain = vector(h + "attn.k_gain", d / c.heads, 1);
    }
    const Norm ln2 = norm_params(h + "ln2");
    const Var<T> w1 = weight(h + "mlp.w1", d, 4 * d), b1 = vector(h + "mlp.b1", 4 * d, 0);
    const Var<T> w2 = weight(h + "mlp.w2", 4 * d, d, residual_std), b2 = vector(h + "mlp.b2", d, 0);

    const Var<T> a = norm(x, ln1);
    if (!c.variant()) {
      const std::size_t first_new = g.size();
      x = x + drop(xgrad::multi_head_attention(a, a, attn, c.heads, mask));
      for (std::size_t id = first_new; id < g.size(); ++id) {  // the softmax node of this layer
        const auto& node = g.node(id);
        if (!node.is_leaf() && xgrad::softmax_axis(*node.op)) m.attention_weights.push_back(g.var(id));
      }
    } else {
      xgrad::VariantBlockOptions<T> options;
      options.rope = c.rope;
      options.qk_norm = c.qk_norm ? xgrad::QkNorm::rms : xgrad::QkNorm::none;
      options.attention.softcap = c.softcap;
      options.attention.mask = keep;
      options.attention.weights = c.attn == "sigmoid" ? xgrad::AttentionWeights::sigmoid : xgrad::AttentionWeights::softmax;
      const auto nodes = xgrad::variant_multi_head_attention_nodes(a, attn, c.heads, c.kv(), options);
      m.attention_weights.push_back(nodes.attention.weights);
      m.attention_logits.push_back(nodes.attention.logits);
      x = x + drop(nodes.output);
    }
    const Var<T> u = norm(x, ln2);
    const auto mlp = g.scope("mlp");
    x = x + drop(xgrad::linear(xgrad::gelu(xgrad::linear(u, w1, b1)), w2, b2));
  }
  {
    const auto scope = g.scope("head");
    const Norm lnf = norm_params("lnf");
    m.logits = xgrad::matmul(norm(x, lnf), weight("head.w", d, c.vocab));
  }
  const auto scope = g.scope("loss");
  m.loss = xgrad::cross_entropy(m.logits, m.targets);
  return m;
}

// Every parameter, the decayed ones first: the order of the optimizer states in a checkpoint.
template <class T>
std::vector<Var<T>> parameters(const Model<T>& m) {
  std::vector<Var<T>> all = m.decayed;
  all.insert(all.end(), m.not_decayed.begin(), m.not_decayed.end());
  return all;
}

// Sets the ids (B, T) and the one-hot targets of their successors y (B, T).
template <class T>
void feed(Graph<T>& g, const Model<T>& m, const xt::xarray<std::int64_t>& x, const xt::xarray<std::int64_t>& y) {
  xt::xarray<T> targets = xt::zeros<T>(m.targets.value().shape());
  const std::size_t vocab = targets.shape().back();
  for (std::size_t i = 0; i < y.size(); ++i) targets.data()[i * vocab + static_cast<std::size_t>(y.data()[i])] = 1;
  g.set_value(m.ids, x);
  g.set_value(m.targets, std::move(targets));
}

// AdamW's settings (nanoGPT's Shakespeare recipe) and the gradient clipping norm.
inline constexpr double beta1 = 0.9, beta2 = 0.99, adam_eps = 1e-8, max_grad_norm = 1.0;

// The training step: the gradients of the loss, and AdamW on the two groups of parameters, the
// weights with weight decay and the rest without (as torch.optim.AdamW with two param groups).
template <class T>
class Trainer {
 public:
  Trainer(const Model<T>& m, double weight_decay)
      : decayed(m.decayed, 0.0, beta1, beta2, adam_eps, weight_decay),
        other(m.not_decayed, 0.0, beta1, beta2, adam_eps, 0.0),
        m_model(m),
        m_grads(xgrad::grad(m.loss, parameters(m))) {}

  // One update on the batch fed: replay (the loss and its gradients), clip the gradients' global
  // norm at max_grad_norm, then AdamW at learning rate lr. Returns the loss before the update.
  double step(double lr) {
    m_model.loss.graph().replay();
    const double loss = static_cast<double>(m_model.loss.value()());
    xgrad::clip_grad_norm(m_grads, max_grad_norm);
    const auto split = m_grads.begin() + static_cast<long>(m_model.decayed.size());
    decayed.set_lr(lr);
    other.set_lr(lr);
    decayed.step(std::vector<Var<T>>(m_grads.begin(), split));
    other.step(std::vector<Var<T>>(split, m_grads.end()));
    return loss;
  }

  // The gradients, one per parameter in parameters(m)'s order (what a lean replay keeps).
  const std::vector<Var<T>>& grads() const { return m_grads; }

  xgrad::AdamW<T> decayed, other;  // their states are what a checkpoint saves beside the parameters

 private:
  Model<T> m_model;
  std::vector<Var<T>> m_grads;
};

}  // namespace char_gpt
