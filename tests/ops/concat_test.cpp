#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(concat)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // numpy.concatenate: along the first, the last and a negative axis; one input is a copy.
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}, {3, 4}});
  const auto b = g.input("b", {{5, 6}});
  const auto c = g.input("c", {{7}, {8}});
  BOOST_TEST(xgrad::concat(std::vector<Var<double>>{a, b}, 0).value() == (xt::xarray<double>{{1, 2}, {3, 4}, {5, 6}}));
  BOOST_TEST(xgrad::concat(std::vector<Var<double>>{a, c, a}, -1).value() ==
             (xt::xarray<double>{{1, 2, 7, 1, 2}, {3, 4, 8, 3, 4}}));
  BOOST_TEST(xgrad::concat(std::vector<Var<double>>{a}, 1).value() == a.value());
  // A middle axis of a rank-3 input, and a part of length 0.
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto y = g.input("y", random_array<double>({2, 1, 4}, 2));
  const auto e = g.input("e", xt::xarray<double>::from_shape({2, 0, 4}));
  const auto z = xgrad::concat(std::vector<Var<double>>{x, e, y}, 1);
  BOOST_TEST_REQUIRE(z.value().shape() == (std::vector<std::size_t>{2, 4, 4}), boost::test_tools::per_element());
  BOOST_TEST(xt::xarray<double>(xt::view(z.value(), xt::all(), xt::range(0, 3), xt::all())) == x.value());
  BOOST_TEST(xt::xarray<double>(xt::view(z.value(), xt::all(), xt::range(3, 4), xt::all())) == y.value());
  Graph<float> f;
  const auto p = f.input("p", xt::xarray<float>{1, 2});
  const auto q = f.input("q", xt::xarray<float>{3});
  BOOST_TEST(xgrad::concat(std::vector<Var<float>>{p, q}, 0).value() == (xt::xarray<float>{1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 3));
  const auto y = g.input("y", random_array<double>({2, 2, 4}, 4));
  check_gradients(xgrad::concat(std::vector<Var<double>>{x, y, x}, 1), {x, y});
  check_gradients(xgrad::concat(std::vector<Var<double>>{y, x}, -2), {x, y});
  // Second order: the VJP is slice nodes, themselves differentiable.
  const auto u = g.input("u", random_array<double>({2, 5, 4}, 5));
  const auto grads = grad(xgrad::concat(std::vector<Var<double>>{x, y}, 1), {x, y}, u);
  check_gradients(grads[0], {x, y, u});
  check_gradients(grads[1], {x, y, u});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_naming_every_input) {
  Graph<double> g;
  const auto a = g.input("a", xt::xarray<double>::from_shape({2, 3}));
  const auto b = g.input("b", xt::xarray<double>::from_shape({4, 3}));
  const auto r = g.input("r", xt::xarray<double>::from_shape({2, 3, 1}));
  const auto s = g.input("s", xt::xarray<double>(1.0));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::concat(std::vector<Var<double>>{a, b}, 1); },
              {"concat (node 4): the inputs must agree on every axis but axis 1: they are (2, 3), (4, 3)"});
  check_error([&] { xgrad::concat(std::vector<Var<double>>{a, r}, 0); }, {"concat (node 4): the inputs must agree", "(2, 3), (2, 3, 1)"});
  check_error([&] { xgrad::concat(std::vector<Var<double>>{a, b}, 2); }, {"concat (node 4): axis 2 is out of range for a (2, 3) input"});
  check_error([&] { xgrad::concat(std::vector<Var<double>>{s, s}, 0); }, {"concat (node 4): the inputs must have rank >= 1: they are (), ()"});
  check_error([&] { xgrad::concat(std::vector<Var<double>>{}, 0); }, {"concat: takes at least one input, got none"});
  BOOST_TEST(g.size() == nodes);  // nothing added
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}});
  check_attrs_round_trip(xgrad::concat(std::vector<Var<double>>{a, a, a}, -1), "concat", R"({"axis":-1,"count":3})");
  // The count a file gives is bounded: a file cannot make an op of millions of inputs.
  check_error([] { make_concat_op(JsonCursor(Json::parse(R"({"axis": 0, "count": 0})"), "attrs")); }, {"concat: takes 1 to 65536 inputs, got 0"});
  check_error([] { make_concat_op(JsonCursor(Json::parse(R"({"axis": 0, "count": 70000})"), "attrs")); }, {"concat: takes 1 to 65536 inputs, got 70000"});
}

BOOST_AUTO_TEST_SUITE_END()
