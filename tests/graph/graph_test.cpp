#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(graph)

BOOST_AUTO_TEST_CASE(nodes_are_numbered_in_creation_order) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}});
  const auto b = g.parameter("b", xt::xarray<double>{{3, 4}});
  const auto c = g.constant("c", xt::xarray<double>{{5, 6}});
  const auto y = add(mul(a, b), c);
  BOOST_TEST(a.id() == 0u);
  BOOST_TEST(b.id() == 1u);
  BOOST_TEST(c.id() == 2u);
  BOOST_TEST(y.id() == 4u);
  BOOST_TEST(&y.graph() == &g);
  BOOST_TEST(g.size() == 5u);
  BOOST_TEST(g.node(0).op_name() == "input");
  BOOST_TEST(g.node(1).op_name() == "parameter");
  BOOST_TEST(g.node(2).op_name() == "constant");
  BOOST_TEST(g.node(3).op_name() == "mul");
  BOOST_TEST(g.node(4).op_name() == "add");
  BOOST_TEST(role_name(g.node(4).role) == std::string("forward"));
  BOOST_TEST((g.node(4).inputs == std::vector<std::size_t>{3, 2}));
  BOOST_TEST(y.value() == (xt::xarray<double>{{8, 14}}));
}

BOOST_AUTO_TEST_CASE(values_stay_put_as_the_graph_grows) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({4, 4}, 1));
  const xt::xarray<double>* first = &x.value();
  Var<double> y = x;
  for (int i = 0; i < 1000; ++i) y = scale(y, 1.0);
  BOOST_TEST(first == &x.value());
  BOOST_TEST(y.value() == x.value());
}

BOOST_AUTO_TEST_CASE(replay_recomputes_after_set_value) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}});
  const auto b = g.input("b", {{3, 4}});
  const auto y = mul(a, b);
  const auto gy = grad(y, {a})[0];
  g.set_value(a, xt::xarray<double>{{10, 20}});
  g.set_value(b, xt::xarray<double>{{-1, 0.5}});
  g.replay();
  BOOST_TEST(y.value() == (xt::xarray<double>{{-10, 10}}));
  BOOST_TEST(gy.value() == (xt::xarray<double>{{-1, 0.5}}));  // backward nodes replay too
}

BOOST_AUTO_TEST_CASE(copy_from_converts_dtype_and_keeps_ids) {
  Graph<float> g;
  const auto a = g.input("a", {{1.5f, 2}});
  const auto y = scale(a, 0.1);
  Graph<double> d;
  d.copy_from(g, g.size());
  BOOST_TEST(d.size() == 2u);
  BOOST_TEST(d.node(1).op == g.node(1).op);  // ops are shared, not copied
  d.set_value(d.var(0), xt::xarray<double>{{1.5, 2}});
  d.replay();
  BOOST_TEST(d.node(1).value(0, 0) == 1.5 * 0.1);  // computed in double
  BOOST_TEST(y.value()(0, 0) == 1.5f * 0.1f);
}

BOOST_AUTO_TEST_CASE(rejects_bad_use) {
  Graph<double> g, other;
  const auto a = g.input("a", {{1, 2}});
  const auto b = other.input("b", {{1, 2}});
  const auto y = scale(a, 2.0);
  check_error([&] { add(a, b); }, {"add (node 2)", "input 1 (node 0) belongs to another graph"});
  check_error([&] { add(a, Var<double>()); }, {"add (node 2)", "input 1 is an empty Var"});
  check_error([&] { g.set_value(a, xt::zeros<double>({2, 1})); }, {"set_value", "'a'", "(1, 2)", "(2, 1)"});
  check_error([&] { g.set_value(y, xt::zeros<double>({1, 2})); }, {"set_value", "node 1", "scale", "leaves"});
  check_error([&] { g.node(7); }, {"no node 7", "2 nodes"});
  check_error([&] { Var<double>().value(); }, {"empty"});
  check_error([&] { g.input("m", {{1, 2}, {3}}); }, {"rows of different lengths"});
  check_error([&] { Graph<double> d; d.copy_from(g, 3); }, {"3 nodes", "graph of 2"});
}

BOOST_AUTO_TEST_SUITE_END()
