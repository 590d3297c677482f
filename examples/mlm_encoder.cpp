// examples/mlm_encoder: a 2-layer BERT-style encoder learns to fill in masked tokens of
// variable-length sequences. Each sequence counts up from a random start by a random step
// (3, 5, 7, ... or 3, 4, 5, ...) modulo the ten token values, so a masked token follows from
// its neighbours. Every batch has other lengths: the padding mask is a mask leaf, fed with
// set_value beside the ids and labels, and the loss is the cross-entropy of the masked tokens
// only (ignore_index). AdamW with two parameter groups (weight decay on the matrices only).
//
//   mlm_encoder [--steps N] [--seed S] [--export GRAPH.json]   (defaults: 2000 steps, seed 1; about 2 s)
//
// Prints the loss every 250 steps and, at the end, the accuracy on the masked tokens of 8 new
// batches. --export writes the trained graph, forward and backward, its nodes in named scopes
// (embed, l0, l0.attn, l0.mlp, ..., head, loss), with every value, on the last of those batches:
// for `xgrad inspect` and `xgrad export --graph GRAPH.json --format dot` (docs/saturation.md).
// Exit 2 on bad usage or a file that cannot be written.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "mlm_encoder.hpp"

namespace {

struct Batch {
  xt::xarray<std::int64_t> ids, labels;
  std::vector<std::size_t> lengths;
};

// B sequences of lengths 3 .. T; about a quarter of each one's tokens masked, at least one.
Batch make_batch(std::mt19937_64& rng, const mlm_encoder::Config& c, std::size_t batch) {
  Batch b{xt::zeros<std::int64_t>({batch, c.block}), xt::zeros<std::int64_t>({batch, c.block}), {}};
  b.labels.fill(mlm_encoder::ignore_label);
  const std::int64_t values = static_cast<std::int64_t>(c.vocab) - 2;  // tokens 2 .. vocab - 1
  for (std::size_t s = 0; s < batch; ++s) {
    const std::size_t length = 3 + rng() % (c.block - 2);
    const std::int64_t start = static_cast<std::int64_t>(rng() % values), step = 1 + static_cast<std::int64_t>(rng() % 2);
    const std::size_t forced = rng() % length;
    for (std::size_t t = 0; t < length; ++t) {
      const std::int64_t token = 2 + (start + step * static_cast<std::int64_t>(t)) % values;
      const bool masked = t == forced || rng() % 4 == 0;
      b.ids(s, t) = masked ? mlm_encoder::mask_id : token;
      if (masked) b.labels(s, t) = token;
    }
    b.lengths.push_back(length);
  }
  return b;
}

long parse_count(const char* flag, const char* text) {
  char* end = nullptr;
  const long n = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || n < 0 || n > 1000000) {
    std::fprintf(stderr, "mlm_encoder: %s takes an integer from 0 to 1000000, got '%s'\n", flag, text);
    std::exit(2);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  long steps = 2000, seed = 1;
  std::string export_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--steps" || arg == "--seed") && i + 1 < argc) {
      (arg == "--steps" ? steps : seed) = parse_count(argv[i], argv[i + 1]);
      ++i;
    } else if (arg == "--export" && i + 1 < argc && argv[i + 1][0] != '\0') {
      export_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: mlm_encoder [--steps N] [--seed S] [--export GRAPH.json]\n");
      return 2;
    }
  }
  if (!export_path.empty()) {
    try {
      xgrad::check_output_path(export_path, {});
    } catch (const xgrad::error& e) {
      std::fprintf(stderr, "mlm_encoder: --export: %s\n", e.what());
      return 2;
    }
  }
  const mlm_encoder::Config c;
  const std::size_t batch = 16;
  xgrad::Graph<float> g;
  const auto model = mlm_encoder::build_model(g, c, batch, static_cast<std::uint64_t>(seed));
  auto opt = mlm_encoder::optimizer(g);
  const auto grads = xgrad::grad(model.loss, opt.params());
  std::mt19937_64 rng(static_cast<std::uint64_t>(seed));
  for (long step = 0; step < steps; ++step) {
    const Batch b = make_batch(rng, c, batch);
    mlm_encoder::feed(g, model, b.ids, b.labels, b.lengths);  // the mask leaf too
    g.replay();
    if (step % 250 == 0 || step + 1 == steps) std::printf("step %4ld  loss %.4f\n", step, model.loss.value()());
    opt.step(grads);
  }
  std::size_t right = 0, total = 0;
  for (int k = 0; k < 8; ++k) {
    const Batch b = make_batch(rng, c, batch);
    mlm_encoder::feed(g, model, b.ids, b.labels, b.lengths);
    g.replay();
    const auto& logits = model.logits.value();  // (B, T, vocab)
    for (std::size_t s = 0; s < batch; ++s) {
      for (std::size_t t = 0; t < c.block; ++t) {
        if (b.labels(s, t) == mlm_encoder::ignore_label) continue;
        std::size_t best = 0;
        for (std::size_t v = 1; v < c.vocab; ++v) best = logits(s, t, v) > logits(s, t, best) ? v : best;
        right += static_cast<std::int64_t>(best) == b.labels(s, t);
        ++total;
      }
    }
  }
  std::printf("masked-token accuracy on 8 new batches: %.1f%% (%zu of %zu; chance %.0f%%)\n",
              100.0 * static_cast<double>(right) / static_cast<double>(total), right, total, 100.0 / (c.vocab - 2));
  if (!export_path.empty()) {
    g.set_output("loss", model.loss);
    const auto params = opt.params();
    for (std::size_t i = 0; i < params.size(); ++i) g.set_grad(params[i].node().name, grads[i]);
    try {
      xgrad::save_json(export_path, g, xgrad::ExportValues::all);
    } catch (const xgrad::error& e) {
      std::fprintf(stderr, "mlm_encoder: --export: %s\n", e.what());
      return 2;
    }
    std::printf("wrote %s (%zu nodes)\n", export_path.c_str(), g.size());
  }
  return 0;
}
