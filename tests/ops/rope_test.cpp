// rope (ops/rope.hpp): rotary position embeddings as one op, against PyTorch float64
// (tests/data/make_torch_fixtures.py), hand values, finite differences to second order, the
// composition of nodes it replaces, JSON and its errors.
#include "../check.hpp"

#include <xtensor/xview.hpp>

namespace {

// rope as the composition of nodes it was before it became an op (std::cos and std::sin):
// the reference for the op's values and gradients.
template <class T>
Var<T> composed_rope(const Var<T>& x, const Var<T>& positions, double base = 10000.0) {
  const std::size_t d = x.shape().back(), h = d / 2;
  xt::xarray<T> inv = xt::xarray<T>::from_shape({h});
  for (std::size_t i = 0; i < h; ++i) inv(i) = static_cast<T>(std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  Shape column = positions.shape();
  column.push_back(1);
  const Var<T> angle = mul(reshape(positions, column), x.graph().constant("", std::move(inv)));
  const Var<T> c = cos(angle), s = sin(angle);
  const Var<T> x1 = slice(x, -1, 0, h), x2 = slice(x, -1, h, d);
  return concat(std::vector<Var<T>>{sub(mul(x1, c), mul(x2, s)), add(mul(x2, c), mul(x1, s))}, -1);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(rope)

BOOST_AUTO_TEST_CASE(matches_pytorch_with_gradients_for_x_and_positions) {
  for (const std::string name : {"t", "batch"}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto x = g.input("x", torch_fixture("rope_x"));  // (2, 3, 5, 8)
      const auto p = name == "t" ? g.input("positions", xt::xarray<double>{0, 1, 2, 3, 4})
                                 : g.input("positions", torch_fixture("rope_positions_batch"));  // (2, 1, 5)
      const auto u = g.input("u", torch_fixture("rope_u"));
      const auto y = xgrad::rope(x, p);
      check_close(y.value(), torch_fixture("rope_" + name + "_y"));
      const auto grads = grad(y, {x, p}, u);
      check_close(grads[0].value(), torch_fixture("rope_" + name + "_grad_x"));
      check_close(grads[1].value(), torch_fixture("rope_" + name + "_grad_positions"));
    }
  }
}

BOOST_AUTO_TEST_CASE(forward_matches_hand_values_and_vjp_finite_differences) {
  // d = 2: one pair, rotated by p theta_0 = p radians (theta_0 = base^0 = 1).
  Graph<double> g;
  const auto x = g.input("x", {{1, 0}, {1, 0}, {0, 2}});
  const auto y = xgrad::rope(x, rope_positions(g, 3));
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(2.0), s2 = std::sin(2.0);
  // Within an ulp or two: the op's sines and cosines are libmvec's (ops/kernels/vector_math.hpp).
  BOOST_TEST(y.value() == (xt::xarray<double>{{1, 0}, {c1, s1}, {-2 * s2, 2 * c2}}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  // Position 0 leaves x as it is; the rotation keeps each pair's norm.
  const auto z = g.input("z", random_array<double>({4, 6}, 9));
  const auto rz = xgrad::rope(z, rope_positions(g, 4), 100.0);
  BOOST_TEST(xt::xarray<double>(xt::row(rz.value(), 0)) == xt::xarray<double>(xt::row(z.value(), 0)));
  for (std::size_t t = 0; t < 4; ++t) {
    for (std::size_t i = 0; i < 3; ++i) {
      const double before = std::hypot(z.value()(t, i), z.value()(t, i + 3)), after = std::hypot(rz.value()(t, i), rz.value()(t, i + 3));
      BOOST_TEST(after == before, boost::test_tools::tolerance(1e-14));
    }
  }
  const auto p = g.input("p", xt::xarray<double>{0.5, -1.0, 3.0, 7.5});
  check_gradients(xgrad::rope(z, p), {z, p});
  const auto u = g.input("u", random_array<double>({4, 6}, 10));
  check_gradients(grad(xgrad::rope(z, p), {z, p}, u)[1], {z, p, u});  // second order through the positions
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_naming_them) {
  Graph<double> g;
  const auto odd = g.input("odd", xt::xarray<double>::from_shape({5, 7}));
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 3, 5, 8}));
  const auto v = g.input("v", xt::xarray<double>::from_shape({8}));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::rope(odd, rope_positions(g, 5)); },
              {"rope (node", "the last axis of x must be even and non-empty", "x is (5, 7), positions (5,)"});
  check_error([&] { xgrad::rope(v, rope_positions(g, 1)); }, {"rope (node", "x must be (..., T, d), of rank >= 2: x is (8,)"});
  const auto pb = g.input("pb", xt::xarray<double>::from_shape({2, 5}));
  check_error([&] { xgrad::rope(x, pb); }, {"rope (node", "positions must broadcast against x's shape without its last axis, (2, 3, 5)",
                                     "x is (2, 3, 5, 8), positions (2, 5)"});
  check_error([&] { xgrad::rope(x, rope_positions(g, 4)); }, {"positions (4,)"});
  check_error([&] { xgrad::rope(x, rope_positions(g, 5), 0.0); }, {"rope: base must be finite and > 0, got 0"});
  check_error([&] { xgrad::rope(x, rope_positions(g, 5), std::nan("")); }, {"rope: base must be finite and > 0"});
  BOOST_TEST(g.size() == nodes + 6);  // the 6 leaves made here (positions, pb) only: no node of a refused rope
}

BOOST_AUTO_TEST_CASE(agrees_with_its_composition_of_nodes) {
  // Positions of every broadcasting form, fractional and large (angles up to ~ 3000 radians),
  // a base other than the default: values and both gradients to within the sines' and
  // cosines' ulps, in float64 and float32.
  const auto check = [](auto zero, double tol) {
    using T = decltype(zero);
    for (const Shape& ps : {Shape{5}, Shape{2, 1, 5}, Shape{2, 3, 5}, Shape{1, 5}, Shape{1}}) {
      BOOST_TEST_CONTEXT("positions " << shape_str(ps) << ", " << (sizeof(T) == 4 ? "float" : "double")) {
        Graph<T> g;
        const auto x = g.input("x", random_array<T>({2, 3, 5, 8}, 3));
        xt::xarray<T> pv = random_array<T>(ps, 4);
        pv *= T(3000);
        const auto p = g.input("p", pv);
        const auto u = g.input("u", random_array<T>({2, 3, 5, 8}, 5));
        for (const double base : {10000.0, 7.5}) {
          const auto y = xgrad::rope(x, p, base), yc = composed_rope(x, p, base);
          BOOST_TEST(g.node(y.id()).op_name() == "rope");
          check_close(y.value(), xt::xarray<double>(xt::cast<double>(yc.value())), tol);
          const auto gr = grad(y, {x, p}, u), gc = grad(yc, {x, p}, u);
          check_close(gr[0].value(), xt::xarray<double>(xt::cast<double>(gc[0].value())), tol);
          // grad_p sums many products of size ~ |x| |u| 3000 theta: relative to its scale.
          check_close(gr[1].value(), xt::xarray<double>(xt::cast<double>(gc[1].value())), tol * 100);
        }
      }
    }
  };
  check(0.0, 1e-11);
  check(0.0f, 2e-3);
}

BOOST_AUTO_TEST_CASE(grad_x_is_the_inverse_rotation) {
  // xgrad::rope(xgrad::rope(x, p), -p) = x, and grad_x of rope is one rope node of the negated positions.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4, 6}, 1));
  const auto p = g.input("p", xt::xarray<double>{0, 1, 2, 3});
  const auto back = xgrad::rope(xgrad::rope(x, p), neg(p));
  check_close(back.value(), x.value(), 1e-15);
  const std::size_t before = g.size();
  const auto gx = grad(xgrad::rope(x, p), {x})[0];
  BOOST_TEST(g.node(gx.id()).op_name() == "rope");
  BOOST_TEST(g.size() - before <= 4u);  // rope, its seed of ones, neg(p), rope of the seed
}

BOOST_AUTO_TEST_CASE(empty_axes_give_empty_values) {
  // No rows (an empty batch and no positions): empty y and gradients, and a replay, no crash.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 0, 4}));
  const auto p = g.input("p", xt::xarray<double>::from_shape({0}));
  const auto y = xgrad::rope(x, p);
  BOOST_TEST(shape_str(y.shape()) == "(2, 0, 4)");
  const auto grads = grad(sum(y), {x, p});
  BOOST_TEST(shape_str(grads[0].shape()) == "(2, 0, 4)");
  BOOST_TEST(shape_str(grads[1].shape()) == "(0,)");
  g.replay();
  BOOST_TEST(shape_str(y.shape()) == "(2, 0, 4)");
  Graph<float> h;  // a batch of none: positions (3,) broadcast over x (0, 3, 4)
  const auto yf = xgrad::rope(h.input("x", xt::xarray<float>::from_shape({0, 3, 4})), rope_positions(h, 3));
  BOOST_TEST(shape_str(yf.shape()) == "(0, 3, 4)");
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4}, 1));
  const auto y = xgrad::rope(x, rope_positions(g, 3), 500.0);
  check_attrs_round_trip(y, "rope", R"({"base":500.0})");
  for (const Json& bad_base : {Json(0.0), Json(-1.0), Json("big"), Json(nullptr)}) {
    Json bad = to_json(g, ExportValues::all);
    bad["nodes"][2]["attrs"]["base"] = bad_base;
    check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[2].attrs.base: expected"});
  }
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][2]["attrs"] = {{"base", 1e4}, {"axis", -1}};
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[2].attrs", "axis"});
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays_with_new_positions) {
  // A graph of rope and both gradients through JSON: the same text back, and new x and
  // positions replayed through the imported graph give a fresh build's bits.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 2, 3, 4}, 7));
  const auto p = g.input("p", xt::xarray<double>{{{0, 1, 2}}, {{5, 6, 7}}});  // (2, 1, 3)
  const auto y = xgrad::rope(x, p);
  const auto loss = sum(mul(y, y));
  g.set_output("loss", loss);
  const auto grads = grad(sum(mul(y, g.input("u", random_array<double>({2, 2, 3, 4}, 8)))), {x, p});
  g.set_grad("x", grads[0]);
  g.set_grad("p", grads[1]);
  const std::string text = to_json(g, ExportValues::all).dump();
  const auto imported = graph_from_json<double>(text);
  imported->replay();
  BOOST_TEST(to_json(*imported, ExportValues::all).dump() == text);
  const xt::xarray<double> x2 = random_array<double>({2, 2, 3, 4}, 9), p2 = {{{3, 4, 5}}, {{0.5, 1.5, 2.5}}};
  imported->set_value(imported->var(x.id()), x2);
  imported->set_value(imported->var(p.id()), p2);
  imported->replay();
  Graph<double> fresh;
  const auto fx = fresh.input("x", x2), fp = fresh.input("p", p2);
  const auto fy = xgrad::rope(fx, fp);
  const auto fgrads = grad(sum(mul(fy, fresh.input("u", random_array<double>({2, 2, 3, 4}, 8)))), {fx, fp});
  BOOST_TEST(imported->node(y.id()).value() == fy.value());
  for (std::size_t i = 0; i < 2; ++i) BOOST_TEST(imported->var(grads[i].slot()).value() == fgrads[i].value());
}

BOOST_AUTO_TEST_SUITE_END()
