#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(reshape)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const xt::xarray<double> expected = {{1, 2}, {3, 4}, {5, 6}};
  BOOST_TEST(xgrad::reshape(x, {3, 2}).value() == expected);
  BOOST_TEST(xgrad::reshape(x, {6}).value() == (xt::xarray<double>{1, 2, 3, 4, 5, 6}));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  check_gradients(xgrad::reshape(x, {2, 12}), {x});
  check_gradients(xgrad::reshape(x, {4, 1, 6}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::reshape(x, {4, 2}); }, {"reshape (node 1)", "x (2, 3) has 6 elements", "(4, 2) holds 8"});
}

BOOST_AUTO_TEST_SUITE_END()
