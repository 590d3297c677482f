#include "../check.hpp"

#include <xtensor/xmanipulation.hpp>

using namespace xgrad;
using xgrad::test::check_error;
using xgrad::test::check_gradients;
using xgrad::test::random_array;

BOOST_AUTO_TEST_SUITE(transpose)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<float> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const xt::xarray<float> expected = {{1, 4}, {2, 5}, {3, 6}};
  BOOST_TEST(xgrad::transpose(x).value() == expected);
}

BOOST_AUTO_TEST_CASE(swaps_the_last_two_axes_of_each_batch) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4, 5}, 1));
  const xt::xarray<double> expected = xt::transpose(x.value(), {0, 1, 3, 2});
  BOOST_TEST(xgrad::transpose(x).value() == expected);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  check_gradients(xgrad::transpose(x), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({4}));
  check_error([&] { xgrad::transpose(x); }, {"transpose (node 1)", "rank >= 2", "(4,)"});
}

BOOST_AUTO_TEST_SUITE_END()
