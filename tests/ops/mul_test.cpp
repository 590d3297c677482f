#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(mul)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}, {3, 4}});
  const auto b = g.input("b", {{10, 0.5}, {-1, 0}});
  const xt::xarray<double> expected = {{10, 1}, {-3, 0}};
  BOOST_TEST(xgrad::mul(a, b).value() == expected);
}

BOOST_AUTO_TEST_CASE(broadcasts_by_numpys_rules) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const auto row = g.input("row", xt::xarray<double>{10, 0, -1});
  const auto col = g.input("col", {{2}, {-3}});
  BOOST_TEST(xgrad::mul(x, row).value() == (xt::xarray<double>{{10, 0, -3}, {40, 0, -6}}));
  BOOST_TEST(xgrad::mul(col, x).value() == (xt::xarray<double>{{2, 4, 6}, {-12, -15, -18}}));
  BOOST_TEST(xgrad::mul(col, row).value() == (xt::xarray<double>{{20, 0, -2}, {-30, 0, 3}}));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3}, 1));
  const auto b = g.input("b", random_array<double>({2, 3}, 2));
  check_gradients(xgrad::mul(a, b), {a, b});
  check_gradients(xgrad::mul(a, a), {a});  // a^2: the two contributions sum to 2a
  const auto row = g.input("row", random_array<double>({3}, 3));
  const auto col = g.input("col", random_array<double>({2, 1}, 4));
  check_gradients(xgrad::mul(a, row), {a, row});
  check_gradients(xgrad::mul(col, row), {col, row});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = g.input("b", xt::zeros<double>({2, 2}));
  check_error([&] { xgrad::mul(a, b); }, {"mul (node 2)", "a (2, 3) and b (2, 2) do not broadcast together"});
}

BOOST_AUTO_TEST_SUITE_END()
