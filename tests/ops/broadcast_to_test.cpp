#include "../check.hpp"

using namespace xgrad;
using xgrad::test::check_error;
using xgrad::test::check_gradients;
using xgrad::test::random_array;

BOOST_AUTO_TEST_SUITE(broadcast_to)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1}, {2}});
  const xt::xarray<double> expected = {{{1, 1, 1}, {2, 2, 2}}, {{1, 1, 1}, {2, 2, 2}}};
  BOOST_TEST(xgrad::broadcast_to(x, {2, 2, 3}).value() == expected);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 1}, 1));
  check_gradients(xgrad::broadcast_to(x, {2, 3, 4}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::broadcast_to(x, {3, 3}); }, {"broadcast_to (node 1)", "x (2, 3)", "(3, 3)"});
  check_error([&] { xgrad::broadcast_to(x, {3}); }, {"x (2, 3)", "(3,)"});
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_shape) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({1}));
  BOOST_TEST(xgrad::broadcast_to(x, {2, 3}).node().op->attrs().dump() == R"({"shape":[2,3]})");
}

BOOST_AUTO_TEST_SUITE_END()
