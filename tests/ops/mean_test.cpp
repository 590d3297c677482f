#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(mean)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 9}});
  BOOST_TEST(xgrad::mean(x, {0}).value() == (xt::xarray<double>{2.5, 3.5, 6}));
  BOOST_TEST(xgrad::mean(x, {-1}, true).value() == matrix<double>({{2}, {6}}));
  BOOST_TEST(xgrad::mean(x).value() == xt::xarray<double>(4));
  BOOST_TEST(xgrad::mean(x, {}).value() == x.value());
}

BOOST_AUTO_TEST_CASE(an_empty_axis_gives_nan_as_numpy_does) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>::from_shape({0, 3}));
  const auto y = xgrad::mean(x, {0});
  BOOST_TEST(y.value().size() == 3u);
  for (double e : y.value()) BOOST_TEST(std::isnan(e));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  for (bool keepdims : {false, true}) {
    BOOST_TEST_CONTEXT("keepdims " << keepdims) {
      check_gradients(xgrad::mean(x, {2}, keepdims), {x});
      check_gradients(xgrad::mean(x, {0, 1}, keepdims), {x});
    }
  }
  check_gradients(xgrad::mean(x), {x});
  // The gradient of the mean of n elements is 1/n each: 24 here.
  const auto gx = grad(xgrad::mean(x), {x})[0];
  for (double e : gx.value()) BOOST_TEST(e == 1.0 / 24, boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(float32_matches_float64) {
  Graph<float> g;
  const auto x = g.input("x", random_array<float>({3, 5}, 2));
  const auto y = xgrad::mean(x, {1});
  for (std::size_t i = 0; i < 3; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < 5; ++j) s += x.value()(i, j);
    BOOST_TEST(y.value()(i) == s / 5, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(attrs_hold_axes_and_keepdims) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  BOOST_TEST(xgrad::mean(x, {0, -1}).node().op->attrs().dump() == R"({"axes":[0,-1],"keepdims":false})");
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::mean(x, {-3}); }, {"mean (node 1)", "axis -3 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::mean(x, {0, 0}); }, {"mean (node 1)", "axis 0 is repeated in the axes of x (2, 3)"});
}

BOOST_AUTO_TEST_SUITE_END()
