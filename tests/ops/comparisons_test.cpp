// The comparisons (equal, less, less_equal, greater, greater_equal) and the logic of masks
// (logical_and, logical_or, logical_not), rows of ops/elementwise.def: PyTorch's values at the
// edges of IEEE arithmetic, no gradient through them (exactly 0, also from an inf or NaN
// grad_out, and to second order), mask leaves as inputs, errors, and the JSON round trip and
// replay. (Finite differences and the export of every row: suite elementwise_rows.)
#include "../check.hpp"

#include <limits>

namespace xgrad_tests {

BOOST_AUTO_TEST_SUITE(comparisons)

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

using Binary = Var<double> (*)(const Var<double>&, const Var<double>&);
const std::pair<const char*, Binary> binary[] = {
    {"equal", &xgrad::equal<double>},        {"less", &xgrad::less<double>},
    {"less_equal", &xgrad::less_equal<double>}, {"greater", &xgrad::greater<double>},
    {"greater_equal", &xgrad::greater_equal<double>}, {"logical_and", &xgrad::logical_and<double>},
    {"logical_or", &xgrad::logical_or<double>}};

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto a = g.input("a", xt::xarray<double>{1, 2, 3, nan, nan, 0.0, inf, -inf});
  const auto b = g.input("b", xt::xarray<double>{2, 2, 2, 1, nan, -0.0, inf, 0});
  BOOST_TEST((xgrad::equal(a, b).value() == xt::xarray<double>{0, 1, 0, 0, 0, 1, 1, 0}));  // NaN != NaN, 0 == -0
  BOOST_TEST((xgrad::less(a, b).value() == xt::xarray<double>{1, 0, 0, 0, 0, 0, 0, 1}));
  BOOST_TEST((xgrad::less_equal(a, b).value() == xt::xarray<double>{1, 1, 0, 0, 0, 1, 1, 1}));
  BOOST_TEST((xgrad::greater(a, b).value() == xt::xarray<double>{0, 0, 1, 0, 0, 0, 0, 0}));
  BOOST_TEST((xgrad::greater_equal(a, b).value() == xt::xarray<double>{0, 1, 1, 0, 0, 1, 1, 0}));
  // Nonzero is true, NaN and -inf included; -0 is false.
  const auto p = g.input("p", xt::xarray<double>{1, 0, 1, 0, nan, -0.0, -inf, 0.5});
  const auto q = g.input("q", xt::xarray<double>{1, 1, 0, 0, 1, 1, 0, 0});
  BOOST_TEST((xgrad::logical_and(p, q).value() == xt::xarray<double>{1, 0, 0, 0, 1, 0, 0, 0}));
  BOOST_TEST((xgrad::logical_or(p, q).value() == xt::xarray<double>{1, 1, 1, 0, 1, 1, 1, 1}));
  BOOST_TEST((xgrad::logical_not(p).value() == xt::xarray<double>{0, 1, 0, 1, 0, 1, 0, 0}));
  // Broadcast as add: a column against a row.
  const auto col = g.input("col", matrix<double>({{1}, {2}}));
  const auto row = g.input("row", xt::xarray<double>{1, 2, 3});
  BOOST_TEST((xgrad::less(col, row).value() == xt::xarray<double>{{0, 1, 1}, {0, 0, 1}}));
  // float32: 1 and 0 of float.
  Graph<float> f;
  const auto fa = f.input("a", xt::xarray<float>{1, 3});
  const auto fb = f.input("b", xt::xarray<float>{2, 2});
  BOOST_TEST((xgrad::greater(fa, fb).value() == xt::xarray<float>{0, 1}));
  BOOST_TEST((xgrad::logical_not(xgrad::greater(fa, fb)).value() == xt::xarray<float>{1, 0}));
}

BOOST_AUTO_TEST_CASE(rows_match_pytorch) {
  // torch.eq, lt, le, gt, ge, logical_and, logical_or of a (3, 4) and b (2, 1, 4) with ties,
  // signed zeros, infinities and NaN; logical_not of a.
  Graph<double> g;
  const auto a = g.input("a", torch_fixture("comparisons_a"));
  const auto b = g.input("b", torch_fixture("comparisons_b"));
  for (const auto& [name, f] : binary) {
    BOOST_TEST_CONTEXT(name) {
      const auto y = f(a, b).value();
      check_close(y, torch_fixture(std::string("comparisons_") + name + "_y"), 0.0);
      BOOST_TEST(xt::all(xt::equal(y, 0.0) || xt::equal(y, 1.0)));
    }
  }
  check_close(xgrad::logical_not(a).value(), torch_fixture("comparisons_logical_not_y"), 0.0);
}

BOOST_AUTO_TEST_CASE(no_gradient_flows_through_them) {
  // y = x * less(x, t) + where(greater(x, 0), x, 0): the comparison paths give exactly 0, from
  // an inf and NaN grad_out too (no 0 * inf), and the gradient is that of the selected terms.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{-2, -0.5, 0.5, 3});
  const auto t = g.input("t", xt::xarray<double>{0, 0, 1, 1});
  const auto zero = g.constant("zero", xt::xarray<double>(0.0));
  const auto y = add(mul(x, xgrad::less(x, t)), xgrad::where(xgrad::greater(x, zero), x, zero));
  const auto grads = grad(sum(y), {x, t});
  BOOST_TEST((grads[0].value() == xt::xarray<double>{1, 1, 2, 1}));
  BOOST_TEST((grads[1].value() == xt::zeros<double>({4})));
  for (const auto& [name, f] : binary) {
    BOOST_TEST_CONTEXT(name) {
      const auto c = f(x, t);
      const auto gc = grad(c, {x, t}, g.constant("grad_out", xt::xarray<double>{inf, nan, -inf, 1}));
      for (const auto& gi : gc) {
        BOOST_TEST((gi.value() == xt::zeros<double>({4})));
        BOOST_TEST(gi.node().is_leaf());  // zeros, no product with grad_out
      }
    }
  }
  const auto gn = grad(xgrad::logical_not(x), {x}, g.constant("grad_out", xt::xarray<double>{inf, nan, 1, 1}))[0];
  BOOST_TEST((gn.value() == xt::zeros<double>({4})));
  // Second order: the gradient of the gradient, through the comparisons again.
  const auto u = g.input("u", xt::xarray<double>{1, 2, 3, 4});
  const auto gx = grad(y, {x}, u)[0];
  check_gradients(gx, {x, t, u});
  const auto second = grad(sum(mul(gx, gx)), {x, t, u});
  BOOST_TEST((second[1].value() == xt::zeros<double>({4})));
  BOOST_TEST((second[2].value() == xt::xarray<double>{2, 4, 6 * 4, 4 * 1 * 1 * 2}));
}

BOOST_AUTO_TEST_CASE(mask_leaves_are_inputs) {
  // A mask leaf reads as 1 and 0; nothing flows to it; a new batch's mask replays.
  Graph<double> g;
  const auto m = g.mask("m", xt::xarray<bool>{true, false, true});
  const auto k = g.mask("k", xt::xarray<bool>{true, true, false});
  const auto both = xgrad::logical_and(m, k);
  const auto either = xgrad::logical_or(m, xgrad::logical_not(k));
  BOOST_TEST((both.value() == xt::xarray<double>{1, 0, 0}));
  BOOST_TEST((either.value() == xt::xarray<double>{1, 0, 1}));
  const auto x = g.input("x", xt::xarray<double>{0.5, 1.5, 2.5});
  const auto y = mul(x, xgrad::greater(x, m));
  BOOST_TEST((y.value() == xt::xarray<double>{0, 1.5, 2.5}));
  BOOST_TEST((grad(sum(y), {x})[0].value() == xt::xarray<double>{0, 1, 1}));
  g.set_value(m, xt::xarray<bool>{false, false, true});
  g.replay();
  BOOST_TEST((both.value() == xt::xarray<double>{0, 0, 0}));
  BOOST_TEST((y.value() == xt::xarray<double>{0.5, 1.5, 2.5}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = g.input("b", xt::zeros<double>({4}));
  const std::size_t nodes = g.size();
  for (const auto& [name, f] : binary) {
    BOOST_TEST_CONTEXT(name) {
      check_error([&, f = f] { f(a, b); }, {std::string(name) + " (node 2): a (2, 3) and b (4,) do not broadcast together"});
      check_error([&, f = f] { f(b, a); }, {std::string(name) + " (node 2): a (4,) and b (2, 3) do not broadcast together"});
    }
  }
  BOOST_TEST(g.size() == nodes);  // nothing added
}

BOOST_AUTO_TEST_CASE(json_round_trip_replays) {
  // A graph of every row, with gradients, exported and imported, then both replayed with new
  // inputs: the same bits, and each op under its own name.
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3}, 1));
  const auto b = g.input("b", random_array<double>({3}, 2));
  Var<double> total = xgrad::logical_not(a);
  for (const auto& [name, f] : binary) total = add(total, mul(a, f(a, b)));
  g.set_output("total", total);
  const auto grads = grad(sum(total), {a, b});
  g.set_grad("a", grads[0]);
  g.set_grad("b", grads[1]);
  check_json_replays(g, a, {random_array<double>({2, 3}, 3), random_array<double>({2, 3}, 4)});
}

BOOST_AUTO_TEST_CASE(names_compile_unqualified_with_using_namespace_xgrad) {
  // The tests name xgrad's API unqualified (tests/check.hpp: `using namespace xgrad;`): these
  // calls find the ops, not std::less or xt::less.
  Graph<double> g;
  const auto a = g.input("a", xt::xarray<double>{1, 2});
  const auto b = g.input("b", xt::xarray<double>{2, 2});
  BOOST_TEST((less(a, b).value() == xt::xarray<double>{1, 0}));
  BOOST_TEST((equal(a, b).value() == xt::xarray<double>{0, 1}));
  BOOST_TEST((greater_equal(a, b).value() == xt::xarray<double>{0, 1}));
  BOOST_TEST((logical_not(logical_or(less_equal(a, b), greater(a, b))).value() == xt::xarray<double>{0, 0}));
  BOOST_TEST((logical_and(a, b).value() == xt::xarray<double>{1, 1}));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace xgrad_tests
