#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(scale)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, -2}, {0.5, 4}});
  const xt::xarray<double> expected = {{-0.5, 1}, {-0.25, -2}};
  BOOST_TEST(xgrad::scale(x, -0.5).value() == expected);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 2}, 1));
  check_gradients(xgrad::scale(x, 0.37), {x});
}

BOOST_AUTO_TEST_CASE(attrs_hold_alpha) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({1, 1}));
  BOOST_TEST(xgrad::scale(x, 0.25).node().op->attrs().dump() == R"({"alpha":0.25})");
}

BOOST_AUTO_TEST_SUITE_END()
