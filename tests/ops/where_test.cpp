// where(cond, a, b): hand values, PyTorch's values and gradients, finite differences to second
// order, the gradient of the branch not taken (0 even from an inf or NaN grad_out), conditions
// from comparisons and mask leaves, errors, and the JSON round trip and replay.
#include "../check.hpp"

#include <limits>

#include <xtensor/xview.hpp>

namespace xgrad_tests {  // the suite is a namespace: `where` is one of xgrad's functions

BOOST_AUTO_TEST_SUITE(where)

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // numpy.where: nonzero (NaN, -1 and 2 included) takes a; all three broadcast together.
  Graph<double> g;
  const auto c = g.constant("c", xt::xarray<double>{1, 0, nan, -1, 2, -0.0});
  const auto a = g.input("a", xt::xarray<double>{10, 20, 30, 40, 50, 60});
  const auto b = g.input("b", xt::xarray<double>{-1, -2, -3, -4, -5, -6});
  BOOST_TEST((xgrad::where(c, a, b).value() == xt::xarray<double>{10, -2, 30, 40, 50, -6}));
  // cond (2, 1), a (3,), b () -> (2, 3): the output takes the broadcast shape of all three.
  const auto col = g.constant("col", matrix<double>({{1}, {0}}));
  const auto row = g.input("row", xt::xarray<double>{1, 2, 3});
  const auto s = g.input("s", xt::xarray<double>(7.0));
  const auto y = xgrad::where(col, row, s);
  BOOST_TEST((y.value() == xt::xarray<double>{{1, 2, 3}, {7, 7, 7}}));
  BOOST_TEST((xgrad::where(col, s, row).value() == xt::xarray<double>{{7, 7, 7}, {1, 2, 3}}));
  // a (2, 1, 3) and b (4, 1) with cond (3): (2, 4, 3), each element from its own source.
  const auto a3 = g.input("a3", random_array<double>({2, 1, 3}, 1));
  const auto b2 = g.input("b2", random_array<double>({4, 1}, 2));
  const auto c3 = g.constant("c3", xt::xarray<double>{0, 1, 0});
  const auto z = xgrad::where(c3, a3, b2).value();
  BOOST_TEST_REQUIRE((z.shape() == std::vector<std::size_t>{2, 4, 3}), boost::test_tools::per_element());
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 4; ++j) {
      for (std::size_t k = 0; k < 3; ++k) {
        BOOST_TEST(z(i, j, k) == (k == 1 ? a3.value()(i, 0, k) : b2.value()(j, 0)));
      }
    }
  }
  // The branch not taken may hold inf or NaN: it does not reach y.
  const auto odd = g.input("odd", xt::xarray<double>{inf, nan, 1, 2, 3, -inf});
  const auto w = xgrad::where(c, b, odd).value();
  BOOST_TEST((xt::view(w, xt::keep(0, 2, 3, 4)) == xt::xarray<double>{-1, -3, -4, -5}));
  BOOST_TEST(std::isnan(w(1)));
  BOOST_TEST(w(5) == -inf);
  // float32.
  Graph<float> f;
  const auto cf = f.constant("c", xt::xarray<float>{0, 1});
  BOOST_TEST((xgrad::where(cf, f.input("a", xt::xarray<float>{1, 2}), f.input("b", xt::xarray<float>{3, 4})).value() ==
              xt::xarray<float>{3, 2}));
}

BOOST_AUTO_TEST_CASE(matches_pytorch) {
  // torch.where(cond != 0, a, b), cond (2, 1, 4), a (3, 4), b (4); u holds inf and NaN where
  // only one branch takes it.
  Graph<double> g;
  const auto c = g.constant("c", torch_fixture("where_cond"));
  const auto a = g.input("a", torch_fixture("where_a"));
  const auto b = g.input("b", torch_fixture("where_b"));
  const auto u = g.input("u", torch_fixture("where_u"));
  const auto y = xgrad::where(c, a, b);
  check_close(y.value(), torch_fixture("where_y"));
  const auto grads = grad(y, {a, b}, u);
  check_close(grads[0].value(), torch_fixture("where_grad_a"));  // NaN only at a's own element
  check_close(grads[1].value(), torch_fixture("where_grad_b"));  // inf only at b's own column
}

BOOST_AUTO_TEST_CASE(the_branch_not_taken_gets_exactly_zero) {
  // grad_out of inf and NaN everywhere: each input's gradient is that grad_out where it was
  // taken and exactly 0 (not 0 * inf = NaN) where it was not; cond gets zeros.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{-2, -1, 1, 2});
  const auto cond = xgrad::greater(x, g.constant("zero", xt::xarray<double>(0.0)));
  const auto a = g.input("a", xt::xarray<double>{1, 2, 3, 4});
  const auto b = g.input("b", xt::xarray<double>{5, 6, 7, 8});
  const auto y = xgrad::where(cond, a, b);
  const auto grads = grad(y, {a, b, x}, g.constant("grad_out", xt::xarray<double>{inf, nan, nan, -inf}));
  BOOST_TEST(std::isnan(grads[0].value()(2)));
  BOOST_TEST(grads[0].value()(0) == 0.0);
  BOOST_TEST(grads[0].value()(1) == 0.0);
  BOOST_TEST(grads[0].value()(3) == -inf);
  BOOST_TEST(grads[1].value()(0) == inf);
  BOOST_TEST(std::isnan(grads[1].value()(1)));
  BOOST_TEST(grads[1].value()(2) == 0.0);
  BOOST_TEST(grads[1].value()(3) == 0.0);
  BOOST_TEST((grads[2].value() == xt::zeros<double>({4})));  // through the comparison: none
  // The classic use: a safe log, log(x) where x > 0 and 0 elsewhere. At x <= 0 the log's
  // gradient reads grad_out 0 there (0 / x), so it is 0, and so is x's.
  const auto p = g.input("p", xt::xarray<double>{-1, 0.5, 2});
  const auto positive = xgrad::greater(p, g.constant("zero2", xt::xarray<double>(0.0)));
  const auto safe = xgrad::where(positive, xgrad::log(xgrad::where(positive, p, g.constant("one", xt::xarray<double>(1.0)))),
                                 g.constant("zeros", xt::xarray<double>(0.0)));
  const auto gp = grad(sum(safe), {p})[0].value();
  BOOST_TEST(gp(0) == 0.0);
  BOOST_TEST(gp(1) == 2.0);
  BOOST_TEST(gp(2) == 0.5);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences_to_second_order) {
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({3, 4}, 3));
  const auto b = g.input("b", random_array<double>({2, 1, 4}, 4));
  const auto c = g.constant("c", xt::xarray<double>{{1, 0, 0, 1}, {0, 1, 1, 0}, {1, 1, 0, 0}});
  check_gradients(xgrad::where(c, a, b), {a, b});
  // A condition computed from the inputs: no gradient through it, and none needed (a step).
  const auto t = g.input("t", random_array<double>({4}, 5));
  const auto cond = xgrad::less(a, t);
  check_gradients(xgrad::where(cond, mul(a, a), b), {a, b, t});
  // Second order: the VJP is apply_mask and logical_not nodes, differentiable again.
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 6));
  const auto y = xgrad::where(cond, mul(a, b), exp(b));
  const auto grads = grad(y, {a, b, t}, u);
  check_gradients(grads[0], {a, b, t, u});
  check_gradients(grads[1], {a, b, t, u});
  BOOST_TEST((grads[2].value() == xt::zeros<double>({4})));
}

BOOST_AUTO_TEST_CASE(a_mask_leaf_is_a_condition) {
  // Graph::mask leaves: true takes a; grad refuses the leaf as an x and nothing flows to it; a
  // new batch's mask replays.
  Graph<double> g;
  const auto m = g.mask("m", xt::xarray<bool>{{true, false, true}});
  const auto a = g.input("a", xt::xarray<double>{{1, 2, 3}, {4, 5, 6}});
  const auto b = g.input("b", xt::xarray<double>(0.0));
  const auto y = xgrad::where(m, a, b);
  BOOST_TEST((y.value() == xt::xarray<double>{{1, 0, 3}, {4, 0, 6}}));
  const auto grads = grad(sum(y), {a, b});
  BOOST_TEST((grads[0].value() == xt::xarray<double>{{1, 0, 1}, {1, 0, 1}}));
  BOOST_TEST(grads[1].value()() == 2.0);
  check_error([&] { grad(sum(y), {m}); }, {"a mask leaf: a mask has no gradient"});
  g.set_value(m, xt::xarray<bool>{{false, true, true}});
  g.replay();
  BOOST_TEST((y.value() == xt::xarray<double>{{0, 2, 3}, {0, 5, 6}}));
  BOOST_TEST((grads[0].value() == xt::xarray<double>{{0, 1, 1}, {0, 1, 1}}));
  BOOST_TEST(grads[1].value()() == 2.0);
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto c = g.constant("c", xt::zeros<double>({2, 3}));
  const auto a = g.input("a", xt::zeros<double>({3}));
  const auto b = g.input("b", xt::zeros<double>({4}));
  const auto big = g.input("big", xt::zeros<double>({32768, 1}));
  const auto wide = g.input("wide", xt::zeros<double>({1, 32768}));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::where(c, a, b); },
              {"where (node 5): cond (2, 3), a (3,) and b (4,) do not broadcast together"});
  check_error([&] { xgrad::where(b, c, a); }, {"where (node 5): cond (4,), a (2, 3) and b (3,) do not broadcast together"});
  check_error([&] { xgrad::where(big, wide, a); },
              {"where (node", "cond (32768, 1), a (1, 32768) and b (3,) do not broadcast together"});
  check_error([&] { xgrad::where(big, wide, wide); },
              {"where (node", "broadcasting cond (32768, 1), a (1, 32768) and b (1, 32768) to (32768, 32768) makes more than 268435456 elements"});
  Graph<double> other;
  const auto alien = other.input("alien", xt::zeros<double>({3}));
  check_error([&] { xgrad::where(a, a, alien); }, {"belongs to another graph"});
  BOOST_TEST(g.size() == nodes);  // nothing added
}

BOOST_AUTO_TEST_CASE(attrs_round_trip_and_json_replays) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3}, 7));
  const auto b = g.input("b", random_array<double>({3}, 8));
  const auto y = xgrad::where(xgrad::greater_equal(x, b), x, b);  // maximum, as where
  check_attrs_round_trip(y, "where", "{}");
  // With its gradients, exported and imported, then both replayed with new inputs: the same bits.
  g.set_output("y", y);
  const auto grads = grad(sum(mul(y, y)), {x, b});
  g.set_grad("x", grads[0]);
  g.set_grad("b", grads[1]);
  check_json_replays(g, x, {random_array<double>({2, 3}, 9), random_array<double>({2, 3}, 10)});
  const auto& xv = x.value();
  const auto& bv = b.value();
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 0; j < 3; ++j) BOOST_TEST(y.value()(i, j) == std::max(xv(i, j), bv(j)));
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace xgrad_tests
