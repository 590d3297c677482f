#include "../check.hpp"
#include "../pick_op.hpp"

#include <xgrad/graph/backward.hpp>

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
  BOOST_TEST((g.node(4).inputs == std::vector<Slot>{{3, 0}, {2, 0}}));
  BOOST_TEST(y.value() == (xt::xarray<double>{{8, 14}}));
}

BOOST_AUTO_TEST_CASE(parameters_are_every_parameter_leaf_in_creation_order) {
  Graph<double> g;
  BOOST_TEST(g.parameters().empty());
  const auto x = g.input("x", {{1, 2}});
  const auto w = g.parameter("w", xt::xarray<double>{{3, 4}});
  g.constant("c", xt::xarray<double>{{5, 6}});
  const auto y = mul(x, w);
  const auto b = g.parameter("b", xt::xarray<double>{{7, 8}});
  add(y, b);
  const auto params = g.parameters();
  BOOST_TEST(params.size() == 2u);
  BOOST_TEST(params[0].id() == w.id());
  BOOST_TEST(params[1].id() == b.id());
  BOOST_TEST(&params[1].graph() == &g);
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
  BOOST_TEST(d.node(1).value()(0, 0) == 1.5 * 0.1);  // computed in double
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

// An op with two outputs: (x + x, x * x), each with its own VJP term.
struct TwoOutputs final : OpFor<TwoOutputs, 2> {
  std::string name() const override { return "two_outputs"; }
  std::size_t arity() const override { return 1; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override { return {x[0], x[0]}; }
  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    *y[0] = *x[0] + *x[0];
    *y[1] = *x[0] * *x[0];
  }
  // d/dx: 2 grad_outs[0] + 2 x grad_outs[1], each term only where a gradient flows.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    Var<T> sum;
    if (a.grad_outs[0].valid()) sum = scale(a.grad_outs[0], 2.0);
    if (a.grad_outs[1].valid()) {
      const Var<T> term = scale(mul(a.x[0], a.grad_outs[1]), 2.0);
      sum = sum.valid() ? add(sum, term) : term;
    }
    return {sum};
  }
};

BOOST_AUTO_TEST_CASE(a_node_may_have_several_outputs) {
  Graph<double> g;
  const auto x = g.input("x", {{1.5, -2}});
  const auto ys = g.apply_outputs(std::make_shared<TwoOutputs>(), {x});
  BOOST_TEST_REQUIRE(ys.size() == 2u);
  BOOST_TEST(ys[0].id() == ys[1].id());
  BOOST_TEST(ys[1].output() == 1u);
  BOOST_TEST(g.node(1).output_count() == 2u);
  BOOST_TEST(ys[0].value()(0, 1) == -4.0);
  BOOST_TEST(ys[1].value()(0, 1) == 4.0);
  BOOST_TEST(g.apply(std::make_shared<TwoOutputs>(), {x}).output() == 0u);  // apply: the first output
  // A gradient through one output only: the VJP sees an empty grad_out for the other.
  BOOST_TEST(grad(ys[1], {x})[0].value()(0, 0) == 3.0);
  BOOST_TEST(grad(ys[0], {x})[0].value()(0, 0) == 2.0);
  // Through both, and from an output used as an input.
  const auto both = add(ys[0], mul(ys[1], ys[1]));
  const auto gx = grad(both, {x})[0];
  BOOST_TEST(gx.value()(0, 0) == 2 + 4 * 1.5 * 1.5 * 1.5);
  BOOST_TEST(gx.node().grad_of()->node == x.id());
  check_gradients(both, {x});
  // Both outputs replay, and a lean replay keeps a kept output's node whole.
  g.set_value(x, xt::xarray<double>{{3, 1}});
  g.replay();
  BOOST_TEST(ys[1].value()(0, 0) == 9.0);
  g.keep_only({ys[1]});
  g.set_value(x, xt::xarray<double>{{2, 1}});
  g.replay();
  BOOST_TEST(ys[1].value()(0, 0) == 4.0);
  BOOST_TEST(ys[0].value()(0, 0) == 4.0);
  check_error([&] { g.var(1, 2); }, {"graph: node 1 (two_outputs) has no output 2 (it has 2)"});
}

BOOST_AUTO_TEST_CASE(backward_takes_several_ys) {
  // The gradient of sum(grad_out_0 * y0) + sum(grad_out_1 * y1): the two seeds of one node.
  Graph<double> g;
  const auto x = g.input("x", {{1.5, -2}});
  const auto ys = g.apply_outputs(std::make_shared<TwoOutputs>(), {x});
  const auto g0 = g.constant("g0", xt::xarray<double>{{1, 10}});
  const auto g1 = g.constant("g1", xt::xarray<double>{{100, 1000}});
  const Accumulate<double> sum = sum_contributions<double>;
  const auto gx = backward<double>(ys, {x}, {g0, g1}, sum)[0];
  BOOST_TEST(gx.value()(0, 0) == 2 * 1 + 2 * 1.5 * 100);
  BOOST_TEST(gx.value()(0, 1) == 2 * 10 + 2 * -2.0 * 1000);
  const auto only_second = backward<double>(ys, {x}, {Var<double>(), g1}, sum)[0];
  BOOST_TEST(only_second.value()(0, 0) == 2 * 1.5 * 100);
  check_error([&] { backward<double>(ys, {x}, {g0}, sum); }, {"grad: 1 grad_outs for 2 ys"});
}

BOOST_AUTO_TEST_CASE(index_leaves_hold_int64_values) {
  Graph<double> g;
  const auto table = g.parameter("table", xt::xarray<double>{{1, 2}, {3, 4}, {5, 6}});
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{2, 0, 2});
  BOOST_TEST(ids.node().index_leaf);
  BOOST_TEST(ids.node().op_name() == "indices");
  BOOST_TEST((ids.shape() == Shape{3}));
  const auto rows = test::pick(table, ids);
  BOOST_TEST(rows.value()(0, 1) == 6.0);
  // Replaced per batch, with the leaf's shape; never differentiated.
  g.set_value(ids, xt::xarray<std::int64_t>{1, 1, 0});
  g.replay();
  BOOST_TEST(rows.value()(0, 0) == 3.0);
  check_error([&] { g.set_value(ids, xt::xarray<std::int64_t>{1, 1}); }, {"set_value: node 1 ('ids') is (3,), the new value is (2,)"});
  check_error([&] { g.set_value(ids, xt::xarray<double>{1, 1, 0}); }, {"set_value: node 1 ('ids') is an index leaf: its new value is int64 indices"});
  check_error([&] { ids.value(); }, {"node 1 ('ids') is an index leaf"});
  check_error([&] { table.indices(); }, {"node 0 ('table') (parameter) holds no indices"});
  check_error([&] { grad(scale(table, 2.0), {ids}); }, {"grad: x[0] (node 1, 'ids') is an index leaf"});
  check_error([&] { scale(ids, 2.0); }, {"input 0 (node 1 ('ids')) is an index leaf (int64); scale takes float64 values there"});
  // copy_from keeps them.
  Graph<float> f;
  f.copy_from(g, 2);
  BOOST_TEST((f.var(1).indices() == ids.indices()));
}

BOOST_AUTO_TEST_CASE(forward_value_errors_name_the_node_also_from_worker_threads) {
  // An id out of range in the last rows: with two threads, the chunk that meets it runs on a
  // worker; its throw reaches the caller with the node named, and no node is added.
  test::BlasThreads two(2);
  Graph<double> g;
  const auto table = g.parameter("table", xt::xarray<double>(xt::ones<double>({4, 64})));
  xt::xarray<std::int64_t> bad = xt::zeros<std::int64_t>({4096});
  bad(4090) = 9;
  const auto ids = g.indices("ids", bad);
  const std::size_t before = g.size();
  check_error([&] { test::pick(table, ids); }, {"pick (node 2): id 9 at [4090] is out of range for a table of 4 rows"});
  BOOST_TEST(g.size() == before);
  // In a replay too, and the graph stays usable.
  g.set_value(ids, xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({4096})));
  const auto rows = test::pick(table, ids);
  g.set_value(ids, bad);
  check_error([&] { g.replay(); }, {"pick (node 2): id 9 at [4090]"});
  g.set_value(ids, xt::xarray<std::int64_t>(xt::ones<std::int64_t>({4096})));
  g.replay();
  BOOST_TEST(rows.value()(4090, 0) == 1.0);
}

BOOST_AUTO_TEST_CASE(time_nodes_adds_each_forward_time_to_its_node) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({200, 300}, 1));
  const auto w = g.input("w", random_array<double>({300, 100}, 2));
  const auto y = xgrad::sum(xgrad::relu(xgrad::matmul(x, w)));
  std::vector<double> seconds;
  g.time_nodes(&seconds);
  g.replay();
  BOOST_TEST_REQUIRE(seconds.size() == g.size());
  BOOST_TEST(seconds[x.id()] == 0.0);  // leaves run nothing
  BOOST_TEST(seconds[w.id()] == 0.0);
  for (std::size_t id = 2; id < g.size(); ++id) BOOST_TEST(seconds[id] > 0.0, "node " << id);
  const std::vector<double> once = seconds;
  g.replay();  // adds to what is there
  for (std::size_t id = 2; id < g.size(); ++id) BOOST_TEST(seconds[id] > once[id], "node " << id);
  const auto z = xgrad::scale(y, 2.0);  // a new node is timed too, growing the vector
  BOOST_TEST_REQUIRE(seconds.size() == g.size());
  BOOST_TEST(seconds[z.id()] > 0.0);
  g.time_nodes(nullptr);
  const std::vector<double> stopped = seconds;
  g.replay();
  BOOST_TEST(seconds == stopped);
}

BOOST_AUTO_TEST_SUITE_END()
