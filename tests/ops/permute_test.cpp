#include "../check.hpp"

#include <xtensor/xmanipulation.hpp>

BOOST_AUTO_TEST_SUITE(permute)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  BOOST_TEST(xgrad::permute(x, {1, 0}).value() == (xt::xarray<double>{{1, 4}, {2, 5}, {3, 6}}));
  // (B, T, H, d) -> (B, H, T, d), as numpy.transpose does it.
  const auto y = g.input("y", random_array<double>({2, 3, 4, 5}, 1));
  const xt::xarray<double> expected = xt::transpose(y.value(), {0, 2, 1, 3});
  BOOST_TEST(xgrad::permute(y, {0, 2, 1, 3}).value() == expected);
  const xt::xarray<double> cyclic = xt::transpose(y.value(), {3, 0, 1, 2});
  BOOST_TEST(xgrad::permute(y, {3, 0, 1, 2}).value() == cyclic);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  check_gradients(xgrad::permute(x, {2, 0, 1}), {x});
  check_gradients(xgrad::permute(x, {0, 2, 1}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::permute(x, {0, 0}); }, {"permute (node 1)", "axes [0, 0] are not a permutation", "(2, 3)"});
  check_error([&] { xgrad::permute(x, {0, 1, 2}); }, {"axes [0, 1, 2]", "(2, 3)"});
  check_error([&] { xgrad::permute(x, {2, 0}); }, {"axes [2, 0]"});
}

BOOST_AUTO_TEST_SUITE_END()
