#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(rms_norm)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // Row (1, 2, 2): mean of squares 3; with eps 0, y = (1, 2, 2) / sqrt(3) * gamma.
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 2}, {0, 0, 0}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto y = xgrad::rms_norm(x, gamma, 0.0);
  const double r = 1 / std::sqrt(3.0);
  BOOST_TEST(y.value()(0, 0) == r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 1) == 4 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 2) == 6 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isnan(y.value()(1, 0)));  // a row of zeros and eps 0: 0 * inf
  BOOST_TEST(g.var(y.id(), 1).value()(0, 0) == r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isinf(g.var(y.id(), 1).value()(1, 0)));
  // The default eps 1e-5: a row of zeros gives zeros, its rstd 1 / sqrt(1e-5); output 1 is (rows, 1).
  const auto z = xgrad::rms_norm(x, gamma);
  for (std::size_t j = 0; j < 3; ++j) BOOST_TEST(z.value()(1, j) == 0.0);
  const auto& rstd = g.var(z.id(), 1).value();
  BOOST_TEST_REQUIRE(rstd.shape() == (std::vector<std::size_t>{2, 1}), boost::test_tools::per_element());
  BOOST_TEST(rstd(0, 0) == 1 / std::sqrt(3 + 1e-5), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(rstd(1, 0) == 1 / std::sqrt(1e-5), boost::test_tools::tolerance(1e-15));
  // Rank 1, d = 1: x / |x| (eps 0) times gamma.
  const auto one = g.input("one", xt::xarray<double>{-4});
  BOOST_TEST(xgrad::rms_norm(one, g.input("g1", xt::xarray<double>{2.5}), 0.0).value()(0) == -2.5);
  Graph<float> f;
  const auto yf = xgrad::rms_norm(f.input("x", xt::xarray<float>{3, 4}), f.input("g", xt::xarray<float>{1, 1}), 0.0);
  // mean of squares 12.5: (3, 4) / sqrt(12.5)
  BOOST_TEST(yf.value()(1) == 4 / std::sqrt(12.5f), boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(rstd_and_both_gradients_match_pytorch) {
  // Beside y and the gradients (suite norms): rstd, and both outputs carrying a gradient, u on y
  // and w on rstd (torch float64 with autograd: torch 1.13 has no F.rms_norm).
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("rms_norm_x"));  // (2, 3, 5)
  const auto gamma = g.parameter("gamma", torch_fixture("rms_norm_gamma"));
  const auto y = xgrad::rms_norm(x, gamma);
  const auto rstd = g.var(y.id(), 1);
  check_close(rstd.value(), torch_fixture("rms_norm_rstd"));
  const auto u = g.input("u", torch_fixture("rms_norm_u"));
  const auto w = g.input("w", torch_fixture("rms_norm_w"));
  const auto both = grad(add(sum(mul(y, u)), sum(mul(rstd, w))), {x, gamma});
  check_close(both[0].value(), torch_fixture("rms_norm_both_grad_x"));
  check_close(both[1].value(), torch_fixture("rms_norm_both_grad_gamma"));
}

BOOST_AUTO_TEST_CASE(rank_1_matches_finite_differences) {
  // With the default eps.
  Graph<double> g;
  const auto v = g.input("v", random_array<double>({5}, 5));
  const auto gv = g.input("gv", random_array<double>({5}, 6));
  check_gradients(xgrad::rms_norm(v, gv), {v, gv});
  check_gradients(grad(xgrad::rms_norm(v, gv), {v, gv})[0], {v, gv});
}

BOOST_AUTO_TEST_CASE(rejects_parameters_of_other_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  const auto d2 = g.input("d2", xt::ones<double>({2}));
  const auto m = g.input("m", xt::ones<double>({1, 3}));
  check_error([&] { xgrad::rms_norm(x, d2); }, {"rms_norm (node 4): gamma (2,) must be (3,), the last axis of x (2, 3)"});
  check_error([&] { xgrad::rms_norm(x, m); }, {"gamma (1, 3) must be (3,)"});
  check_error([&] { xgrad::rms_norm(x, s); }, {"gamma () must be (3,)"});
  BOOST_TEST(g.size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
