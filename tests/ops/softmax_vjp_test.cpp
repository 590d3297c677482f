#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(softmax_vjp)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // y = [0.25, 0.75], g = [1, 3]: sum(g y) = 2.5, z = y (g - 2.5) = [-0.375, 0.375].
  Graph<double> g;
  const auto y = g.input("y", {{0.25, 0.75}});
  const auto go = g.input("g", {{1, 3}});
  const xt::xarray<double> expected = {{-0.375, 0.375}};
  BOOST_TEST(xgrad::softmax_vjp(y, go).value() == expected);
}

BOOST_AUTO_TEST_CASE(is_the_jacobian_product_of_softmax) {
  // z = (diag(y) - y y^T) g, the Jacobian of softmax at its output y, applied to g.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({1, 5}, 1));
  const auto y = xgrad::softmax(x);
  const auto go = g.input("g", random_array<double>({1, 5}, 2));
  const auto& z = xgrad::softmax_vjp(y, go).value();
  for (std::size_t i = 0; i < 5; ++i) {
    double expected = 0;
    for (std::size_t j = 0; j < 5; ++j) {
      expected += ((i == j ? y.value()(0, i) : 0.0) - y.value()(0, i) * y.value()(0, j)) * go.value()(0, j);
    }
    BOOST_TEST(z(0, i) == expected, boost::test_tools::tolerance(1e-14));
  }
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  for (long axis : {0L, 1L, -1L}) {
    Graph<double> g;
    const auto y = g.input("y", random_array<double>({2, 3, 4}, 3));
    const auto go = g.input("g", random_array<double>({2, 3, 4}, 4));
    BOOST_TEST_CONTEXT("axis " << axis) { check_gradients(xgrad::softmax_vjp(y, go, axis), {y, go}); }
  }
}

BOOST_AUTO_TEST_CASE(second_order_matches_finite_differences) {
  Graph<double> g;
  const auto y = g.input("y", random_array<double>({3, 4}, 5));
  const auto go = g.input("g", random_array<double>({3, 4}, 6));
  const auto u = g.input("u", random_array<double>({3, 4}, 7));
  const auto grads = grad(xgrad::softmax_vjp(y, go), {y, go}, u);
  check_gradients(grads[0], {y, go, u});
  check_gradients(grads[1], {y, go, u});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto y = g.input("y", xt::zeros<double>({2, 3}));
  const auto go = g.input("g", xt::zeros<double>({3, 2}));
  check_error([&] { xgrad::softmax_vjp(y, go); }, {"softmax_vjp (node 2)", "y is (2, 3)", "grad_out is (3, 2)"});
  check_error([&] { xgrad::softmax_vjp(y, y, 5); }, {"axis 5 is out of range"});
}

BOOST_AUTO_TEST_SUITE_END()
