#include "../check.hpp"

using namespace xgrad;
using xgrad::test::check_error;
using xgrad::test::check_gradients;

BOOST_AUTO_TEST_SUITE(relu)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{-2, 0, 3}, {-0.1, 0.5, 1e300}});
  BOOST_TEST(xgrad::relu(x).value() == (xt::xarray<double>{{0, 0, 3}, {0, 0.5, 1e300}}));
  Graph<float> f;
  const auto n = f.input("n", xt::xarray<float>{std::nanf(""), -1.0f, 2.0f});
  const auto y = xgrad::relu(n).value();
  BOOST_TEST(std::isnan(y(0)));  // NaN stays NaN
  BOOST_TEST(y(1) == 0.0f);
  BOOST_TEST(y(2) == 2.0f);
}

BOOST_AUTO_TEST_CASE(gradient_is_one_above_zero_and_zero_at_or_below) {
  Graph<double> g;
  const auto x = g.input("x", {{-2, 0, 3}, {-0.1, 0.5, 7}});
  const auto u = g.input("u", {{10, 20, 30}, {40, 50, 60}});
  const auto gx = grad(xgrad::relu(x), {x}, u)[0];
  BOOST_TEST(gx.value() == (xt::xarray<double>{{0, 0, 30}, {0, 50, 60}}));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4, 5}, 1));  // no entry within 1e-6 of 0
  for (double e : x.value()) BOOST_TEST_REQUIRE(std::abs(e) > 1e-3);
  check_gradients(xgrad::relu(x), {x});
  const auto u = g.input("u", random_array<double>({3, 4, 5}, 2));
  check_gradients(grad(xgrad::relu(x), {x}, u)[0], {x, u});  // second order: 0 w.r.t. x
}

BOOST_AUTO_TEST_CASE(has_no_attrs_and_round_trips) {
  Graph<double> g;
  const auto x = g.input("x", {{-1, 2}});
  const auto y = xgrad::relu(x);
  BOOST_TEST(y.node().op->attrs().dump() == "{}");
  grad(y, {x});
  const auto copy = graph_from_json<double>(to_json(g, ExportValues::all).dump());
  BOOST_TEST(copy->node(y.id()).op_name() == "relu");
  BOOST_TEST(copy->node(y.id()).value() == y.value());
}

BOOST_AUTO_TEST_SUITE_END()
