// The scale sweep: scaled (1/sqrt(d_k)) and unscaled (scale 1) attention side by side, over key
// widths d_k, on random inputs. It shows the spec's variance argument and what saturation does
// to gradients.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <xgrad/graph/op.hpp>

namespace xgrad {

struct SweepOptions {
  std::vector<std::size_t> d_k = {1, 4, 16, 64, 256, 1024};
  std::size_t t_q = 16, t_k = 16, d_v = 16;
  std::size_t trials = 20;
  std::uint64_t seed = 0;
  double threshold = 0.99;  // the saturation threshold of the max weight
  // Called after each (d_k, trial) with the number done and the total; may be empty.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// One side (scaled or unscaled) at one d_k, over all trials; means are over rows of all trials.
struct SweepSide {
  double score_variance = 0;      // the empirical variance of all scores (scale * q k^T entries)
  double max_weight = 0;          // mean max weight of a row
  double entropy = 0;             // mean normalized entropy H / log T_k of a row
  double saturated_fraction = 0;  // of the rows, max weight >= threshold
  double jacobian_norm = 0;       // mean ||diag(p) - p p^T||_F of a row
  double gradient_gain = 0;       // mean ||grad w.r.t. scores|| / ||grad w.r.t. weights|| of a row
  double grad_q_norm = 0;         // mean ||grad_q||_F of a trial
};

struct SweepRow {
  std::size_t d_k = 0;
  SweepSide scaled, unscaled;
};

// For each d_k and trial: q (T_q, d_k), k (T_k, d_k), v (T_k, d_v) and grad_out (T_q, d_v) with
// independent standard normal entries (std::mt19937_64 from `seed`: deterministic), attention
// in float64 with scale 1/sqrt(d_k) and with scale 1 on the same draws, gradients w.r.t. q with
// that grad_out, and the softmax diagnostics of both. Throws xgrad::error for an empty d_k list,
// a d_k, T_q, T_k or trials of 0, a threshold outside (0, 1], or, before drawing anything, an
// array of a trial (the scores (T_q, T_k), q, k, v, grad_out) of more than max_array_elements =
// 2^28 elements.
std::vector<SweepRow> saturation_sweep(const SweepOptions& options);

// {"rows": [{"d_k": 16, "scaled": {...}, "unscaled": {...}}, ...]}, each side with the keys
// score_variance, max_weight, entropy, saturated_fraction, jacobian_norm, gradient_gain, grad_q_norm.
Json sweep_to_json(const std::vector<SweepRow>& rows);
// A header line and one line per d_k: d_k, then each quantity as scaled_... and unscaled_....
std::string sweep_to_csv(const std::vector<SweepRow>& rows);
// A table for people, scaled and unscaled side by side.
std::string sweep_to_table(const std::vector<SweepRow>& rows);
// A self-contained SVG of two panels, x = d_k on a log axis in both: the mean max weight and the
// mean gradient gain, each with a scaled (blue) and an unscaled (red) line; axes labelled; a
// legend. Groups have ids max_weight_scaled, max_weight_unscaled, gradient_gain_scaled and
// gradient_gain_unscaled.
std::string sweep_to_svg(const std::vector<SweepRow>& rows);

}  // namespace xgrad
