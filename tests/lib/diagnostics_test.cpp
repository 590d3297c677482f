#include "../check.hpp"
#include "../saturating_head.hpp"

#include <cmath>

#include <xtensor/xview.hpp>

namespace {

// Diagnostics of softmax(scores) (rows along the last axis), with a backward pass when asked.
std::vector<SoftmaxDiagnostics> of_scores(const xt::xarray<double>& scores, bool backward, double threshold = 0.99) {
  Graph<double> g;
  const auto x = g.input("scores", scores);
  const auto y = softmax(x);
  if (backward) grad(y, {x}, xt::xarray<double>(random_array<double>(shape_of(scores), 3)));
  return softmax_diagnostics(g, threshold);
}

// A minimal XML well-formedness check: tags nest and close, attributes are quoted, text holds
// no stray '<' or '&' outside entities.
bool well_formed_xml(const std::string& s, std::string& why) {
  std::vector<std::string> open;
  std::size_t i = 0;
  if (s.rfind("<?xml", 0) == 0) i = s.find("?>") + 2;
  while (i < s.size()) {
    if (s[i] != '<') {
      if (s[i] == '&' && s.compare(i, 5, "&amp;") && s.compare(i, 4, "&lt;") && s.compare(i, 4, "&gt;") &&
          s.compare(i, 6, "&quot;")) {
        why = "a raw & at " + std::to_string(i);
        return false;
      }
      ++i;
      continue;
    }
    const std::size_t end = s.find('>', i);
    if (end == std::string::npos) return why = "an unclosed tag", false;
    std::string tag = s.substr(i + 1, end - i - 1);
    i = end + 1;
    if (tag.empty()) return why = "an empty tag", false;
    if (tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) return why = "</" + tag.substr(1) + "> closes nothing open", false;
      open.pop_back();
      continue;
    }
    const bool self_closing = tag.back() == '/';
    if (self_closing) tag.pop_back();
    if (std::count(tag.begin(), tag.end(), '"') % 2) return why = "an unbalanced quote in <" + tag + ">", false;
    const std::string name = tag.substr(0, tag.find_first_of(" \n"));
    if (!self_closing) open.push_back(name);
  }
  if (!open.empty()) return why = "<" + open.back() + "> never closed", false;
  return true;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(diagnostics)

BOOST_AUTO_TEST_CASE(uniform_row) {
  const auto d = of_scores(xt::xarray<double>{{0.0, 0.0, 0.0, 0.0}}, false);
  BOOST_TEST_REQUIRE(d.size() == 1u);
  const SoftmaxRow& r = d[0].rows.at(0);
  BOOST_TEST(r.max_weight == 0.25, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(r.entropy == std::log(4.0), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(r.normalized_entropy == 1.0, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(r.effective_support == 4.0, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(r.jacobian_norm == std::sqrt(3.0) / 4, boost::test_tools::tolerance(1e-15));  // sqrt(n - 1) / n
  BOOST_TEST(!r.saturated);
  BOOST_TEST(!r.gradient_gain.has_value());  // no backward pass
}

BOOST_AUTO_TEST_CASE(one_hot_row) {
  // exp(-1000) underflows: the row is exactly [1, 0, 0].
  const auto d = of_scores(xt::xarray<double>{{0.0, -1000.0, -1000.0}}, true);
  const SoftmaxRow& r = d[0].rows.at(0);
  BOOST_TEST(r.max_weight == 1.0);
  BOOST_TEST(r.entropy == 0.0);
  BOOST_TEST(r.normalized_entropy == 0.0);
  BOOST_TEST(r.effective_support == 1.0);
  BOOST_TEST(r.jacobian_norm == 0.0);
  BOOST_TEST(r.saturated);
  BOOST_TEST(*r.gradient_gain == 0.0);  // nothing passes a one-hot softmax
}

BOOST_AUTO_TEST_CASE(spec_row) {
  // The spec: scores [0.5, 0, 0, 0] give the first key about 35.5% of the weight.
  const auto d = of_scores(xt::xarray<double>{{0.5, 0.0, 0.0, 0.0}}, false);
  const SoftmaxRow& r = d[0].rows.at(0);
  BOOST_TEST(r.max_weight == std::exp(0.5) / (std::exp(0.5) + 3), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::abs(r.max_weight - 0.3547) < 1e-4);  // 0.354661...
  // The closed-form Jacobian norm against the n x n matrix diag(p) - p p^T.
  const double p[] = {std::exp(0.5) / (std::exp(0.5) + 3), 1 / (std::exp(0.5) + 3), 1 / (std::exp(0.5) + 3), 1 / (std::exp(0.5) + 3)};
  double f2 = 0;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) f2 += std::pow((i == j ? p[i] : 0.0) - p[i] * p[j], 2);
  }
  BOOST_TEST(r.jacobian_norm == std::sqrt(f2), boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(rows_of_one_element) {
  const auto d = of_scores(matrix<double>({{3.0}, {-2.0}}), true);
  BOOST_TEST(d[0].n == 1u);
  for (const auto& r : d[0].rows) {
    BOOST_TEST(r.max_weight == 1.0);
    BOOST_TEST(r.entropy == 0.0);
    BOOST_TEST(r.normalized_entropy == 0.0);
    BOOST_TEST(r.jacobian_norm == 0.0);
    BOOST_TEST(*r.gradient_gain == 0.0);
  }
}

BOOST_AUTO_TEST_CASE(gain_is_the_ratio_of_the_gradient_norms) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 5}, 1, 2.0));
  const auto y = softmax(x);
  const xt::xarray<double> grad_out = random_array<double>({3, 5}, 2);
  const auto gx = grad(y, {x}, grad_out)[0];
  const auto d = softmax_diagnostics(g);
  BOOST_TEST_REQUIRE(d.size() == 1u);
  BOOST_TEST(*d[0].vjp_node == gx.id());
  for (std::size_t i = 0; i < 3; ++i) {
    double in = 0, out = 0;
    for (std::size_t j = 0; j < 5; ++j) {
      in += gx.value()(i, j) * gx.value()(i, j);
      out += grad_out(i, j) * grad_out(i, j);
    }
    BOOST_TEST(*d[0].rows[i].gradient_gain == std::sqrt(in / out), boost::test_tools::tolerance(1e-14));
  }
}

BOOST_AUTO_TEST_CASE(rows_follow_the_axis_and_summaries_the_rows) {
  Graph<double> g;
  xt::xarray<double> s = {{{0.0, -1000.0}, {0.0, 0.0}}, {{5.0, 1.0}, {-1000.0, 0.0}}};  // (2, 2, 2)
  const auto x = g.input("x", s);
  softmax(x, 1);  // rows along axis 1: for each (i, k), the pair s[i, 0, k], s[i, 1, k]
  const auto d = softmax_diagnostics(g)[0];
  BOOST_TEST(d.axis == 1u);
  BOOST_TEST(d.rows.size() == 4u);
  // Row (0, k=1) is [-1000, 0]: saturated; row (1, k=0) is [5, -1000]: saturated; row (0, k=0)
  // is [0, 0] and row (1, k=1) is [1, 0], weights 0.5 and e / (e + 1) = 0.73: not saturated.
  BOOST_TEST(d.rows[1].saturated);
  BOOST_TEST(d.rows[2].saturated);
  BOOST_TEST(!d.rows[0].saturated);
  BOOST_TEST(!d.rows[3].saturated);
  BOOST_TEST(d.saturated_fraction == 0.5);
  BOOST_TEST(d.max_weight.max == 1.0);
  BOOST_TEST(d.max_weight.min == 0.5, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(d.max_weight.mean == (2.5 + std::exp(1.0) / (std::exp(1.0) + 1)) / 4, boost::test_tools::tolerance(1e-15));
  // A lower threshold counts more rows.
  BOOST_TEST(softmax_diagnostics(g, 0.7)[0].saturated_fraction == 0.75);
}

BOOST_AUTO_TEST_CASE(summaries_alone_match_the_per_row_pass) {
  // per_row false keeps no row, and its summaries are those of the rows, float32 and float64.
  Graph<float> g;
  const auto x = g.input("x", random_array<float>({4, 3, 7}, 3, 3.0f));
  const auto y = softmax(x, 1);
  grad(y, {x}, random_array<float>({4, 3, 7}, 4));
  const auto all = softmax_diagnostics(g, 0.5), summaries = softmax_diagnostics(g, 0.5, false);
  BOOST_TEST_REQUIRE(summaries.size() == 1u);
  const auto &a = all[0], &s = summaries[0];
  BOOST_TEST(s.rows.empty());
  BOOST_TEST(s.row_count == 28u);
  BOOST_TEST(a.row_count == a.rows.size());
  BOOST_TEST((s.vjp_node == a.vjp_node));
  BOOST_TEST(s.saturated_fraction == a.saturated_fraction);
  for (const auto& [p, q] : {std::pair{&s.max_weight, &a.max_weight}, {&s.entropy, &a.entropy},
                             {&s.jacobian_norm, &a.jacobian_norm}, {&*s.gradient_gain, &*a.gradient_gain}}) {
    BOOST_TEST(p->min == q->min);
    BOOST_TEST(p->mean == q->mean);
    BOOST_TEST(p->max == q->max);
  }
  // The float32 row statistics are those of the same weights in float64.
  const xt::xarray<double> p64 = xt::cast<double>(y.value());
  const SoftmaxRow r32 = softmax_row_stats(y.value().data() + 1, 3, 7, 0.5), r64 = softmax_row_stats(p64.data() + 1, 3, 7, 0.5);
  BOOST_TEST(r32.entropy == r64.entropy);
  BOOST_TEST(a.rows[1].entropy == r64.entropy);
}

BOOST_AUTO_TEST_CASE(per_row_statistics_are_bounded) {
  // Regression (issue 15): a 498-byte graph, broadcast_to (2^26, 1) then softmax, made inspect
  // hold 64 bytes per row beside the values (5.2 GB). Rows are kept up to max_diagnostic_rows
  // in all; past it per_row is refused before any is kept, and the summaries still come.
  Graph<double> g;
  const auto x = g.input("x", {{1.0}});
  softmax(broadcast_to(x, {max_diagnostic_rows + 1, 1}));
  check_error([&] { softmax_diagnostics(g); },
              {"softmax_diagnostics: the softmax nodes have 4194305 rows in all, more than the 4194304 whose per-row "
               "statistics are kept; ask for the summaries alone (per_row false)"});
  BOOST_TEST(softmax_row_count(g) == max_diagnostic_rows + 1);
  const auto d = softmax_diagnostics(g, 0.99, false);
  BOOST_TEST(d[0].row_count == max_diagnostic_rows + 1);
  BOOST_TEST(d[0].saturated_fraction == 1.0);
  // The export then carries the summaries without per-row arrays.
  const Json j = to_json(g, ExportValues::inputs);
  BOOST_TEST(j["diagnostics"][0]["rows"] == max_diagnostic_rows + 1);
  BOOST_TEST(!j["diagnostics"][0].contains("per_row"));
}

BOOST_AUTO_TEST_CASE(diagnostics_are_in_the_json_export_with_values) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({3, 4}, 4, 3.0));
  const auto k = g.input("k", random_array<double>({5, 4}, 5, 3.0));
  const auto v = g.input("v", random_array<double>({5, 2}, 6));
  const auto a = attention_nodes(q, k, v);
  grad(a.output, {q, k, v});
  const Json j = to_json(g, ExportValues::all);
  BOOST_TEST_REQUIRE(j.contains("diagnostics"));
  const Json& d = j["diagnostics"][0];
  BOOST_TEST(d["node"] == a.weights.id());
  BOOST_TEST(d["per_row"]["max_weight"].size() == 3u);
  BOOST_TEST(d["gradient_gain"]["mean"].is_number());
  BOOST_TEST(!to_json(g, ExportValues::none).contains("diagnostics"));
  // Recomputed on export, they survive the round trip to the same text.
  const std::string text = j.dump();
  BOOST_TEST(to_json(*graph_from_json<double>(text), ExportValues::all).dump() == text);
}

BOOST_AUTO_TEST_CASE(dot_shades_softmax_nodes_by_saturation) {
  Graph<double> g;
  softmax(g.input("x", xt::xarray<double>{{0.0, -1000.0}, {0.0, -1000.0}}));  // all rows saturated
  softmax(g.input("y", xt::xarray<double>{{0.0, 0.0}, {0.0, 0.0}}));          // none
  const std::string dot = to_dot(g);
  BOOST_TEST(dot.find("n1 [label=\"softmax\\naxis=-1\\n(2, 2)\\nsaturated 100%\", fillcolor=\"#d62728\"]") != std::string::npos, dot);
  BOOST_TEST(dot.find("n3 [label=\"softmax\\naxis=-1\\n(2, 2)\\nsaturated 0%\", fillcolor=\"#ffffff\"]") != std::string::npos, dot);
}

BOOST_AUTO_TEST_CASE(attention_takes_a_scale) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({2, 16}, 7));
  const auto k = g.input("k", random_array<double>({3, 16}, 8));
  const auto v = g.input("v", random_array<double>({3, 2}, 9));
  const auto scaled = attention_nodes(q, k, v), unscaled = attention_nodes(q, k, v, 1.0);
  const auto alpha = [&](const AttentionNodes<double>& a) {  // on q, the scores' first input
    return g.node(a.scores.node().inputs[0].node).op->attrs()["alpha"].get<double>();
  };
  BOOST_TEST(alpha(scaled) == 0.25);
  BOOST_TEST(alpha(unscaled) == 1.0);
  BOOST_TEST(xt::allclose(unscaled.scores.value(), 4.0 * scaled.scores.value()));
  BOOST_TEST(attention(q, k, v, 1.0).value() == unscaled.output.value());
  test::check_gradients(attention(q, k, v, 0.1), {q, k, v});
  check_error([&] { attention(q, k, v, std::nan("")); }, {"attention: the scale must be finite"});
  check_error([&] { softmax_diagnostics(g, 1.5); }, {"threshold must be in (0, 1]", "1.5"});
}

BOOST_AUTO_TEST_CASE(sweep_shows_the_variance_argument_and_saturation) {
  SweepOptions o;
  o.t_q = o.t_k = 32;
  o.trials = 300;
  o.seed = 11;
  const auto rows = saturation_sweep(o);
  BOOST_TEST_REQUIRE(rows.size() == 6u);
  for (const auto& r : rows) {
    BOOST_TEST_CONTEXT("d_k " << r.d_k) {
      const double d_k = static_cast<double>(r.d_k);
      BOOST_TEST(std::abs(r.scaled.score_variance - 1.0) <= 0.1);       // within 10% of 1
      BOOST_TEST(std::abs(r.unscaled.score_variance - d_k) <= 0.1 * d_k);  // within 10% of d_k
      BOOST_TEST(r.scaled.saturated_fraction < 0.01);  // scaled: far from saturation
      BOOST_TEST(r.scaled.max_weight < 0.3);
    }
  }
  for (std::size_t i = 1; i < rows.size(); ++i) {
    BOOST_TEST_CONTEXT("d_k " << rows[i - 1].d_k << " -> " << rows[i].d_k) {
      BOOST_TEST(rows[i].unscaled.max_weight > rows[i - 1].unscaled.max_weight);  // saturation grows
      BOOST_TEST(rows[i].unscaled.saturated_fraction >= rows[i - 1].unscaled.saturated_fraction);
      if (rows[i].d_k >= 16) BOOST_TEST(rows[i].unscaled.gradient_gain < rows[i - 1].unscaled.gradient_gain);  // gain shrinks
    }
  }
  BOOST_TEST(rows.back().unscaled.saturated_fraction > 0.5);
  BOOST_TEST(rows.back().unscaled.gradient_gain < 0.25 * rows.back().scaled.gradient_gain);
  // Deterministic for a seed.
  SweepOptions small = o;
  small.trials = 3;
  BOOST_TEST(sweep_to_json(saturation_sweep(small)).dump() == sweep_to_json(saturation_sweep(small)).dump());
}

BOOST_AUTO_TEST_CASE(sweep_outputs) {
  SweepOptions o;
  o.d_k = {1, 8, 64};
  o.trials = 2;
  const auto rows = saturation_sweep(o);
  const Json j = sweep_to_json(rows);
  BOOST_TEST(j["rows"].size() == 3u);
  BOOST_TEST(j["rows"][1]["d_k"] == 8);
  for (const char* side : {"scaled", "unscaled"}) {
    for (const char* key : {"score_variance", "max_weight", "entropy", "saturated_fraction", "jacobian_norm",
                            "gradient_gain", "grad_q_norm"}) {
      BOOST_TEST(j["rows"][0][side].contains(key), side << "." << key);
    }
    BOOST_TEST(j["rows"][0][side].size() == 7u);
  }
  const std::string csv = sweep_to_csv(rows);
  BOOST_TEST(std::count(csv.begin(), csv.end(), '\n') == 4);
  BOOST_TEST(csv.rfind("d_k,scaled_score_variance,", 0) == 0u);
  const std::string svg = sweep_to_svg(rows);
  std::string why;
  BOOST_TEST(well_formed_xml(svg, why), why);
  for (const char* id : {"max_weight_scaled", "max_weight_unscaled", "gradient_gain_scaled", "gradient_gain_unscaled"}) {
    BOOST_TEST(svg.find(std::string("<g id=\"") + id + "\"") != std::string::npos, id);
  }
  BOOST_TEST(svg.find("d_k, key width (log scale)") != std::string::npos);
  BOOST_TEST(svg.find("scaled by 1/sqrt(d_k)") != std::string::npos);  // the legend
  // The checker can fail.
  BOOST_TEST(!well_formed_xml("<svg><g></svg>", why));
  check_error([] { SweepOptions bad; bad.d_k = {4, 0}; saturation_sweep(bad); }, {"d_k = 0"});
  check_error([] { SweepOptions bad; bad.trials = 0; saturation_sweep(bad); }, {"trials = 0"});
}

// Issue 15 (class 7): a sweep of T_q = T_k = 2^15 would build 2^30-element scores in each trial;
// refused before anything is drawn.
BOOST_AUTO_TEST_CASE(sweep_refuses_arrays_of_too_many_elements) {
  SweepOptions o;
  o.t_q = o.t_k = std::size_t(1) << 15;
  check_error([&] { saturation_sweep(o); },
              {"saturation_sweep: the scores (T_q, T_k) (32768, 32768) makes more than 268435456 elements"});
  SweepOptions wide;
  wide.d_k = {4, std::size_t(1) << 20};
  wide.t_q = 1024;
  check_error([&] { saturation_sweep(wide); }, {"saturation_sweep: q (T_q, d_k) (1024, 1048576)"});
}

// The summaries of the rows i of d for which keep(i), as softmax_diagnostics should make them.
struct Expected {
  std::size_t rows = 0, masked = 0, without_gradient = 0, saturated = 0, counted = 0, gains = 0;
  double entropy_min = 1e300, entropy_sum = 0, entropy_max = -1e300, gain_sum = 0, gain_min = 1e300;
};
template <class Keep>
Expected expected(const SoftmaxDiagnostics& d, Keep keep) {
  Expected e;
  for (std::size_t i = 0; i < d.rows.size(); ++i) {
    if (!keep(i)) continue;
    const SoftmaxRow& r = d.rows[i];
    ++e.rows;
    if (r.masked) {
      ++e.masked;
      continue;
    }
    ++e.counted;
    e.saturated += r.saturated;
    e.entropy_min = std::min(e.entropy_min, r.normalized_entropy);
    e.entropy_max = std::max(e.entropy_max, r.normalized_entropy);
    e.entropy_sum += r.normalized_entropy;
    if (!r.gradient_gain) {
      ++e.without_gradient;
      continue;
    }
    ++e.gains;
    e.gain_sum += *r.gradient_gain;
    e.gain_min = std::min(e.gain_min, *r.gradient_gain);
  }
  return e;
}

void check_stats(const SoftmaxStats& s, const Expected& e) {
  BOOST_TEST(s.row_count == e.rows);
  BOOST_TEST(s.masked_rows == e.masked);
  BOOST_TEST(s.rows_without_gradient == e.without_gradient);
  BOOST_TEST(s.saturated_fraction == double(e.saturated) / double(e.counted), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(s.normalized_entropy.min == e.entropy_min);
  BOOST_TEST(s.normalized_entropy.max == e.entropy_max);
  BOOST_TEST(s.normalized_entropy.mean == e.entropy_sum / double(e.counted), boost::test_tools::tolerance(1e-14));
  BOOST_TEST_REQUIRE(s.gradient_gain.has_value());
  BOOST_TEST(s.gradient_gain->min == e.gain_min);
  BOOST_TEST(s.gradient_gain->mean == e.gain_sum / double(e.gains), boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(groups_along_the_heads_name_the_saturated_head) {
  Graph<double> g;
  test::saturating_head(g, 0);
  const auto all = softmax_diagnostics(g, 0.99, true, 1);
  BOOST_TEST_REQUIRE(all.size() == 1u);
  const SoftmaxDiagnostics& d = all[0];
  BOOST_TEST(d.row_shape == Shape({2, 3, 4}));  // (B, H, T_q): row (b * H + h) * T_q + t
  BOOST_TEST(d.rows.size() == 24u);
  BOOST_TEST(!d.in_backward);
  BOOST_TEST_REQUIRE(d.group_axis.has_value());
  BOOST_TEST(*d.group_axis == 1u);
  BOOST_TEST_REQUIRE(d.groups.size() == 3u);
  for (std::size_t h = 0; h < 3; ++h) {
    BOOST_TEST_CONTEXT("head " << h) {
      BOOST_TEST(d.groups[h].index == h);
      check_stats(d.groups[h], expected(d, [&](std::size_t i) { return (i / 4) % 3 == h; }));
    }
  }
  check_stats(d, expected(d, [](std::size_t) { return true; }));
  // Head 0 is the saturated one; its gradient gain is orders below the others'.
  BOOST_TEST_REQUIRE(worst_group(d) != nullptr);
  BOOST_TEST(worst_group(d)->index == 0u);
  BOOST_TEST(d.groups[0].saturated_fraction > 0.5);
  for (std::size_t h : {1, 2}) {
    BOOST_TEST(d.groups[h].saturated_fraction < d.groups[0].saturated_fraction);
    BOOST_TEST(d.groups[0].gradient_gain->mean < 0.05 * d.groups[h].gradient_gain->mean);
  }
  // Along the batch (axis 0) and the queries (axis 2) too; the softmax axis groups nothing.
  const auto by_batch = softmax_diagnostics(g, 0.99, true, 0)[0];
  BOOST_TEST_REQUIRE(by_batch.groups.size() == 2u);
  check_stats(by_batch.groups[1], expected(by_batch, [](std::size_t i) { return i >= 12; }));
  const auto by_query = softmax_diagnostics(g, 0.99, false, 2)[0];
  BOOST_TEST(by_query.groups.size() == 4u);
  BOOST_TEST(by_query.rows.empty());
  BOOST_TEST(by_query.groups[3].row_count == 6u);
  // Without a group axis, no groups and no worst group.
  BOOST_TEST(softmax_diagnostics(g)[0].groups.empty());
  BOOST_TEST(worst_group(softmax_diagnostics(g)[0]) == nullptr);
}

BOOST_AUTO_TEST_CASE(a_group_axis_of_no_softmax_node_is_an_error) {
  Graph<double> g;
  test::saturating_head(g, 0);
  for (std::size_t axis : {3, 4, 60}) {
    BOOST_TEST_CONTEXT("axis " << axis) {
      check_error([&] { softmax_diagnostics(g, 0.99, true, axis); },
                  {"softmax_diagnostics: group axis " + std::to_string(axis) +
                   " is an axis other than the softmax axis of no softmax node (node 6 (2, 3, 4, 4) along axis 3)"});
    }
  }
  // A graph with a node it fits and one it does not: the one it fits is grouped.
  Graph<double> h;
  softmax(h.input("a", random_array<double>({2, 5}, 1)));
  softmax(h.input("b", random_array<double>({2, 3, 5}, 2)));
  const auto d = softmax_diagnostics(h, 0.99, true, 1);
  BOOST_TEST(!d[0].group_axis.has_value());
  BOOST_TEST(d[0].groups.empty());
  BOOST_TEST(d[1].groups.size() == 3u);
}

BOOST_AUTO_TEST_CASE(rows_without_gradient_and_masked_rows_leave_the_statistics) {
  Graph<double> g;
  // 5 queries of 3 keys: query 4 has every key masked; the loss does not reach query 2 (padding).
  xt::xarray<double> s = random_array<double>({5, 3}, 21, 3.0);
  xt::row(s, 4) = -std::numeric_limits<double>::infinity();
  const auto x = g.input("scores", s);
  const auto y = softmax(x);
  xt::xarray<double> go = random_array<double>({5, 3}, 22);
  xt::row(go, 2) = 0.0;
  grad(y, {x}, go);
  const SoftmaxDiagnostics d = softmax_diagnostics(g)[0];
  BOOST_TEST(d.row_count == 5u);
  BOOST_TEST(d.masked_rows == 1u);
  BOOST_TEST(d.rows_without_gradient == 1u);
  BOOST_TEST(d.rows[4].masked);
  BOOST_TEST(!d.rows[4].gradient_gain.has_value());
  BOOST_TEST(!d.rows[2].masked);
  BOOST_TEST(!d.rows[2].gradient_gain.has_value());  // not a gain of 0
  for (std::size_t i : {0, 1, 3}) BOOST_TEST(*d.rows[i].gradient_gain > 0.0);
  check_stats(d, expected(d, [](std::size_t) { return true; }));
  BOOST_TEST(d.max_weight.min > 1.0 / 3);  // the masked row's 0 is not in it
  // In JSON: the counts, and null for the gains that are not there.
  const Json j = diagnostics_to_json({d}, true)[0];
  BOOST_TEST(j["masked_rows"] == 1);
  BOOST_TEST(j["rows_without_gradient"] == 1);
  BOOST_TEST(j["row_shape"] == Json::array({5}));
  BOOST_TEST(j["per_row"]["gradient_gain"][2].is_null());
  BOOST_TEST(j["per_row"]["gradient_gain"][4].is_null());
  BOOST_TEST(j["per_row"]["masked"][4] == true);
  BOOST_TEST(!j.contains("in_backward"));
  BOOST_TEST(!j.contains("groups"));
  // The same rows through attention_weights_diagnostics.
  const SoftmaxDiagnostics w = attention_weights_diagnostics(y, x);
  BOOST_TEST(w.masked_rows == 1u);
  BOOST_TEST(w.rows_without_gradient == 1u);
  BOOST_TEST(w.gradient_gain->mean == d.gradient_gain->mean, boost::test_tools::tolerance(1e-12));
}

BOOST_AUTO_TEST_CASE(a_softmax_made_by_a_vjp_is_marked_and_not_shaded) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{{0.0, -1000.0}, {0.0, -1000.0}});
  softmax(x);                                                  // the model's: all rows saturated
  const auto l = log_softmax(x);                               // its VJP makes a softmax
  grad(l, {x}, xt::xarray<double>{{1.0, 0.0}, {1.0, 0.0}});
  const auto d = softmax_diagnostics(g);
  BOOST_TEST_REQUIRE(d.size() == 2u);
  BOOST_TEST(!d[0].in_backward);
  BOOST_TEST(d[1].in_backward);
  BOOST_TEST(diagnostics_to_json(d, false)[1]["in_backward"] == true);
  const auto shaded = [](const std::string& dot) {
    std::size_t n = 0;
    for (std::size_t at = dot.find("\\nsaturated "); at != std::string::npos; at = dot.find("\\nsaturated ", at + 1)) ++n;
    return n;
  };
  BOOST_TEST(shaded(to_dot(g)) == 1u);
  DotOptions all;
  all.backward_softmax = true;
  BOOST_TEST(shaded(to_dot(g, all)) == 2u);
}

BOOST_AUTO_TEST_CASE(dot_shades_a_node_by_its_worst_group) {
  Graph<double> g;
  // Index 0 along axis 0 saturated in both rows, index 1 in neither: 50% pooled, 100% worst.
  softmax(g.input("x", xt::xarray<double>{{{0.0, -1000.0}, {0.0, -1000.0}}, {{0.0, 0.0}, {0.0, 0.0}}}));
  BOOST_TEST(to_dot(g).find("saturated 50%\", fillcolor=\"#eb9394\"") != std::string::npos, to_dot(g));
  DotOptions o;
  o.group_axis = 0;
  const std::string dot = to_dot(g, o);
  BOOST_TEST(dot.find("saturated 50%\\n[0] = 0: 100% (worst)\", fillcolor=\"#d62728\"") != std::string::npos, dot);
}

BOOST_AUTO_TEST_SUITE_END()

