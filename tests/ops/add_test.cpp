#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(add)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}, {3, 4}});
  const auto b = g.input("b", {{10, 20}, {30, -4}});
  const xt::xarray<double> expected = {{11, 22}, {33, 0}};
  BOOST_TEST(xgrad::add(a, b).value() == expected);
}

BOOST_AUTO_TEST_CASE(broadcasts_by_numpys_rules) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const auto bias = g.input("bias", xt::xarray<double>{10, 20, 30});
  const auto col = g.input("col", {{100}, {200}});
  const auto scalar = g.input("s", xt::xarray<double>(0.5));
  const xt::xarray<double> biased = {{11, 22, 33}, {14, 25, 36}};
  const xt::xarray<double> outer = {{110, 120, 130}, {210, 220, 230}};  // (2, 1) + (3) -> (2, 3)
  BOOST_TEST(xgrad::add(x, bias).value() == biased);
  BOOST_TEST(xgrad::add(bias, x).value() == biased);
  BOOST_TEST(xgrad::add(col, bias).value() == outer);
  BOOST_TEST(xgrad::add(x, scalar).value() == (xt::xarray<double>{{1.5, 2.5, 3.5}, {4.5, 5.5, 6.5}}));
  // A bias over a batch (2, 2, 3) + (1, 3): every (i, j) row gets the same bias.
  const auto batch = g.input("batch", xt::xarray<double>{{{0, 0, 0}, {1, 1, 1}}, {{2, 2, 2}, {3, 3, 3}}});
  const auto y = xgrad::add(batch, g.input("b13", {{10, 20, 30}}));
  BOOST_TEST(y.value() == (xt::xarray<double>{{{10, 20, 30}, {11, 21, 31}}, {{12, 22, 32}, {13, 23, 33}}}));
  // Empty axes broadcast too: (0, 3) + (3) -> (0, 3).
  const auto empty = g.input("empty", xt::xarray<double>::from_shape({0, 3}));
  BOOST_TEST(xgrad::add(empty, bias).value().shape(0) == 0u);
}

BOOST_AUTO_TEST_CASE(large_broadcasts_split_over_threads_match_xtensor) {
  // Rows split over 2 threads, each part starting its walk of the broadcast axes mid-way.
  const test::BlasThreads two(2);
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({7, 5, 3, 300}, 1));
  for (const Shape& sb : {Shape{5, 1, 300}, Shape{7, 1, 3, 1}, Shape{300}, Shape{1, 5, 3, 300}}) {
    const auto b = g.input("b", random_array<double>(sb, 2));
    const xt::xarray<double> expected = a.value() + b.value();
    BOOST_TEST(same_bits(xgrad::add(a, b).value(), expected), shape_str(sb));
    BOOST_TEST(same_bits(xgrad::add(b, a).value(), expected), shape_str(sb));
  }
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3}, 1));
  const auto b = g.input("b", random_array<double>({2, 3}, 2));
  check_gradients(xgrad::add(a, b), {a, b});
  check_gradients(xgrad::add(a, a), {a});  // one input twice: the gradient is 2
  const auto bias = g.input("bias", random_array<double>({3}, 3));
  const auto col = g.input("col", random_array<double>({2, 1, 1}, 4));
  const auto x = g.input("x", random_array<double>({2, 4, 3}, 5));
  check_gradients(xgrad::add(x, bias), {x, bias});
  check_gradients(xgrad::add(col, bias), {col, bias});  // both sides stretch: (2, 1, 3)
  check_gradients(xgrad::add(col, x), {col, x});
}

BOOST_AUTO_TEST_CASE(bias_gradient_sums_over_the_broadcast_axes) {
  // d/d bias of sum(x + bias) over a (2, 4, 3) x: each bias entry is used 8 times.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 4, 3}, 1));
  const auto bias = g.input("bias", xt::xarray<double>{1, 2, 3});
  const auto gb = grad(xgrad::add(x, bias), {bias})[0];
  BOOST_TEST(gb.value() == (xt::xarray<double>{8, 8, 8}));
  BOOST_TEST(gb.node().op_name() == "sum_to");
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = g.input("b", xt::zeros<double>({4, 3}));
  const auto c = g.input("c", xt::zeros<double>({2}));
  check_error([&] { xgrad::add(a, b); }, {"add (node 3)", "a (2, 3) and b (4, 3) do not broadcast together"});
  check_error([&] { xgrad::add(a, c); }, {"a (2, 3) and b (2,) do not broadcast together"});
  BOOST_TEST(g.size() == 3u);  // a rejected call adds no node
}

BOOST_AUTO_TEST_SUITE_END()
