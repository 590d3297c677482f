#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(pad)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}, {3, 4}});
  BOOST_TEST(xgrad::pad(x, 1, 1, 2).value() == (xt::xarray<double>{{0, 1, 2, 0, 0}, {0, 3, 4, 0, 0}}));
  BOOST_TEST(xgrad::pad(x, 0, 0, 1).value() == (xt::xarray<double>{{1, 2}, {3, 4}, {0, 0}}));
  BOOST_TEST(xgrad::pad(x, -2, 2, 0).value() == (xt::xarray<double>{{0, 0}, {0, 0}, {1, 2}, {3, 4}}));
  BOOST_TEST(xgrad::pad(x, -1, 0, 0).value() == x.value());
  const auto v = g.input("v", xt::xarray<double>{1, 2});
  BOOST_TEST(xgrad::pad(v, 0, 1, 1).value() == (xt::xarray<double>{0, 1, 2, 0}));
}

BOOST_AUTO_TEST_CASE(pads_a_middle_axis_as_numpy_does) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  for (long axis : {1L, -2L}) {
    const auto y = xgrad::pad(x, axis, 2, 1);
    BOOST_TEST_REQUIRE(y.value().shape() == (std::vector<std::size_t>{2, 6, 4}), boost::test_tools::per_element());
    const xt::xarray<double> inside = xt::view(y.value(), xt::all(), xt::range(2, 5), xt::all());
    BOOST_TEST(inside == x.value());
    BOOST_TEST(xt::view(y.value(), xt::all(), xt::range(0, 2), xt::all()) == xt::zeros<double>({2, 2, 4}));
    BOOST_TEST(xt::view(y.value(), xt::all(), xt::range(5, 6), xt::all()) == xt::zeros<double>({2, 1, 4}));
  }
  Graph<float> f;
  const auto xf = f.input("x", xt::xarray<float>{{{1, 2}}, {{3, 4}}});  // (2, 1, 2)
  BOOST_TEST(xgrad::pad(xf, 1, 1, 0).value() == (xt::xarray<float>{{{0, 0}, {1, 2}}, {{0, 0}, {3, 4}}}));
}

BOOST_AUTO_TEST_CASE(empty_inputs_and_empty_axes) {
  Graph<double> g;
  // The padded axis of length 0: y is all padding.
  const auto z1 = g.input("z1", xt::xarray<double>::from_shape({2, 0, 3}));
  const auto y1 = xgrad::pad(z1, 1, 1, 1);
  BOOST_TEST(y1.value() == xt::xarray<double>(xt::zeros<double>({2, 2, 3})));
  BOOST_TEST(grad(y1, {z1})[0].value().shape() == z1.value().shape(), boost::test_tools::per_element());
  // A size-0 axis before or after the padded one: y is empty too.
  const auto z0 = g.input("z0", xt::xarray<double>::from_shape({0, 3}));
  BOOST_TEST(xgrad::pad(z0, 1, 2, 1).value().shape() == (std::vector<std::size_t>{0, 6}), boost::test_tools::per_element());
  const auto z2 = g.input("z2", xt::xarray<double>::from_shape({3, 0}));
  BOOST_TEST(xgrad::pad(z2, 0, 2, 1).value().shape() == (std::vector<std::size_t>{6, 0}), boost::test_tools::per_element());
  // Nothing at all: a (0,) padded by 0 and 0.
  const auto e = g.input("e", xt::xarray<double>::from_shape({0}));
  BOOST_TEST(xgrad::pad(e, 0, 0, 0).value().size() == 0u);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  check_gradients(xgrad::pad(x, 1, 2, 1), {x});
  check_gradients(xgrad::pad(x, 0, 0, 3), {x});
  check_gradients(xgrad::pad(x, -1, 1, 0), {x});
  // Second order: the VJP is a slice node, itself differentiable.
  const auto u = g.input("u", random_array<double>({2, 6, 4}, 3));
  check_gradients(grad(xgrad::pad(x, 1, 2, 1), {x}, u)[0], {x, u});
}

BOOST_AUTO_TEST_CASE(vjp_slices_grad_out) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}, {3, 4}});
  const auto u = g.input("u", {{10, 20, 30, 40}, {50, 60, 70, 80}});
  const auto gx = grad(xgrad::pad(x, -1, 1, 1), {x}, u)[0];
  BOOST_TEST(gx.node().op_name() == "slice");
  BOOST_TEST(gx.node().op->attrs().dump() == R"({"axis":-1,"begin":1,"end":3})");
  BOOST_TEST(gx.value() == (xt::xarray<double>{{20, 30}, {60, 70}}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes_and_sizes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::pad(x, 2, 1, 1); }, {"pad (node 1)", "axis 2 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::pad(x, -3, 1, 1); }, {"pad (node 1)", "axis -3 is out of range for a (2, 3) input"});
  const auto s = g.input("s", xt::xarray<double>(5.0));  // rank 0: no axis to pad
  check_error([&] { xgrad::pad(s, 0, 1, 1); }, {"pad (node", "axis 0 is out of range for a () input"});
  // Within the limit along the axis, but not in all: 2 x 2^27 elements.
  check_error([&] { xgrad::pad(x, 1, std::size_t(1) << 27, 0); },
              {"pad (node", "padding axis 1 of x (2, 3) by 134217728 before and 0 after makes more than 268435456 elements"});
  // before + n + after would wrap around std::size_t.
  const std::size_t huge = std::numeric_limits<std::size_t>::max();
  check_error([&] { xgrad::pad(x, -1, huge, huge); }, {"pad (node", "padding axis -1 of x (2, 3) by " + std::to_string(huge)});
  check_error([&] { xgrad::pad(x, -1, 1, huge - 3); }, {"pad (node", "makes more than 268435456 elements"});
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 4));
  const auto y = xgrad::pad(x, -2, 1, 2);
  grad(y, {x});
  check_attrs_round_trip(y, "pad", R"({"axis":-2,"before":1,"after":2})");
}

BOOST_AUTO_TEST_CASE(import_rejects_negative_and_missing_attrs) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  xgrad::pad(x, 1, 1, 1);
  const Json j = to_json(g, ExportValues::all);
  check_refuses_bad_attrs(j, 1, {"before", "after"});
}

BOOST_AUTO_TEST_SUITE_END()
