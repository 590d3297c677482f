#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(softmax)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // The spec: scores [0.5, 0, 0, 0] give the first key about 35.5% and each other about 21.5%.
  Graph<double> g;
  const auto x = g.input("x", {{0.5, 0, 0, 0}});
  const auto& y = xgrad::softmax(x).value();
  const double e = std::exp(0.5);
  BOOST_TEST(y(0, 0) == e / (e + 3), boost::test_tools::tolerance(1e-15));
  for (int j = 1; j < 4; ++j) BOOST_TEST(y(0, j) == 1 / (e + 3), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::abs(y(0, 0) - 0.3547) < 1e-4);  // 0.354661...
  BOOST_TEST(std::abs(y(0, 1) - 0.2151) < 1e-4);  // 0.215113...
}

BOOST_AUTO_TEST_CASE(normalises_along_the_last_axis_by_default) {
  // Rows and columns give different answers here, so this pins axis = -1.
  Graph<double> g;
  const auto x = g.input("x", {{0, std::log(3.0)}, {std::log(2.0), std::log(2.0)}});
  const xt::xarray<double> rows = {{0.25, 0.75}, {0.5, 0.5}};
  const xt::xarray<double> cols = {{1.0 / 3, 0.6}, {2.0 / 3, 0.4}};
  BOOST_TEST(xgrad::softmax(x).value() == rows, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  BOOST_TEST(xgrad::softmax(x, 0).value() == cols, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(large_scores_stay_finite_in_float32) {
  for (float magnitude : {1e2f, 1e3f, 1e4f, 1e30f}) {
    Graph<float> g;
    const auto x = g.input("x", random_array<float>({8, 16}, 1, magnitude));
    const auto& y = xgrad::softmax(x).value();
    BOOST_TEST(xt::all(xt::isfinite(y)), "magnitude " << magnitude);
    const xt::xarray<float> sums = xt::sum(y, {1}, xt::evaluation_strategy::immediate);
    for (float s : sums) BOOST_TEST(s == 1.0f, boost::test_tools::tolerance(1e-6f));
  }
}

BOOST_AUTO_TEST_CASE(two_equal_logits_split_exactly_in_half) {
  for (double logit : {-1e30, -700.0, 0.0, 1.0, 88.0, 1e4, 1e30}) {
    Graph<float> g;
    const auto x = g.input("x", {{static_cast<float>(logit), static_cast<float>(logit)}});
    const xt::xarray<float> half = {{0.5f, 0.5f}};
    BOOST_TEST(xgrad::softmax(x).value() == half, "logit " << logit);
  }
}

BOOST_AUTO_TEST_CASE(nan_and_infinite_rows_are_as_documented) {
  const double inf = std::numeric_limits<double>::infinity();
  Graph<double> g;
  const auto x = g.input("x", {{std::nan(""), 0, 1}, {inf, 0, 1}, {std::nan(""), -inf, -inf}, {-inf, 0, 0}, {-inf, -inf, -inf}});
  const auto y = xgrad::softmax(x);
  for (std::size_t r = 0; r < 3; ++r) {  // NaN or +inf in a row: all NaN
    for (std::size_t c = 0; c < 3; ++c) BOOST_TEST(std::isnan(y.value()(r, c)), "row " << r << " col " << c);
  }
  const xt::xarray<double> last = {0, 0.5, 0.5};  // -inf alone is a weight of exactly 0
  BOOST_TEST(xt::xarray<double>(xt::view(y.value(), 3)) == last);
  const xt::xarray<double> masked = {0, 0, 0};  // every key masked: zeros, and a zero gradient
  BOOST_TEST(xt::xarray<double>(xt::view(y.value(), 4)) == masked);
  const auto gx = grad(y, {x}, xt::xarray<double>(xt::ones<double>({5, 3})))[0];
  BOOST_TEST(xt::xarray<double>(xt::view(gx.value(), 4)) == masked);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  for (long axis : {0L, 1L, 2L, -1L}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
    BOOST_TEST_CONTEXT("axis " << axis) { check_gradients(xgrad::softmax(x, axis), {x}); }
  }
}

BOOST_AUTO_TEST_CASE(second_order_matches_finite_differences) {
  for (long axis : {0L, -1L}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({3, 4}, 3));
    const auto u = g.input("u", random_array<double>({3, 4}, 4));
    const auto grad_x = grad(xgrad::softmax(x, axis), {x}, u)[0];
    BOOST_TEST_CONTEXT("axis " << axis) { check_gradients(grad_x, {x, u}); }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto empty = g.input("empty", xt::zeros<double>({2, 0}));
  check_error([&] { xgrad::softmax(x, 2); }, {"softmax (node 2)", "axis 2 is out of range", "(2, 3)"});
  check_error([&] { xgrad::softmax(x, -3); }, {"axis -3 is out of range", "(2, 3)"});
  check_error([&] { xgrad::softmax(empty); }, {"softmax (node 2)", "(2, 0)", "empty"});
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_axis) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  BOOST_TEST(xgrad::softmax(x, 0).node().op->attrs().dump() == R"({"axis":0})");
}

BOOST_AUTO_TEST_SUITE_END()
