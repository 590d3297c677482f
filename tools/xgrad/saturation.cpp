// xgrad saturation: scaled and unscaled attention side by side over d_k, with an SVG plot.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

// The ranges the help states.
constexpr std::uint64_t max_d_k = 65536, max_length = 4096, max_trials = 100000;

const char* const help =
    "usage: xgrad saturation [--dk 1,4,16,64,256,1024] [--tq N] [--tk N] [--dv N] [--trials N] [--seed N]\n"
    "                        [--format table|csv|json] [--plot FILE.svg]\n"
    "\n"
    "For each d_k, draws q (T_q, d_k), k (T_k, d_k), v (T_k, d_v) and grad_out (T_q, d_v) with\n"
    "independent zero-mean unit-variance entries, and runs attention scaled by 1/sqrt(d_k) and\n"
    "unscaled (scale 1) on the same draws, side by side: the empirical score variance (the spec's\n"
    "argument: 1 scaled, d_k unscaled), the mean max weight, the mean normalized entropy, the\n"
    "fraction of saturated rows (max weight >= 0.99), the mean Jacobian norm, the mean gradient\n"
    "gain of the softmax, and the mean ||grad_q||. Deterministic for a given seed.\n"
    "\n"
    "  --dk LIST     key widths, comma-separated, each 1 to 65536 (default 1,4,16,64,256,1024)\n"
    "  --tq N --tk N --dv N   sequence lengths and value width, 1 to 4096 (default 16 each)\n"
    "  --trials N    draws per d_k, 1 to 100000 (default 20)\n"
    "  --seed N      seed of the draws, 0 to 2^64 - 1 (default 0)\n"
    "  --format F    table (default), csv, or json: {\"rows\": [{\"d_k\": 16, \"scaled\": {...},\n"
    "                \"unscaled\": {...}}, ...]}, each side with score_variance, max_weight, entropy,\n"
    "                saturated_fraction, jacobian_norm, gradient_gain, grad_q_norm\n"
    "  --plot FILE   also write a self-contained SVG: x = d_k (log axis), scaled and unscaled lines\n"
    "                for the mean max weight and the mean gradient gain (written as export's -o)\n"
    "\n"
    "Progress goes to stderr when the sweep takes more than a second and stderr is a terminal.\n"
    "exit status: 0 success, 2 bad usage, out of memory or a failed write (one line on stderr)\n";

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--dk", true}, {"--tq", true}, {"--tk", true}, {"--dv", true}, {"--trials", true},
                         {"--seed", true}, {"--format", true}, {"--plot", true}});
  SweepOptions s;
  if (const auto list = o.get("--dk")) {
    const auto d_k = parse_integers("--dk", *list, 1, max_d_k);
    s.d_k.assign(d_k.begin(), d_k.end());
  }
  s.t_q = o.integer("--tq", 1, max_length, s.t_q);
  s.t_k = o.integer("--tk", 1, max_length, s.t_k);
  s.d_v = o.integer("--dv", 1, max_length, s.d_v);
  s.trials = o.integer("--trials", 1, max_trials, s.trials);
  s.seed = o.integer("--seed", 0, UINT64_MAX, s.seed);
  const std::string format = o.choice("--format", {"table", "csv", "json"}, "table");

  // Progress on a terminal once the sweep has run for a second.
  const auto start = std::chrono::steady_clock::now();
  bool shown = false;
  if (isatty(STDERR_FILENO)) {
    s.progress = [&](std::size_t done, std::size_t total) {
      if (!shown && std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
      shown = true;
      std::fprintf(stderr, "\rsaturation: %zu of %zu draws", done, total);
      if (done == total) std::fprintf(stderr, "\n");
    };
  }
  const std::vector<SweepRow> rows = saturation_sweep(s);
  if (const auto plot = o.get("--plot")) {
    const std::string svg = sweep_to_svg(rows);
    write_files_atomically({{*plot, [&](std::ostream& out) { out << svg; }}}, {});
  }
  const std::string text = format == "json" ? sweep_to_json(rows).dump() + "\n"
                           : format == "csv" ? sweep_to_csv(rows)
                                             : sweep_to_table(rows);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

const Command saturation_command = {"saturation", "scaled vs unscaled attention over d_k: saturation and gradients", help, run};

}  // namespace xgrad::tool
