#include "../check.hpp"

#include <xgrad/graph/backward.hpp>

BOOST_AUTO_TEST_SUITE(backward)

BOOST_AUTO_TEST_CASE(grad_out_defaults_to_ones) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}, {3, 4}});
  const auto w = g.input("w", {{1, -1}, {2, 0.5}});
  const auto y = matmul(x, w);
  const auto by_default = grad(y, {x})[0];
  const auto with_ones = grad(y, {x}, xt::xarray<double>(xt::ones<double>({2, 2})))[0];
  const xt::xarray<double> expected = {{0, 2.5}, {0, 2.5}};  // ones @ w^T
  BOOST_TEST(by_default.value() == expected);
  BOOST_TEST(with_ones.value() == expected);
}

BOOST_AUTO_TEST_CASE(contributions_to_a_reused_node_are_summed) {
  // y = x * x + 3 x: dy/dx = 2 x + 3, three contributions to x.
  Graph<double> g;
  const auto x = g.input("x", {{1, -2, 0.5}});
  const auto y = add(mul(x, x), scale(x, 3.0));
  const xt::xarray<double> expected = {{5, -1, 4}};
  BOOST_TEST(grad(y, {x})[0].value() == expected);
}

BOOST_AUTO_TEST_CASE(the_walk_can_stop_at_the_xs) {
  // y = b * a with b = 2 a. Through b: dy/da = b + 2 a = 4 a. Stopping at b, a partial: dy/da = b.
  Graph<double> g;
  const auto a = g.input("a", {{1, -2, 0.5}});
  const auto b = scale(a, 2.0);
  const auto y = mul(b, a);
  const auto ones = g.constant("ones", xt::ones<double>({1, 3}));
  const Accumulate<double> sum = [](const Var<double>& l, const Var<double>& r) { return add(l, r); };
  const auto total = xgrad::backward(y, {a, b}, ones, sum);
  const auto partial = xgrad::backward(y, {a, b}, ones, sum, false);
  BOOST_TEST(total[0].value() == (xt::xarray<double>{{4, -8, 2}}));
  BOOST_TEST(partial[0].value() == (xt::xarray<double>{{2, -4, 1}}));
  BOOST_TEST(total[1].value() == a.value());
  BOOST_TEST(partial[1].value() == a.value());
}

BOOST_AUTO_TEST_CASE(gradients_say_whose_gradient_they_are) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3}, {4, 3}, {4, 2}, 1);
  const auto a = attention_nodes(q, k, v);
  const std::size_t forward_nodes = g.size();
  const auto grads = grad(a.output, {q, k, v});
  BOOST_TEST(grads[0].node().grad_of()->node == q.id());
  BOOST_TEST(grads[1].node().grad_of()->node == k.id());
  BOOST_TEST(grads[2].node().grad_of()->node == v.id());
  for (std::size_t i = 0; i < forward_nodes; ++i) BOOST_TEST(!g.node(i).in_backward());
  std::size_t seeds = 0, softmax_vjps = 0;
  for (std::size_t i = forward_nodes; i < g.size(); ++i) {
    const Node<double>& n = g.node(i);
    BOOST_TEST(n.in_backward());
    if (n.is_leaf()) {
      ++seeds;
      BOOST_TEST(n.grad_of()->node == a.output.id());  // grad_out, the gradient of the output
    } else {
      BOOST_TEST(role_name(n.role) == std::string("backward"));
    }
    if (n.op_name() == "softmax_vjp") {
      ++softmax_vjps;
      BOOST_TEST(n.grad_of()->node == a.scores.id());  // the gradient w.r.t. softmax's input
      BOOST_TEST(n.inputs[0].node == a.weights.id());
    }
  }
  BOOST_TEST(seeds == 1u);
  BOOST_TEST(softmax_vjps == 1u);
}

BOOST_AUTO_TEST_CASE(intermediate_nodes_of_a_vjp_rule_are_no_gradient) {
  // softmax_vjp's own VJP builds sums and broadcasts on the way to its two results.
  Graph<double> g;
  const auto y = g.input("y", random_array<double>({2, 3}, 4));
  const auto go = g.input("g", random_array<double>({2, 3}, 5));
  const auto z = softmax_vjp(y, go);
  const std::size_t before = g.size();
  const auto grads = grad(z, {y, go});
  BOOST_TEST(grads[0].node().grad_of()->node == y.id());
  BOOST_TEST(grads[1].node().grad_of()->node == go.id());
  std::size_t intermediates = 0;
  for (std::size_t i = before; i < g.size(); ++i) intermediates += !g.node(i).grad_of().has_value();
  BOOST_TEST(intermediates > 0u);
}

BOOST_AUTO_TEST_CASE(accumulated_gradients_name_the_reused_node) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 2}, 6));
  const auto gx = grad(attention(x, x, x), {x})[0];
  BOOST_TEST(gx.node().op_name() == "add");
  BOOST_TEST(gx.node().grad_of()->node == x.id());
  BOOST_TEST(g.node(gx.node().inputs[0].node).grad_of()->node == x.id());  // the contributions, too
  BOOST_TEST(g.node(gx.node().inputs[1].node).grad_of()->node == x.id());
}

BOOST_AUTO_TEST_CASE(unrelated_inputs_get_zeros) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const auto z = g.input("z", {{3, 4, 5}});
  const auto y = scale(x, 2.0);
  const auto grads = grad(y, {x, z, y});
  BOOST_TEST(grads[1].value() == (xt::xarray<double>{{0, 0, 0}}));
  BOOST_TEST(grads[2].value() == (xt::xarray<double>{{1, 1}}));  // dy/dy
}

BOOST_AUTO_TEST_CASE(grad_of_grad_matches_finite_differences) {
  // f = sum(softmax(x) * c); its gradient g(x) is differentiated again.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 5}, 1));
  const auto c = g.input("c", random_array<double>({2, 5}, 2));
  const auto f = mul(softmax(x), c);
  const auto gx = grad(f, {x})[0];
  check_gradients(gx, {x, c});
  const auto ggx = grad(gx, {x})[0];  // third order
  check_gradients(ggx, {x, c});
}

BOOST_AUTO_TEST_CASE(rejects_bad_arguments) {
  Graph<double> g, other;
  const auto x = g.input("x", {{1, 2}});
  const auto y = scale(x, 2.0);
  const auto alien = other.input("alien", {{1, 2}});
  check_error([&] { grad(y, {x}, xt::xarray<double>(xt::ones<double>({2, 1}))); },
              {"grad_out is (2, 1)", "y (node 1) is (1, 2)"});
  check_error([&] { grad(y, {alien}); }, {"x[0] (node 0) belongs to another graph"});
  check_error([&] { grad(y, {x}, alien); }, {"grad_out (node 0) belongs to another graph"});
  check_error([&] { grad(Var<double>(), {x}); }, {"y is an empty Var"});
  check_error([&] { grad(y, {Var<double>()}); }, {"x[0] is an empty Var"});
  BOOST_TEST(g.size() == 2u);  // a rejected grad() adds no seed node
}

// Issue 15 (class 8): grad() after keep_only fails where the walk reads a released value; it
// left the seed and the scale node built before the failure, two backward nodes, in the graph.
// A failed grad adds no node.
BOOST_AUTO_TEST_CASE(a_failed_grad_adds_no_node) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const auto s = mul(x, x);
  const auto y = scale(s, 3.0);  // its VJP builds scale(grad_out) before s's value is read
  g.keep_only({y});
  const std::size_t nodes = g.size();
  check_error([&] { grad(y, {x}); }, {"node 1 (mul) has no value: keep_only released it"});
  BOOST_TEST(g.size() == nodes);
  const auto seed = g.constant("seed", xt::ones<double>({1, 2}));
  check_error([&] { grad(y, {x}, seed); }, {"node 1 (mul) has no value"});
  BOOST_TEST(g.size() == nodes + 1);  // the caller's seed stays, nothing of the pass
  // The graph is whole: keep_all, replay, and the gradient is 3 * 2 x.
  g.keep_all();
  g.replay();
  BOOST_TEST(grad(y, {x})[0].value() == (xt::xarray<double>{{6, 12}}));
}

BOOST_AUTO_TEST_SUITE_END()
