// lib/variants: the attention variants' building blocks, against PyTorch float64
// (tests/data/make_torch_fixtures.py) and finite differences.
#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(variants)

BOOST_AUTO_TEST_CASE(repeat_kv_matches_pytorch_repeat_interleave_with_its_gradient) {
  for (const auto& [name, groups] : {std::pair<std::string, std::size_t>{"rank4", 2}, {"rank3", 3}}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto x = g.input("x", torch_fixture("variants_repeat_kv_" + name + "_x"));
      const std::size_t before = g.size();
      const auto y = repeat_kv(x, groups);
      BOOST_TEST(g.size() == before + 3);  // reshape, broadcast_to, reshape
      BOOST_TEST(g.node(before + 1).op_name() == "broadcast_to");
      BOOST_TEST(y.value() == torch_fixture("variants_repeat_kv_" + name + "_y"));  // copies: the same bits
      const auto gx = grad(y, {x}, torch_fixture("variants_repeat_kv_" + name + "_u"))[0];
      check_close(gx.value(), torch_fixture("variants_repeat_kv_" + name + "_grad_x"));
      check_gradients(y, {x});
    }
  }
}

BOOST_AUTO_TEST_CASE(repeat_kv_gives_each_kv_head_to_consecutive_query_heads) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{{{{1, 2}}}, {{{3, 4}}}});  // (B = 2, Hkv = 1, T = 1, d = 2)
  const auto xr = g.input("xr", xt::xarray<double>{{{1, 2}}, {{3, 4}}});    // (Hkv = 2, T = 1, d = 2)
  BOOST_TEST(repeat_kv(xr, 2).value() == (xt::xarray<double>{{{1, 2}}, {{1, 2}}, {{3, 4}}, {{3, 4}}}));
  BOOST_TEST(repeat_kv(x, 3).shape() == (Shape{2, 3, 1, 2}));
  const std::size_t nodes = g.size();
  BOOST_TEST(repeat_kv(x, 1).id() == x.id());  // groups 1: x itself, no node
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_CASE(repeat_kv_rejects_bad_input_naming_it) {
  Graph<double> g;
  const auto m = g.input("m", xt::xarray<double>::from_shape({4, 3}));
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 2, 3, 4}));
  const auto big = g.input("big", xt::xarray<double>::from_shape({1, 1, 1}));
  const std::size_t nodes = g.size();
  check_error([&] { repeat_kv(m, 2); }, {"repeat_kv: x must be (..., H_kv, T, d), the heads third from last, of rank >= 3: x is (4, 3)"});
  check_error([&] { repeat_kv(x, 0); }, {"repeat_kv: groups must be >= 1", "got 0: x is (2, 2, 3, 4)"});
  check_error([&] { repeat_kv(big, std::size_t(1) << 29); }, {"repeat_kv: x (1, 1, 1) with 536870912 groups", "more than 268435456 elements"});
  check_error([&] { repeat_kv(Var<double>(), 2); }, {"repeat_kv: x is an empty Var"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_CASE(alibi_slopes_are_the_papers_and_the_reference_get_slopes) {
  // n a power of 2: 2^(-8k/n), k = 1 .. n.
  BOOST_TEST(alibi_slopes(8) == (std::vector<double>{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625}),
             boost::test_tools::per_element());
  // n = 6: the 4 of n = 4 (2^-2, 2^-4, 2^-6, 2^-8), then every other of n = 8, its first 2 (2^-1, 2^-3).
  BOOST_TEST(alibi_slopes(6) == (std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125}),
             boost::test_tools::per_element());
  // n = 12: the 8 of n = 8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5 from n = 16.
  const auto s12 = alibi_slopes(12);
  BOOST_TEST_REQUIRE(s12.size() == 12u);
  for (std::size_t h = 0; h < 8; ++h) BOOST_TEST(s12[h] == std::ldexp(1.0, -static_cast<int>(h) - 1));
  for (std::size_t h = 8; h < 12; ++h) {
    BOOST_TEST(s12[h] == std::pow(2.0, -0.5 - static_cast<double>(h - 8)), boost::test_tools::tolerance(1e-15));
  }
  // Bit for bit the reference code's (run by tests/data/make_torch_fixtures.py, part variants).
  for (const std::size_t n : {1, 3, 6, 8, 12, 20, 32}) {
    BOOST_TEST_CONTEXT("n = " << n) {
      const auto expected = torch_fixture("variants_alibi_slopes_" + std::to_string(n));
      const auto slopes = alibi_slopes(n);
      BOOST_TEST_REQUIRE(slopes.size() == expected.size());
      for (std::size_t h = 0; h < n; ++h) BOOST_TEST(slopes[h] == expected(h));
    }
  }
}

BOOST_AUTO_TEST_CASE(alibi_bias_is_minus_the_slope_times_the_distance_causally_aligned) {
  Graph<double> g;
  // 2 heads: slopes 2^-4 and 2^-8. T_q = 2 queries are the last of T_k = 3 keys: i' = i + 1.
  const auto b = alibi_bias(g, 2, 2, 3);
  BOOST_TEST((b.node().role == Role::constant));
  BOOST_TEST(b.node().name == "alibi");
  const double m0 = 1.0 / 16, m1 = 1.0 / 256;
  BOOST_TEST(b.value() == (xt::xarray<double>{{{-m0, 0, m0}, {-2 * m0, -m0, 0}}, {{-m1, 0, m1}, {-2 * m1, -m1, 0}}}),
             boost::test_tools::per_element());
  BOOST_TEST(alibi_bias(g, 6, 3, 5).value() == torch_fixture("variants_alibi_bias_6_3_5"));
  BOOST_TEST(alibi_bias(g, 8, 4, 4).value() == torch_fixture("variants_alibi_bias_8_4_4"));
  Graph<float> gf;
  BOOST_TEST(alibi_bias(gf, 6, 3, 5).value() == xt::cast<float>(torch_fixture("variants_alibi_bias_6_3_5")));
}

BOOST_AUTO_TEST_CASE(alibi_rejects_zero_heads_and_huge_biases) {
  Graph<double> g;
  check_error([] { alibi_slopes(0); }, {"alibi_slopes: heads must be in [1, 268435456], got 0"});
  check_error([&] { alibi_bias(g, 0, 2, 2); }, {"alibi_bias: heads must be >= 1, got 0 (for T_q = 2, T_k = 2)"});
  check_error([&] { alibi_bias(g, 8, 65536, 65536); }, {"alibi_bias: a (8, 65536, 65536) bias makes more than 268435456 elements"});
  BOOST_TEST(g.size() == 0u);
}

BOOST_AUTO_TEST_CASE(softcap_matches_pytorch_and_bounds_the_logits) {
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("variants_softcap_x"));  // (3, 4), some |x| > 5
  const auto y = softcap(x, 5.0);
  check_close(y.value(), torch_fixture("variants_softcap_y"));
  check_close(grad(y, {x}, torch_fixture("variants_softcap_u"))[0].value(), torch_fixture("variants_softcap_grad_x"));
  BOOST_TEST(xt::amax(xt::abs(y.value()))() < 5.0);
  const auto big = g.input("big", xt::xarray<double>{-1e6, -30, 0, 1e-3, 30, 1e6});
  const auto capped = softcap(big, 30.0);
  check_close(capped.value(), xt::xarray<double>{-30, -30 * std::tanh(1.0), 0, 30 * std::tanh(1e-3 / 30), 30 * std::tanh(1.0), 30},
              1e-15);
  const auto u = g.input("u", random_array<double>({3, 4}, 4));
  check_gradients(y, {x});
  check_gradients(grad(y, {x}, u)[0], {x, u});  // second order
}

BOOST_AUTO_TEST_CASE(softcap_rejects_a_cap_not_finite_and_positive) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 3}));
  const std::size_t nodes = g.size();
  for (const double cap : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    check_error([&] { softcap(x, cap); }, {"softcap: cap must be finite and > 0, got", "(for x (2, 3))"});
  }
  check_error([&] { softcap(x, -2.0); }, {"got -2 (for x (2, 3))"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_CASE(qk_norm_rms_is_rms_norm_and_matches_its_pytorch_formula) {
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("rms_norm_x"));  // (2, 3, 5), a row of zeros among them
  const auto gain = g.parameter("gain", torch_fixture("rms_norm_gamma"));
  const auto y = qk_norm(x, gain, QkNorm::rms);
  check_close(y.value(), torch_fixture("rms_norm_y"));
  BOOST_TEST(y.node().op_name() == "rms_norm");
  const auto grads = grad(y, {x, gain}, torch_fixture("rms_norm_u"));
  check_close(grads[0].value(), torch_fixture("rms_norm_grad_x"));
  check_close(grads[1].value(), torch_fixture("rms_norm_grad_gamma"));
  BOOST_TEST(std::string(qk_norm_name(QkNorm::rms)) == "rms");
}

BOOST_AUTO_TEST_CASE(qk_norm_layer_matches_a_bias_free_pytorch_layer_norm) {
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("variants_qk_norm_x"));  // (2, 3, 4, 6): (B, H, T, d_head)
  const auto gain = g.parameter("gain", torch_fixture("variants_qk_norm_gain"));
  const auto y = qk_norm(x, gain, QkNorm::layer);
  BOOST_TEST(y.node().op_name() == "layer_norm");
  check_close(y.value(), torch_fixture("variants_qk_norm_y"));
  const auto grads = grad(y, {x, gain}, torch_fixture("variants_qk_norm_u"));
  check_close(grads[0].value(), torch_fixture("variants_qk_norm_grad_x"));
  check_close(grads[1].value(), torch_fixture("variants_qk_norm_grad_gain"));
  const std::size_t nodes = g.size();
  BOOST_TEST(qk_norm(x, Var<double>(), QkNorm::none).id() == x.id());  // none: x itself
  BOOST_TEST(g.size() == nodes);
  BOOST_TEST(std::string(qk_norm_name(QkNorm::layer)) == "layer");
}

BOOST_AUTO_TEST_CASE(qk_norm_finite_differences_to_second_order) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 5, 2.0));
  const auto gain = g.input("gain", random_array<double>({4}, 6));
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 7));
  check_gradients(qk_norm(x, gain, QkNorm::layer), {x, gain});
  check_gradients(grad(qk_norm(x, gain, QkNorm::layer), {x, gain}, u)[0], {x, gain, u});
}

BOOST_AUTO_TEST_CASE(qk_norm_rejects_bad_gains_and_eps_naming_them) {
  Graph<double> g, other;
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 3, 4}));
  const auto g5 = g.input("g5", xt::xarray<double>::from_shape({5}));
  const auto alien = other.input("alien", xt::xarray<double>::from_shape({4}));
  const auto gain = g.input("gain", xt::xarray<double>::from_shape({4}));
  const std::size_t nodes = g.size();
  check_error([&] { qk_norm(x, g5, QkNorm::layer); },
              {"qk_norm (layer): x must be (..., d_head), d_head > 0, and gain (d_head): x is (2, 3, 4), gain (5,)"});
  check_error([&] { qk_norm(x, Var<double>(), QkNorm::layer); }, {"qk_norm: gain is an empty Var"});
  check_error([&] { qk_norm(x, alien, QkNorm::layer); }, {"qk_norm: gain (node 0) belongs to another graph than x"});
  check_error([&] { qk_norm(x, gain, QkNorm::layer, -1.0); }, {"qk_norm (layer): eps must be finite and >= 0, got -1"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_SUITE_END()
