#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(slice)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3, 4}, {5, 6, 7, 8}});
  BOOST_TEST(xgrad::slice(x, 1, 1, 3).value() == (xt::xarray<double>{{2, 3}, {6, 7}}));
  BOOST_TEST(xgrad::slice(x, 0, 1, 2).value() == (xt::xarray<double>{{5, 6, 7, 8}}));
  BOOST_TEST(xgrad::slice(x, -1, 3, 4).value() == matrix<double>({{4}, {8}}));
  BOOST_TEST(xgrad::slice(x, -2, 0, 2).value() == x.value());  // the whole axis
  const auto v = g.input("v", xt::xarray<double>{1, 2, 3, 4, 5});
  BOOST_TEST(xgrad::slice(v, 0, 2, 5).value() == (xt::xarray<double>{3, 4, 5}));
}

BOOST_AUTO_TEST_CASE(slices_a_middle_axis_as_a_view_does) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 5, 3}, 1));
  const xt::xarray<double> expected = xt::view(x.value(), xt::all(), xt::range(1, 4), xt::all());
  BOOST_TEST(xgrad::slice(x, 1, 1, 4).value() == expected);
  BOOST_TEST(xgrad::slice(x, -2, 1, 4).value() == expected);
  Graph<float> f;
  const auto xf = f.input("x", random_array<float>({2, 5, 3}, 1));
  const xt::xarray<float> expected_f = xt::view(xf.value(), xt::all(), xt::range(2, 5), xt::all());
  BOOST_TEST(xgrad::slice(xf, 1, 2, 5).value() == expected_f);
}

BOOST_AUTO_TEST_CASE(empty_slices_and_empty_axes) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  const auto e = xgrad::slice(x, 1, 2, 2);  // begin == end
  BOOST_TEST(e.value().shape() == (std::vector<std::size_t>{2, 0, 4}), boost::test_tools::per_element());
  BOOST_TEST(grad(xgrad::sum(e), {x})[0].value() == xt::xarray<double>(xt::zeros<double>({2, 3, 4})));
  // A size-0 axis before, at and after the sliced one.
  const auto z0 = g.input("z0", xt::xarray<double>::from_shape({0, 3, 4}));
  BOOST_TEST(xgrad::slice(z0, 1, 1, 3).value().shape() == (std::vector<std::size_t>{0, 2, 4}),
             boost::test_tools::per_element());
  const auto z1 = g.input("z1", xt::xarray<double>::from_shape({2, 0, 4}));
  BOOST_TEST(xgrad::slice(z1, 1, 0, 0).value().shape() == (std::vector<std::size_t>{2, 0, 4}),
             boost::test_tools::per_element());
  const auto z2 = g.input("z2", xt::xarray<double>::from_shape({2, 3, 0}));
  const auto y2 = xgrad::slice(z2, 1, 1, 3);
  BOOST_TEST(y2.value().shape() == (std::vector<std::size_t>{2, 2, 0}), boost::test_tools::per_element());
  BOOST_TEST(grad(xgrad::sum(y2), {z2})[0].value().shape() == z2.value().shape(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 5, 3}, 3));
  check_gradients(xgrad::slice(x, 1, 1, 4), {x});
  check_gradients(xgrad::slice(x, 0, 1, 2), {x});
  check_gradients(xgrad::slice(x, -1, 0, 2), {x});
  // Second order: the VJP is a pad node, itself differentiable.
  const auto u = g.input("u", random_array<double>({2, 3, 3}, 4));
  check_gradients(grad(xgrad::slice(x, 1, 1, 4), {x}, u)[0], {x, u});
}

BOOST_AUTO_TEST_CASE(vjp_pads_grad_out_with_zeros) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3, 4}, {5, 6, 7, 8}});
  const auto u = g.input("u", {{10, 20}, {30, 40}});
  const auto gx = grad(xgrad::slice(x, -1, 1, 3), {x}, u)[0];
  BOOST_TEST(gx.node().op_name() == "pad");
  BOOST_TEST(gx.node().op->attrs().dump() == R"({"axis":-1,"before":1,"after":1})");
  BOOST_TEST(gx.value() == (xt::xarray<double>{{0, 10, 20, 0}, {0, 30, 40, 0}}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_ranges) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::slice(x, 2, 0, 1); }, {"slice (node 1)", "axis 2 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::slice(x, -3, 0, 1); }, {"slice (node 1)", "axis -3 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::slice(x, 1, 2, 1); }, {"slice (node 1)", "begin 2 is after end 1 on axis 1 of x (2, 3)"});
  check_error([&] { xgrad::slice(x, -1, 1, 4); }, {"slice (node 1)", "end 4 is past axis -1 of x (2, 3), of length 3"});
  const auto s = g.input("s", xt::xarray<double>(5.0));  // rank 0: no axis to slice
  check_error([&] { xgrad::slice(s, 0, 0, 0); }, {"slice (node", "axis 0 is out of range for a () input"});
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 5, 3}, 5));
  const auto y = xgrad::slice(x, -2, 1, 4);
  grad(y, {x});
  check_attrs_round_trip(y, "slice", R"({"axis":-2,"begin":1,"end":4})");
}

BOOST_AUTO_TEST_CASE(import_rejects_negative_and_missing_attrs) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  xgrad::slice(x, 1, 0, 2);
  const Json j = to_json(g, ExportValues::all);
  check_refuses_bad_attrs(j, 1, {"begin", "end"});
  check_refuses_attr(j, 1, "end", 9, "nodes[1]: slice: end 9 is past axis 1 of x (2, 3)");
}

BOOST_AUTO_TEST_SUITE_END()
