#include "../check.hpp"

using namespace xgrad;
using xgrad::test::check_error;
using xgrad::test::check_gradients;
using xgrad::test::random_array;

BOOST_AUTO_TEST_SUITE(add)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}, {3, 4}});
  const auto b = g.input("b", {{10, 20}, {30, -4}});
  const xt::xarray<double> expected = {{11, 22}, {33, 0}};
  BOOST_TEST(xgrad::add(a, b).value() == expected);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3}, 1));
  const auto b = g.input("b", random_array<double>({2, 3}, 2));
  check_gradients(xgrad::add(a, b), {a, b});
  check_gradients(xgrad::add(a, a), {a});  // one input twice: the gradient is 2
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = g.input("b", xt::zeros<double>({3}));
  check_error([&] { xgrad::add(a, b); }, {"add (node 2)", "a is (2, 3)", "b is (3,)", "broadcast_to"});
}

BOOST_AUTO_TEST_SUITE_END()
