#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(apply_mask)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const auto m = g.constant("m", xt::xarray<double>{{1, 0, 1}, {0, 0, 1}});
  const double inf = std::numeric_limits<double>::infinity();
  const xt::xarray<double> expected = {{1, -inf, 3}, {-inf, -inf, 6}};
  BOOST_TEST(xgrad::apply_mask(x, m, -inf).value() == expected);
  // A (3,) mask broadcasts over the rows.
  const auto row = g.constant("row", xt::xarray<double>{0, 1, 1});
  const xt::xarray<double> zeroed = {{0, 2, 3}, {0, 5, 6}};
  BOOST_TEST(xgrad::apply_mask(x, row, 0.0).value() == zeroed);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto m = g.constant("m", xt::xarray<double>{{1, 0, 1, 1}, {0, 1, 1, 0}, {1, 1, 0, 1}});
  check_gradients(xgrad::apply_mask(x, m, -2.5), {x});
  // Forbidden entries get a gradient of exactly 0; the mask, a step, gets 0 everywhere.
  const auto grads = grad(xgrad::apply_mask(x, m, -2.5), {x, m});
  BOOST_TEST(grads[0].value()(1, 0, 1) == 0.0);
  BOOST_TEST(grads[0].value()(1, 0, 0) == 1.0);
  BOOST_TEST(xt::all(xt::equal(grads[1].value(), 0.0)));
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto m = g.constant("m", xt::zeros<double>({3, 2}));
  check_error([&] { xgrad::apply_mask(x, m, 0.0); }, {"apply_mask (node 2)", "mask (3, 2)", "x (2, 3)"});
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_fill) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({1, 1}));
  const auto y = xgrad::apply_mask(x, x, -std::numeric_limits<double>::infinity());
  BOOST_TEST(to_json(g, ExportValues::none).dump().find("\"attrs\":{\"fill\":\"-inf\"}") != std::string::npos);
  BOOST_TEST(y.node().op->attrs()["fill"].get<double>() == -std::numeric_limits<double>::infinity());
}

BOOST_AUTO_TEST_SUITE_END()
