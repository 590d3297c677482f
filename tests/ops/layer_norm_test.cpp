#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(layer_norm)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // Row (1, 2, 3): mean 2, biased variance 2/3; with eps 0, xhat = (-1, 0, 1) sqrt(3/2).
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {5, 5, 5}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto beta = g.parameter("beta", xt::xarray<double>{0, 1, 0});
  const auto y = xgrad::layer_norm(x, gamma, beta, 0.0);
  const double r = std::sqrt(1.5);
  BOOST_TEST(y.value()(0, 0) == -r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 1) == 1.0);
  BOOST_TEST(y.value()(0, 2) == 3 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isnan(y.value()(1, 0)));  // variance 0 and eps 0: 0 * inf
  const auto z = xgrad::layer_norm(x, gamma, beta);  // eps 1e-5: a constant row gives beta
  for (std::size_t j = 0; j < 3; ++j) BOOST_TEST(z.value()(1, j) == beta.value()(j));
  // Outputs 1 and 2: the mean and 1 / sqrt(var + eps), (rows, 1).
  const xt::xarray<double> means = matrix<double>({{2.0}, {5.0}});
  BOOST_TEST(g.var(z.id(), 1).value() == means);
  BOOST_TEST(g.var(z.id(), 2).value()(0, 0) == 1 / std::sqrt(2.0 / 3 + 1e-5), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(g.var(z.id(), 2).value()(1, 0) == 1 / std::sqrt(1e-5), boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(rejects_parameters_of_other_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto d2 = g.input("d2", xt::ones<double>({2}));
  check_error([&] { xgrad::layer_norm(x, d2, d3); }, {"layer_norm (node 3): gamma (2,) and beta (3,) must be (3,), the last axis of x (2, 3)"});
  check_error([&] { xgrad::layer_norm(x, d3, d2); }, {"gamma (3,) and beta (2,) must be (3,)"});
  BOOST_TEST(g.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
