#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(log_softmax)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{0, std::log(3.0)}, {std::log(2.0), std::log(2.0)}});
  const xt::xarray<double> rows = {{std::log(0.25), std::log(0.75)}, {std::log(0.5), std::log(0.5)}};
  const xt::xarray<double> cols = {{std::log(1.0 / 3), std::log(0.6)}, {std::log(2.0 / 3), std::log(0.4)}};
  BOOST_TEST(xgrad::log_softmax(x).value() == rows, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  BOOST_TEST(xgrad::log_softmax(x, 0).value() == cols, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(equals_the_log_of_softmax_and_stays_finite_where_softmax_underflows) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4, 5}, 1, 3.0));
  const auto y = xgrad::log_softmax(x, 1);
  const xt::xarray<double> expected = xt::log(xgrad::softmax(x, 1).value());
  for (std::size_t i = 0; i < expected.size(); ++i) {  // absolute near 0: log(p) for p near 1 cancels
    BOOST_TEST(std::abs(y.value().data()[i] - expected.data()[i]) <= 1e-14 * (1 + std::abs(expected.data()[i])), "element " << i);
  }
  Graph<float> f;
  const auto z = f.input("z", {{0.0f, -1000.0f, 1e30f}});
  const auto lz = xgrad::log_softmax(z).value();
  BOOST_TEST(lz(0) == -1e30f);  // softmax gives 0 for both: its log would be -inf
  BOOST_TEST(lz(1) == -1e30f);
  BOOST_TEST(lz(2) == 0.0f);
  const auto w = f.input("w", {{0.0f, -1000.0f}});
  BOOST_TEST(xgrad::log_softmax(w).value()(1) == -1000.0f);
}

BOOST_AUTO_TEST_CASE(infinite_and_nan_rows_are_as_documented) {
  const double inf = std::numeric_limits<double>::infinity();
  Graph<double> g;
  const auto x = g.input("x", {{-inf, 0, 0}, {-inf, -inf, -inf}, {std::nan(""), 0, 1}, {inf, 0, 1}});
  const auto y = xgrad::log_softmax(x).value();
  BOOST_TEST(y(0, 0) == -inf);
  BOOST_TEST(y(0, 1) == std::log(0.5), boost::test_tools::tolerance(1e-15));
  for (std::size_t c = 0; c < 3; ++c) BOOST_TEST(y(1, c) == -inf);
  for (std::size_t r = 2; r < 4; ++r) {
    for (std::size_t c = 0; c < 3; ++c) BOOST_TEST(std::isnan(y(r, c)), "row " << r << " col " << c);
  }
}

BOOST_AUTO_TEST_CASE(gradient_is_grad_out_minus_softmax_times_its_sum) {
  Graph<double> g;
  const auto x = g.input("x", {{0, std::log(3.0)}});
  const auto u = g.input("u", {{1, 2}});
  const auto gx = grad(xgrad::log_softmax(x), {x}, u)[0];  // u - [0.25, 0.75] * 3
  BOOST_TEST(gx.value() == (xt::xarray<double>{{0.25, -0.25}}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  for (long axis : {0L, 1L, -1L}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
    const auto u = g.input("u", random_array<double>({2, 3, 4}, 3));
    BOOST_TEST_CONTEXT("axis " << axis) {
      check_gradients(xgrad::log_softmax(x, axis), {x});
      check_gradients(grad(xgrad::log_softmax(x, axis), {x}, u)[0], {x, u});  // second order
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto empty = g.input("empty", xt::zeros<double>({2, 0}));
  check_error([&] { xgrad::log_softmax(x, 2); }, {"log_softmax (node 2)", "axis 2 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::log_softmax(empty); }, {"log_softmax (node 2)", "axis -1 of x (2, 0) is empty"});
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_axis) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  BOOST_TEST(xgrad::log_softmax(x, 0).node().op->attrs().dump() == R"({"axis":0})");
}

BOOST_AUTO_TEST_SUITE_END()
