#include "../check.hpp"

#include <xgrad/ops/kernels/parallel.hpp>

BOOST_AUTO_TEST_SUITE(matmul)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2, 3}, {4, 5, 6}});
  const auto b = g.input("b", {{1, 0}, {0, 1}, {1, 1}});
  const xt::xarray<double> expected = {{4, 5}, {10, 11}};
  BOOST_TEST(xgrad::matmul(a, b).value() == expected);
}

BOOST_AUTO_TEST_CASE(transpose_flags_match_explicit_transposes) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3, 4}, 1));
  const auto b = g.input("b", random_array<double>({2, 3, 5}, 2));
  const auto c = g.input("c", random_array<double>({2, 5, 4}, 3));
  // a^T b: (2, 4, 3) x (2, 3, 5); a c^T... shapes chosen so every flag pair is valid
  BOOST_TEST(xgrad::matmul(a, b, true, false).value() == xgrad::matmul(xgrad::transpose(a), b).value());
  BOOST_TEST(xgrad::matmul(c, a, false, true).value() == xgrad::matmul(c, xgrad::transpose(a)).value());
  BOOST_TEST(xgrad::matmul(c, b, true, true).value() == xgrad::matmul(xgrad::transpose(c), xgrad::transpose(b)).value());
}

BOOST_AUTO_TEST_CASE(batch_axes_multiply_slice_by_slice) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3, 2, 4}, 4));
  const auto b = g.input("b", random_array<double>({2, 3, 4, 5}, 5));
  const auto y = xgrad::matmul(a, b);
  BOOST_TEST(y.value().shape() == (xt::svector<std::size_t>{2, 3, 2, 5}), boost::test_tools::per_element());
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 3; ++j) {
      for (std::size_t r = 0; r < 2; ++r) {
        for (std::size_t c = 0; c < 5; ++c) {
          double s = 0;
          for (std::size_t k = 0; k < 4; ++k) s += a.value()(i, j, r, k) * b.value()(i, j, k, c);
          BOOST_TEST(y.value()(i, j, r, c) == s, boost::test_tools::tolerance(1e-12));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(batch_axes_broadcast_as_pytorch_does) {
  // (2, 3, 4) @ (4, 5); (2, 2, 3, 4) @ (2, 4, 3); (3, 4) @ (2, 4, 5); (2, 1, 3, 4) @ (3, 2, 4)^T.
  for (const char* name : {"rank2_weight", "heads", "rank2_left", "both"}) {
    BOOST_TEST_CONTEXT(name) {
      const std::string f = std::string("matmul_") + name + "_";
      Graph<double> g;
      const auto a = g.input("a", torch_fixture(f + "a"));
      const auto b = g.input("b", torch_fixture(f + "b"));
      const auto u = g.input("u", torch_fixture(f + "u"));
      const auto y = xgrad::matmul(a, b, false, std::string(name) == "both");
      check_close(y.value(), torch_fixture(f + "y"));
      const auto grads = grad(y, {a, b}, u);
      check_close(grads[0].value(), torch_fixture(f + "grad_a"));
      check_close(grads[1].value(), torch_fixture(f + "grad_b"));
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_broadcast_operand_gives_the_bits_of_its_explicit_broadcast, T, test::dtypes) {
  // Read in place, never copied: the same products as broadcast_to first, bit for bit, for
  // every flag pair, a weight without batch (one GEMM of the merged rows) and batch axes of 1.
  Graph<T> g;
  const auto a = g.input("a", random_array<T>({2, 3, 4, 4}, 1));
  for (const Shape& bs : {Shape{4, 4}, Shape{3, 4, 4}, Shape{1, 4, 4}, Shape{2, 1, 4, 4}, Shape{1, 1, 4, 4}}) {
    const auto b = g.input("b", random_array<T>(bs, 2));
    const auto wide = xgrad::broadcast_to(b, {2, 3, 4, 4});
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        BOOST_TEST(same_bits(xgrad::matmul(a, b, ta, tb).value(), xgrad::matmul(a, wide, ta, tb).value()),
                   shape_str(bs) << " ta " << ta << " tb " << tb);
        BOOST_TEST(same_bits(xgrad::matmul(b, a, ta, tb).value(), xgrad::matmul(wide, a, ta, tb).value()),
                   shape_str(bs) << " on the left, ta " << ta << " tb " << tb);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(reads_strided_views_as_their_copies, T, test::dtypes) {
  // A lean replay hands matmul views (Args::views): heads split by permute, a broadcast batch. Each product equals, bit for bit, the product of the views' copies.
  Graph<T> g;
  const auto q = g.input("q", random_array<T>({2, 5, 3, 4}, 1));   // (B, T, H, dh)
  const auto k = g.input("k", random_array<T>({2, 6, 3, 4}, 2));
  const auto w = g.input("w", random_array<T>({3, 5, 6}, 3));      // (H, T_q, T_k): broadcast over B
  const auto qh = permute(q, {0, 2, 1, 3}), kh = permute(k, {0, 2, 1, 3}), kt = transpose(kh);
  const View vq = *qh.node().op->view_of(View::contiguous(q.shape()), qh.shape());
  const View vk = *kh.node().op->view_of(View::contiguous(k.shape()), kh.shape());
  const View vt = *kt.node().op->view_of(vk, kt.shape());
  struct Case {
    Var<T> a, b;
    const xt::xarray<T>* base_a;
    const xt::xarray<T>* base_b;
    const View* view_a;
    const View* view_b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {qh, kh, &q.value(), &k.value(), &vq, &vk, false, true},      // q k^T through the flag
      {w, kh, &w.value(), &k.value(), nullptr, &vk, false, false},  // weights v, w broadcast
      {kh, kh, &k.value(), &k.value(), &vk, &vk, true, false},      // a gradient's k^T g
  };
  for (const Case& c : cases) {
    const auto expected = xgrad::matmul(c.a, c.b, c.ta, c.tb);
    const auto& op = *expected.node().op;
    Args<T> args{c.base_a, c.base_b};
    args.views = {c.view_a, c.view_b};
    for (std::size_t i = 0; i < 2; ++i) {
      if (args.views[i]) BOOST_TEST(op.reads_view(i, *args.views[i]));
    }
    xt::xarray<T> y = xt::xarray<T>::from_shape(expected.value().shape());
    op.forward(args, y);
    BOOST_TEST(same_bits(y, expected.value()), "ta " << c.ta << " tb " << c.tb);
  }
  // Matrices with columns of stride 1 are read in place; a transposed view (rows of stride 1)
  // is not: read through the other transpose flag, OpenBLAS's bits could differ.
  const auto op = xgrad::matmul(qh, kh, false, true).node().op;
  BOOST_TEST(!op->reads_view(1, vt));
  const auto scattered = permute(q, {3, 0, 1, 2});  // (dh, B, T, H): matrices (T, H), strides 12 and 4
  BOOST_TEST(!op->reads_view(0, *scattered.node().op->view_of(View::contiguous(q.shape()), scattered.shape())));
}

BOOST_AUTO_TEST_CASE(a_weights_gradient_is_one_product_of_the_merged_rows) {
  // (B, T, d) @ (d, h): grad_b = a^T g over all B*T rows at once, (d, B*T) x (B*T, h), with no
  // (B, d, h) batch of products to sum.
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({4, 5, 3}, 1));
  const auto w = g.input("w", random_array<double>({3, 2}, 2));
  const auto y = xgrad::matmul(a, w);
  const std::size_t before = g.size();
  const auto gw = grad(y, {w})[0];
  BOOST_TEST(gw.node().op_name() == "matmul");
  BOOST_TEST((gw.shape() == Shape{3, 2}));
  for (std::size_t i = before; i < g.size(); ++i) BOOST_TEST(g.node(i).op_name() != "sum_to", "node " << i);
  check_gradients(y, {a, w});
  const auto u = g.input("u", random_array<double>({4, 5, 2}, 3));
  check_gradients(grad(xgrad::matmul(a, w, false, false), {a, w}, u)[1], {a, w, u});  // second order
  const auto wt = g.input("wt", random_array<double>({1, 2, 3}, 4));  // (1, h, d), transposed
  check_gradients(xgrad::matmul(a, wt, false, true), {a, wt});
}

BOOST_AUTO_TEST_CASE(broadcast_vjps_match_finite_differences) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 1, 3, 4}, 1));
  const auto b = g.input("b", random_array<double>({3, 4, 2}, 2));   // a @ b: batch (2, 3)
  const auto bt = g.input("bt", random_array<double>({3, 3, 2}, 3));  // a^T @ bt
  const auto c = g.input("c", random_array<double>({4, 3}, 4));       // c @ a, c^T @ a^T
  check_gradients(xgrad::matmul(a, b), {a, b});
  check_gradients(xgrad::matmul(a, bt, true, false), {a, bt});
  check_gradients(xgrad::matmul(b, a, true, true), {b, a});
  for (bool t : {false, true}) {
    BOOST_TEST_CONTEXT("transposed " << t) {
      const auto y = xgrad::matmul(c, a, t, t);  // a rank-2 left operand over a batch
      check_gradients(y, {c, a});
      const auto u = g.input("u", random_array<double>(y.shape(), 5));
      check_gradients(grad(xgrad::matmul(c, a, t, t), {c, a}, u)[0], {c, a, u});  // second order
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_inner_axis_gives_zeros) {
  Graph<double> g;
  const auto a = g.input("a", xt::xarray<double>::from_shape({2, 0}));
  const auto b = g.input("b", xt::xarray<double>::from_shape({0, 3}));
  const xt::xarray<double> zeros = xt::zeros<double>({2, 3});
  BOOST_TEST(xgrad::matmul(a, b).value() == zeros);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      Graph<double> g;
      const auto a = g.input("a", random_array<double>(ta ? Shape{2, 4, 3} : Shape{2, 3, 4}, 6));
      const auto b = g.input("b", random_array<double>(tb ? Shape{2, 5, 4} : Shape{2, 4, 5}, 7));
      check_gradients(xgrad::matmul(a, b, ta, tb), {a, b});
    }
  }
}

BOOST_AUTO_TEST_CASE(second_order_matches_finite_differences) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({3, 4}, 8));
  const auto b = g.input("b", random_array<double>({4, 2}, 9));
  const auto y = xgrad::matmul(a, b);
  const auto u = g.input("u", random_array<double>({3, 2}, 10));
  const auto grads = grad(y, {a, b}, u);
  check_gradients(grads[0], {a, b, u});
  check_gradients(grads[1], {a, b, u});
}

BOOST_AUTO_TEST_CASE_TEMPLATE(threads_split_products_within_rounding, T, test::dtypes) {
  // With 2 threads the pool splits large products, by batch index when there are enough, else
  // by rows in multiples of 16, each part one OpenBLAS call. The bits may differ from 1
  // thread's in the last place (OpenBLAS packs a part as it would a product of that size; its
  // own threads, case 6, differ too), the values not beyond rounding.
  struct Case {
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Case> cases = {
      {{300, 70}, {70, 200}, false, false},        // rows, a partial last part
      {{70, 130}, {70, 500}, true, false},         // rows of a transposed a
      {{200, 64}, {333, 64}, false, true},         // a transposed b
      {{64, 290}, {260, 64}, true, true},          // both transposed
      {{3, 200, 64}, {3, 64, 180}, false, false},  // batch indices
      {{1, 250, 40}, {1, 250, 300}, true, false},  // one batch index: its rows
      {{16, 300}, {300, 900}, false, false},       // one part of rows: left to OpenBLAS's own threads
  };
  test::BlasThreads threads_set(1);
  for (std::size_t c = 0; c < cases.size(); ++c) {
    std::vector<xt::xarray<T>> values;
    for (int threads : {1, 2}) {
      threads_set.set(threads);
      Graph<T> g;
      const auto a = g.input("a", random_array<T>(cases[c].a, 2 * c + 1));
      const auto b = g.input("b", random_array<T>(cases[c].b, 2 * c + 2));
      values.push_back(xgrad::matmul(a, b, cases[c].ta, cases[c].tb).value());
    }
    BOOST_TEST(xgrad::detail::parallel_threads() == 2u);
    // Entries are sums of up to 300 products of standard normals (|y| up to ~60).
    const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
    BOOST_TEST(xt::allclose(values[0], values[1], 0.0, tol), "case " << c);
    Graph<double> g;  // and they are the product: against float64 on 1 thread
    threads_set.set(1);
    const auto a = g.input("a", xt::cast<double>(random_array<T>(cases[c].a, 2 * c + 1)));
    const auto b = g.input("b", xt::cast<double>(random_array<T>(cases[c].b, 2 * c + 2)));
    const xt::xarray<double> expected = xgrad::matmul(a, b, cases[c].ta, cases[c].tb).value();
    BOOST_TEST(xt::allclose(xt::cast<double>(values[1]), expected, 1e-4, 1e-4), "case " << c);
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = g.input("b", xt::zeros<double>({4, 5}));
  const auto v = g.input("v", xt::zeros<double>({3}));
  const auto c = g.input("c", xt::zeros<double>({2, 3, 4}));
  const auto d = g.input("d", xt::zeros<double>({3, 4, 5}));
  const auto e = g.input("e", xt::zeros<double>({3, 4}));
  check_error([&] { xgrad::matmul(a, b); }, {"matmul (node 6)", "inner sizes differ", "a is (2, 3)", "b is (4, 5)"});
  check_error([&] { xgrad::matmul(a, b, true); }, {"inner sizes differ", "(2, 3)", "(4, 5)", "a transposed"});
  check_error([&] { xgrad::matmul(v, a); }, {"rank >= 2", "a is (3,)"});
  check_error([&] { xgrad::matmul(c, d); }, {"batch axes (2,) and (3,) do not broadcast together: a is (2, 3, 4), b is (3, 4, 5)"});
  check_error([&] { xgrad::matmul(c, e); }, {"inner sizes differ", "a is (2, 3, 4), b is (3, 4)"});
  BOOST_TEST(g.size() == 6u);  // a rejected node is not added
  // An axis past BLAS's int, in arrays of no elements: the inner one, and an outer one of a
  // transposed operand.
  const std::size_t big = std::size_t(INT_MAX) + 1;
  const auto wide = g.input("wide", xt::xarray<double>::from_shape({0, big}));
  const auto tall = g.input("tall", xt::xarray<double>::from_shape({big, 0}));
  check_error([&] { xgrad::matmul(wide, tall); },
              {"matmul (node 8): a matrix axis exceeds INT_MAX: a is (0, 2147483648), b is (2147483648, 0)"});
  check_error([&] { xgrad::matmul(wide, wide, true, false); },
              {"a matrix axis exceeds INT_MAX: a is (0, 2147483648), b is (0, 2147483648) (a transposed)"});
  BOOST_TEST(g.size() == 8u);
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_flags) {
  Graph<float> g;
  const auto a = g.input("a", xt::zeros<float>({2, 2}));
  const auto y = xgrad::matmul(a, a, true, false);
  BOOST_TEST(y.node().op->attrs().dump() == R"({"transpose_a":true,"transpose_b":false})");
}

// Issue 15 (class 7): an outer product (2^15, 1) @ (1, 2^15), and the same in a batch, would
// make 2^30 elements; refused in infer_shape.
BOOST_AUTO_TEST_CASE(refuses_a_product_of_too_many_elements) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>(Shape{std::size_t(1) << 15, 1}));
  const auto b = g.input("b", xt::zeros<double>(Shape{1, std::size_t(1) << 15}));
  check_error([&] { xgrad::matmul(a, b); }, {"matmul (node 2): the product (32768, 32768) of a (32768, 1) and b (1, 32768) makes more than 268435456 elements"});
  const auto ab = g.input("ab", xt::zeros<double>(Shape{4, std::size_t(1) << 13, 1}));
  const auto bb = g.input("bb", xt::zeros<double>(Shape{4, 1, std::size_t(1) << 14}));
  check_error([&] { xgrad::matmul(ab, bb); }, {"matmul (node 4)", "(4, 8192, 16384)", "more than 268435456 elements"});
  BOOST_TEST(g.size() == 4u);
}

BOOST_AUTO_TEST_SUITE_END()
