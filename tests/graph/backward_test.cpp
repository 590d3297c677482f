#include "../check.hpp"

using namespace xgrad;
using xgrad::test::check_error;
using xgrad::test::check_gradients;
using xgrad::test::random_array;

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

BOOST_AUTO_TEST_CASE(backward_nodes_say_whose_gradient_they_are) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const auto s = scale(x, 2.0);
  const std::size_t before = g.size();
  const auto gx = grad(s, {x})[0];
  BOOST_TEST(g.size() > before);
  for (std::size_t i = before; i < g.size(); ++i) {
    BOOST_TEST(g.node(i).grad_of.has_value());
    BOOST_TEST(*g.node(i).grad_of <= s.id());
  }
  BOOST_TEST(role_name(gx.node().role) == std::string("backward"));
  BOOST_TEST(*gx.node().grad_of == s.id());  // built by scale's VJP rule
  BOOST_TEST(!g.node(s.id()).grad_of.has_value());
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

BOOST_AUTO_TEST_SUITE_END()
