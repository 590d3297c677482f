#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(operators)

BOOST_AUTO_TEST_CASE(build_the_nodes_of_the_named_functions) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}, {3, 4}});
  const auto b = g.input("b", xt::xarray<double>{10, 20});  // broadcast over the rows
  const std::pair<Var<double>, const char*> cases[] = {{a + b, "add"}, {a - b, "sub"}, {a * b, "mul"},
                                                       {a / b, "div"}, {-a, "neg"}};
  for (const auto& [y, op] : cases) BOOST_TEST(y.node().op_name() == op);
  BOOST_TEST((a + b).value() == xgrad::add(a, b).value());
  BOOST_TEST((a - b).value() == (xt::xarray<double>{{-9, -18}, {-7, -16}}));
  BOOST_TEST((a * b).value() == (xt::xarray<double>{{10, 40}, {30, 80}}));
  BOOST_TEST((b / a).value() == (xt::xarray<double>{{10, 10}, {10.0 / 3, 5}}));
  BOOST_TEST((-a).value() == (xt::xarray<double>{{-1, -2}, {-3, -4}}));
}

BOOST_AUTO_TEST_CASE(a_double_times_a_var_is_a_scale_node) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const std::size_t before = g.size();
  for (const auto& y : {x * 0.5, 0.5 * x}) {
    BOOST_TEST(y.node().op_name() == "scale");
    BOOST_TEST(y.node().op->attrs().dump() == R"({"alpha":0.5})");
    BOOST_TEST(y.value() == (xt::xarray<double>{{0.5, 1}}));
  }
  BOOST_TEST(g.size() == before + 2);  // no constant
}

BOOST_AUTO_TEST_CASE(a_double_beside_plus_minus_or_divide_is_a_scalar_constant) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const auto check = [&](const Var<double>& y, const char* op, bool constant_first, const xt::xarray<double>& want) {
    BOOST_TEST(y.node().op_name() == op);
    const Node<double>& c = g.node(y.node().inputs[constant_first ? 0 : 1].node);
    BOOST_TEST(c.op_name() == "constant");
    BOOST_TEST(c.name.empty());
    BOOST_TEST(c.value().dimension() == 0u);
    BOOST_TEST(y.value() == want);
  };
  check(x + 1.0, "add", false, {{2, 3}});
  check(1.0 + x, "add", true, {{2, 3}});
  check(x - 1.0, "sub", false, {{0, 1}});
  check(1.0 - x, "sub", true, {{0, -1}});
  check(x / 4.0, "div", false, {{0.25, 0.5}});
  check(2.0 / x, "div", true, {{2, 1}});
  // x / 3 divides (as PyTorch), which x * (1 / 3) would not: 1 / 3 rounds first.
  const auto three = g.input("three", xt::xarray<double>{3.0, 6.0});
  BOOST_TEST((three / 3.0).value() == (xt::xarray<double>{1.0, 2.0}));
  // In float32 the double is rounded to float, as PyTorch casts a Python scalar.
  Graph<float> f;
  const auto xf = f.input("x", xt::xarray<float>{1.0f});
  BOOST_TEST((xf + 0.1).value()(0) == 1.0f + 0.1f);
}

BOOST_AUTO_TEST_CASE(expressions_differentiate_and_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3}, 1));
  const auto w = g.input("w", random_array<double>({3}, 2));
  const auto y = (1.0 - x) * w / (2.0 + x * x) - 0.5 * -x;
  check_gradients(y, {x, w});
  g.set_output("y", y);
  grad(y, {x, w});
  const auto copy = graph_from_json<double>(to_json(g, ExportValues::all).dump());
  copy->replay();
  for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(same_bits(copy->node(i).value(), g.node(i).value()), "node " << i);
}

BOOST_AUTO_TEST_CASE(vars_of_two_graphs_do_not_combine) {
  Graph<double> g, h;
  const auto a = g.input("a", {{1}});
  const auto b = h.input("b", {{2}});
  check_error([&] { a + b; }, {"add (node 1): input 1 (node 0) belongs to another graph"});
}

BOOST_AUTO_TEST_SUITE_END()
