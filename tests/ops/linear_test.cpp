// linear(x, w, b) = x w + b in one node (ops/matmul.cpp): against add(matmul(x, w), b), finite
// differences, its errors, its export, and threads.
#include "../check.hpp"

#include <climits>

BOOST_AUTO_TEST_SUITE(linear)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const auto w = g.input("w", {{1, 0}, {0, 1}, {1, 1}});
  const auto b = g.input("b", xt::xarray<double>{0.5, -1});
  const xt::xarray<double> expected = {{4.5, 4}, {10.5, 10}};
  BOOST_TEST(xgrad::linear(x, w, b).value() == expected);
}

BOOST_AUTO_TEST_CASE(is_add_of_matmul_with_its_gradients) {
  // Rank 2 and 3, an inner size OpenBLAS sums in one block (the same bits) and one it splits
  // (a rounding apart), float64 and float32; every gradient against the composition's.
  for (const Shape& xs : {Shape{5, 7}, Shape{3, 4, 7}, Shape{2, 16, 700}}) {
    BOOST_TEST_CONTEXT("x " << shape_str(xs)) {
      const std::size_t k = xs.back(), n = 6;
      Graph<double> g;
      const auto x = g.input("x", random_array<double>(xs, 1));
      const auto w = g.parameter("w", random_array<double>({k, n}, 2));
      const auto b = g.parameter("b", random_array<double>({n}, 3));
      const auto y = xgrad::linear(x, w, b), yc = add(matmul(x, w), b);
      BOOST_TEST(g.node(y.id()).op_name() == "linear");
      const double tol = k > 64 ? 1e-13 : 0;
      check_close(y.value(), yc.value(), tol);
      Shape us = xs;
      us.back() = n;
      const auto u = g.input("u", random_array<double>(us, 4));
      const auto gl = grad(y, {x, w, b}, u.value()), gc = grad(yc, {x, w, b}, u.value());
      for (std::size_t i = 0; i < 3; ++i) check_close(gl[i].value(), gc[i].value(), 1e-13);
      Graph<float> f;
      const auto yf = xgrad::linear(f.input("x", random_array<float>(xs, 1)), f.input("w", random_array<float>({k, n}, 2)),
                                    f.input("b", random_array<float>({n}, 3)));
      check_close(yf.value(), y.value(), 1e-4 * std::sqrt(double(k)));
    }
  }
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_to_second_order) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 5));
  const auto w = g.input("w", random_array<double>({4, 3}, 6));
  const auto b = g.input("b", random_array<double>({3}, 7));
  const auto y = xgrad::linear(x, w, b);
  check_gradients(y, {x, w, b});
  const auto u = g.input("u", random_array<double>({2, 3, 3}, 8));
  const auto gx = grad(y, {x, w, b}, u);
  check_gradients(mul(gx[0], gx[0]), {x, w, u});  // grad_x = u w^T: second order through w and u
  check_gradients(gx[1], {x, u});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_naming_them) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto v = g.input("v", random_array<double>({4}, 2));
  const auto w = g.input("w", random_array<double>({4, 5}, 3));
  const auto w3 = g.input("w3", random_array<double>({1, 4, 5}, 4));
  const auto b = g.input("b", random_array<double>({5}, 5));
  const auto b2 = g.input("b2", random_array<double>({1, 5}, 6));
  const auto b4 = g.input("b4", random_array<double>({4}, 7));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::linear(v, w, b); }, {"linear (node", "x must be (..., k) of rank >= 2: x is (4,), w (4, 5), b (5,)"});
  check_error([&] { xgrad::linear(x, w3, b); }, {"w must be a matrix (k, n): x is (2, 3, 4), w (1, 4, 5), b (5,)"});
  check_error([&] { xgrad::linear(x, g.input("w2", random_array<double>({3, 5}, 8)), b); },
              {"x's last axis and w's first differ: x is (2, 3, 4), w (3, 5), b (5,)"});
  check_error([&] { xgrad::linear(x, w, b2); }, {"b must be (n) = (5): x is (2, 3, 4), w (4, 5), b (1, 5)"});
  check_error([&] { xgrad::linear(x, w, b4); }, {"b must be (n) = (5): x is (2, 3, 4), w (4, 5), b (4,)"});
  // An axis past BLAS's int, in arrays of no elements.
  const std::size_t big = std::size_t(INT_MAX) + 1;
  check_error([&] {
    xgrad::linear(g.input("xb", xt::xarray<double>::from_shape({0, big})), g.input("wb", xt::xarray<double>::from_shape({big, 0})),
                  g.input("bb", xt::xarray<double>::from_shape({0})));
  }, {"linear (node", "a matrix axis exceeds INT_MAX: x is (0, 2147483648), w (2147483648, 0), b (0,)"});
  BOOST_TEST(g.size() == nodes + 4);  // the leaves w2, xb, wb, bb only: no node of a refused linear
}

BOOST_AUTO_TEST_CASE(empty_axes) {
  // No rows, an inner size of 0 (y = b in every row), and no outputs: no crash, and b where due.
  Graph<double> g;
  const auto none = xgrad::linear(g.input("x", xt::xarray<double>::from_shape({0, 3})),
                                  g.input("w", random_array<double>({3, 2}, 1)), g.input("b", xt::xarray<double>{1, 2}));
  BOOST_TEST(shape_str(none.shape()) == "(0, 2)");
  const auto inner = xgrad::linear(g.input("x0", xt::xarray<double>::from_shape({2, 0})),
                                   g.input("w0", xt::xarray<double>::from_shape({0, 2})), g.input("b0", xt::xarray<double>{1, 2}));
  BOOST_TEST(inner.value() == (xt::xarray<double>{{1, 2}, {1, 2}}));
  const auto outputs = xgrad::linear(g.input("x1", random_array<double>({2, 3}, 2)),
                                     g.input("w1", xt::xarray<double>::from_shape({3, 0})), g.input("b1", xt::xarray<double>::from_shape({0})));
  BOOST_TEST(shape_str(outputs.shape()) == "(2, 0)");
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto y = xgrad::linear(x, g.parameter("w", random_array<double>({4, 5}, 2)), g.parameter("b", random_array<double>({5}, 3)));
  check_attrs_round_trip(y, "linear", "{}");
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][y.id()]["attrs"] = {{"transpose", true}};
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"transpose"});
}

BOOST_AUTO_TEST_CASE(two_threads_give_the_rows_of_one) {
  // Split by rows over the pool (2048 rows x 256 x 256: above matmul's split threshold).
  Graph<float> g;
  const auto x = g.input("x", random_array<float>({8, 256, 256}, 1));
  const auto w = g.input("w", random_array<float>({256, 256}, 2));
  const auto b = g.input("b", random_array<float>({256}, 3));
  xt::xarray<float> one, two;
  {
    test::BlasThreads threads(1);
    one = xgrad::linear(x, w, b).value();
  }
  {
    test::BlasThreads threads(2);
    two = xgrad::linear(x, w, b).value();
  }
  const auto wide = [](const xt::xarray<float>& a) { return xt::xarray<double>(xt::cast<double>(a)); };
  // Sums of 256 products of terms near 1 in float32: their order may change with the split
  // (as matmul's), to within 256 ulp of the terms.
  check_close(two, wide(one), 1e-4);
  check_close(one, wide(add(matmul(x, w), b).value()), 1e-4);
}

BOOST_AUTO_TEST_SUITE_END()
