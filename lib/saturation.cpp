#include <xgrad/lib/saturation.hpp>

#include <cmath>
#include <cstdio>
#include <sstream>

#include <xtensor/xmath.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/lib/attention.hpp>
#include <xgrad/lib/diagnostics.hpp>
#include <xgrad/lib/grad.hpp>
#include <xgrad/lib/random.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

namespace {

// Running sums of one side at one d_k.
struct Accumulator {
  double score_sum = 0, score_sq = 0;
  std::size_t scores = 0, rows = 0, gain_rows = 0, trials = 0;
  double max_weight = 0, entropy = 0, saturated = 0, jacobian = 0, gain = 0, grad_q = 0;

  void add(const xt::xarray<double>& score_values, const SoftmaxDiagnostics& d, const xt::xarray<double>& grad_q_value) {
    for (double s : score_values) {
      score_sum += s;
      score_sq += s * s;
    }
    scores += score_values.size();
    for (const SoftmaxRow& r : d.rows) {
      max_weight += r.max_weight;
      entropy += r.normalized_entropy;
      saturated += r.saturated ? 1 : 0;
      jacobian += r.jacobian_norm;
      if (r.gradient_gain) {  // every row has one, but for a grad_out row of exact zeros
        gain += *r.gradient_gain;
        ++gain_rows;
      }
    }
    rows += d.rows.size();
    grad_q += std::sqrt(xt::sum(grad_q_value * grad_q_value)());
    ++trials;
  }

  SweepSide result() const {
    SweepSide s;
    const double n = static_cast<double>(scores), r = static_cast<double>(rows);
    const double mean = score_sum / n;
    s.score_variance = score_sq / n - mean * mean;
    s.max_weight = max_weight / r;
    s.entropy = entropy / r;
    s.saturated_fraction = saturated / r;
    s.jacobian_norm = jacobian / r;
    s.gradient_gain = gain / static_cast<double>(gain_rows);
    s.grad_q_norm = grad_q / static_cast<double>(trials);
    return s;
  }
};

const SoftmaxDiagnostics& diagnostics_of(const std::vector<SoftmaxDiagnostics>& all, std::size_t node) {
  for (const auto& d : all) {
    if (d.node == node) return d;
  }
  throw error("saturation_sweep: no diagnostics for softmax node " + std::to_string(node));
}

// The side's quantities with their JSON keys, one list for every output format.
const std::vector<std::pair<const char*, double SweepSide::*>>& quantities() {
  static const std::vector<std::pair<const char*, double SweepSide::*>> q = {
      {"score_variance", &SweepSide::score_variance}, {"max_weight", &SweepSide::max_weight},
      {"entropy", &SweepSide::entropy},               {"saturated_fraction", &SweepSide::saturated_fraction},
      {"jacobian_norm", &SweepSide::jacobian_norm},   {"gradient_gain", &SweepSide::gradient_gain},
      {"grad_q_norm", &SweepSide::grad_q_norm}};
  return q;
}

std::string fixed(double x, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, x);
  return buf;
}

}  // namespace

std::vector<SweepRow> saturation_sweep(const SweepOptions& o) {
  if (o.d_k.empty()) throw error("saturation_sweep: no d_k to sweep");
  for (std::size_t d : o.d_k) {
    if (d == 0) throw error("saturation_sweep: d_k = 0, the scale 1/sqrt(d_k) is undefined");
  }
  if (o.t_q == 0 || o.t_k == 0 || o.trials == 0) {
    throw error("saturation_sweep: T_q, T_k and trials must be positive (T_q = " + std::to_string(o.t_q) +
                ", T_k = " + std::to_string(o.t_k) + ", trials = " + std::to_string(o.trials) + ")");
  }
  if (!(o.threshold > 0 && o.threshold <= 1)) {
    throw error("saturation_sweep: the threshold must be in (0, 1], got " + number_str(o.threshold));
  }
  // Every array of a trial within max_array_elements, before the first is drawn.
  const auto check = [](const char* name, const Shape& shape) {
    detail::check_elements(shape, std::string("saturation_sweep: ") + name + " " + shape_str(shape));
  };
  check("the scores (T_q, T_k)", {o.t_q, o.t_k});
  check("grad_out (T_q, d_v)", {o.t_q, o.d_v});
  check("v (T_k, d_v)", {o.t_k, o.d_v});
  for (std::size_t d : o.d_k) {
    check("q (T_q, d_k)", {o.t_q, d});
    check("k (T_k, d_k)", {o.t_k, d});
  }
  NormalStream normal(o.seed);
  const auto draw = [&](std::size_t rows, std::size_t cols) { return normal.array<double>({rows, cols}); };
  std::vector<SweepRow> out;
  const std::size_t total = o.d_k.size() * o.trials;
  for (std::size_t d_k : o.d_k) {
    Accumulator scaled, unscaled;
    for (std::size_t t = 0; t < o.trials; ++t) {
      Graph<double> g;
      const auto q = g.input("q", draw(o.t_q, d_k));
      const auto k = g.input("k", draw(o.t_k, d_k));
      const auto v = g.input("v", draw(o.t_k, o.d_v));
      const xt::xarray<double> grad_out = draw(o.t_q, o.d_v);
      const AttentionNodes<double> s = attention_nodes(q, k, v);
      const AttentionNodes<double> u = attention_nodes(q, k, v, 1.0);
      const Var<double> gq_s = grad(s.output, {q}, grad_out)[0];
      const Var<double> gq_u = grad(u.output, {q}, grad_out)[0];
      const auto diagnostics = softmax_diagnostics(g, o.threshold);
      scaled.add(s.scores.value(), diagnostics_of(diagnostics, s.weights.id()), gq_s.value());
      unscaled.add(u.scores.value(), diagnostics_of(diagnostics, u.weights.id()), gq_u.value());
      if (o.progress) o.progress(out.size() * o.trials + t + 1, total);
    }
    out.push_back({d_k, scaled.result(), unscaled.result()});
  }
  return out;
}

Json sweep_to_json(const std::vector<SweepRow>& rows) {
  Json list = Json::array();
  for (const auto& r : rows) {
    Json row{{"d_k", r.d_k}};
    for (const auto& [side, values] : {std::pair{"scaled", &r.scaled}, std::pair{"unscaled", &r.unscaled}}) {
      Json j = Json::object();
      for (const auto& [name, field] : quantities()) j[name] = encode_number(values->*field);
      row[side] = std::move(j);
    }
    list.push_back(std::move(row));
  }
  return Json{{"rows", std::move(list)}};
}

std::string sweep_to_csv(const std::vector<SweepRow>& rows) {
  std::string out = "d_k";
  for (const char* side : {"scaled", "unscaled"}) {
    for (const auto& q : quantities()) out += std::string(",") + side + "_" + q.first;
  }
  out += "\n";
  for (const auto& r : rows) {
    out += std::to_string(r.d_k);
    for (const SweepSide* side : {&r.scaled, &r.unscaled}) {
      for (const auto& q : quantities()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, ",%.17g", side->*(q.second));
        out += buf;
      }
    }
    out += "\n";
  }
  return out;
}

std::string sweep_to_table(const std::vector<SweepRow>& rows) {
  std::ostringstream out;
  out << "                    score variance   max weight      norm. entropy   saturated       |J|_F           "
         "gain            ||grad_q||\n"
         "   d_k              scaled unscaled  scaled unscaled scaled unscaled scaled unscaled scaled unscaled "
         "scaled unscaled scaled unscaled\n";
  for (const auto& r : rows) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "%6zu            %8.3f %8.1f  %6.3f %6.3f   %6.3f %6.3f   %6.3f %6.3f   %6.3f %6.3f   %6.3f %6.3f   "
                  "%6.2f %6.2f\n",
                  r.d_k, r.scaled.score_variance, r.unscaled.score_variance, r.scaled.max_weight,
                  r.unscaled.max_weight, r.scaled.entropy, r.unscaled.entropy, r.scaled.saturated_fraction,
                  r.unscaled.saturated_fraction, r.scaled.jacobian_norm, r.unscaled.jacobian_norm,
                  r.scaled.gradient_gain, r.unscaled.gradient_gain, r.scaled.grad_q_norm, r.unscaled.grad_q_norm);
    out << line;
  }
  return out.str();
}

std::string sweep_to_svg(const std::vector<SweepRow>& rows) {
  // Two panels side by side, d_k on a log axis in each: the mean max weight on [0, 1], the mean
  // gradient gain on [0, its largest value]; scaled in blue, unscaled in red.
  const double width = 900, height = 470, top = 70, bottom = 380, panel = 330;
  double lo = std::log2(static_cast<double>(rows.empty() ? 1 : rows.front().d_k)), hi = lo, max_gain = 0;
  for (const auto& r : rows) {
    lo = std::min(lo, std::log2(static_cast<double>(r.d_k)));
    hi = std::max(hi, std::log2(static_cast<double>(r.d_k)));
    max_gain = std::max({max_gain, r.scaled.gradient_gain, r.unscaled.gradient_gain});
  }
  const double gain_top = max_gain > 0 ? std::ceil(max_gain * 1.1 * 20) / 20 : 1.0;  // a multiple of 0.05
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height << "\" viewBox=\"0 0 "
    << width << " " << height << "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"13\">\n"
    << "<title>Softmax saturation against the key width d_k</title>\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << width / 2 << "\" y=\"28\" text-anchor=\"middle\" font-size=\"17\">"
    << "Softmax saturation against the key width d_k: scaled 1/sqrt(d_k) vs unscaled</text>\n";
  struct Side {
    const char* id;
    const char* label;
    const char* colour;
    bool scaled;
  };
  const Side sides[] = {{"scaled", "scaled by 1/sqrt(d_k)", "#1f77b4", true}, {"unscaled", "unscaled (scale 1)", "#d62728", false}};
  const auto draw_panel = [&](double left, const char* id, const char* title, double SweepSide::*field, double y_top) {
    const double right = left + panel;
    const auto x_of = [&](std::size_t d_k) {
      return hi > lo ? left + (std::log2(static_cast<double>(d_k)) - lo) / (hi - lo) * (right - left) : (left + right) / 2;
    };
    const auto y_of = [&](double v) { return bottom - std::clamp(v / y_top, 0.0, 1.0) * (bottom - top); };
    s << "<g id=\"" << id << "\">\n<text x=\"" << (left + right) / 2 << "\" y=\"" << top - 12
      << "\" text-anchor=\"middle\" font-size=\"14\">" << title << "</text>\n";
    for (int i = 0; i <= 5; ++i) {  // y grid and ticks
      const double v = y_top * i / 5.0, y = y_of(v);
      s << "<line x1=\"" << left << "\" y1=\"" << y << "\" x2=\"" << right << "\" y2=\"" << y
        << "\" stroke=\"#dddddd\"/>\n<text x=\"" << left - 8 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << fixed(v, y_top < 0.5 ? 2 : 1) << "</text>\n";
    }
    for (const auto& r : rows) {  // x ticks at each d_k
      const double x = x_of(r.d_k);
      s << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\"" << bottom
        << "\" stroke=\"#eeeeee\"/>\n<text x=\"" << x << "\" y=\"" << bottom + 18 << "\" text-anchor=\"middle\">"
        << r.d_k << "</text>\n";
    }
    s << "<rect x=\"" << left << "\" y=\"" << top << "\" width=\"" << panel << "\" height=\"" << bottom - top
      << "\" fill=\"none\" stroke=\"#333333\"/>\n<text x=\"" << (left + right) / 2 << "\" y=\"" << bottom + 42
      << "\" text-anchor=\"middle\">d_k, key width (log scale)</text>\n";
    for (const Side& side : sides) {
      s << "<g id=\"" << id << "_" << side.id << "\" class=\"series\">\n<polyline fill=\"none\" stroke=\"" << side.colour
        << "\" stroke-width=\"2\" points=\"";
      for (const auto& r : rows) s << x_of(r.d_k) << "," << y_of((side.scaled ? r.scaled : r.unscaled).*field) << " ";
      s << "\"/>\n";
      for (const auto& r : rows) {
        s << "<circle cx=\"" << x_of(r.d_k) << "\" cy=\"" << y_of((side.scaled ? r.scaled : r.unscaled).*field)
          << "\" r=\"3.5\" fill=\"" << side.colour << "\"/>\n";
      }
      s << "</g>\n";
    }
    s << "</g>\n";
  };
  draw_panel(90, "max_weight", "mean max weight of a softmax row", &SweepSide::max_weight, 1.0);
  draw_panel(530, "gradient_gain", "mean gradient gain of a softmax row", &SweepSide::gradient_gain, gain_top);
  s << "<text x=\"30\" y=\"" << (top + bottom) / 2 << "\" text-anchor=\"middle\" transform=\"rotate(-90 30 "
    << (top + bottom) / 2 << ")\">mean over softmax rows</text>\n";
  for (std::size_t i = 0; i < 2; ++i) {  // the legend, under the panels
    const double x = 300 + 200.0 * static_cast<double>(i), y = height - 20;
    s << "<line x1=\"" << x << "\" y1=\"" << y << "\" x2=\"" << x + 30 << "\" y2=\"" << y << "\" stroke=\""
      << sides[i].colour << "\" stroke-width=\"2\"/>\n<circle cx=\"" << x + 15 << "\" cy=\"" << y << "\" r=\"3.5\" fill=\""
      << sides[i].colour << "\"/>\n<text x=\"" << x + 38 << "\" y=\"" << y + 4 << "\">" << sides[i].label << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

}  // namespace xgrad
