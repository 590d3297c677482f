#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(sum)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  BOOST_TEST(xgrad::sum(x, {0}).value() == (xt::xarray<double>{5, 7, 9}));
  BOOST_TEST(xgrad::sum(x, {-1}).value() == (xt::xarray<double>{6, 15}));
  BOOST_TEST(xgrad::sum(x, {1}, true).value() == matrix<double>({{6}, {15}}));
  BOOST_TEST(xgrad::sum(x, {1, 0}).value() == xt::xarray<double>(21));
  BOOST_TEST(xgrad::sum(x).value() == xt::xarray<double>(21));
  BOOST_TEST(xgrad::sum(x).value().dimension() == 0u);
  BOOST_TEST(xgrad::sum(x, {}).value() == x.value());  // numpy's axis=(): nothing summed
}

BOOST_AUTO_TEST_CASE(sums_middle_axes_of_a_batch) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto y = xgrad::sum(x, {1}, true);
  BOOST_TEST(y.value().shape() == (std::vector<std::size_t>{2, 1, 4}), boost::test_tools::per_element());
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t k = 0; k < 4; ++k) {
      const double s = x.value()(i, 0, k) + x.value()(i, 1, k) + x.value()(i, 2, k);
      BOOST_TEST(y.value()(i, 0, k) == s, boost::test_tools::tolerance(1e-15));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sum_of_nothing_is_zero) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>::from_shape({0, 3}));
  BOOST_TEST(xgrad::sum(x, {0}).value() == (xt::xarray<double>{0, 0, 0}));
  BOOST_TEST(xgrad::sum_to(x, {1, 3}).value() == (xt::xarray<double>{{0, 0, 0}}));
  BOOST_TEST(xgrad::sum(x, {1}).value().shape(0) == 0u);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  for (bool keepdims : {false, true}) {
    BOOST_TEST_CONTEXT("keepdims " << keepdims) {
      check_gradients(xgrad::sum(x, {1}, keepdims), {x});
      check_gradients(xgrad::sum(x, {0, -1}, keepdims), {x});
      check_gradients(xgrad::sum(x, {}, keepdims), {x});
    }
  }
  check_gradients(xgrad::sum(x), {x});
}

BOOST_AUTO_TEST_CASE(attrs_hold_axes_and_keepdims) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  BOOST_TEST(xgrad::sum(x, {-1}, true).node().op->attrs().dump() == R"({"axes":[-1],"keepdims":true})");
  BOOST_TEST(xgrad::sum(x).node().op->attrs().dump() == R"({"axes":[0,1],"keepdims":false})");
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::sum(x, {2}); }, {"sum (node 1)", "axis 2 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::sum(x, {1, -1}); }, {"sum (node 1)", "axis -1 is repeated in the axes of x (2, 3)"});
}

BOOST_AUTO_TEST_SUITE_END()
