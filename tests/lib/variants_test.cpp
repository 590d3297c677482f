// lib/variants: the attention variants' building blocks, against PyTorch float64
// (tests/data/make_torch_fixtures.py) and finite differences.
#include "../check.hpp"

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(variants)

BOOST_AUTO_TEST_CASE(rope_matches_pytorch_with_gradients_for_x_and_positions) {
  for (const std::string name : {"t", "batch"}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto x = g.input("x", torch_fixture("rope_x"));  // (2, 3, 5, 8)
      const auto p = name == "t" ? g.input("positions", xt::xarray<double>{0, 1, 2, 3, 4})
                                 : g.input("positions", torch_fixture("rope_positions_batch"));  // (2, 1, 5)
      const auto u = g.input("u", torch_fixture("rope_u"));
      const auto y = rope(x, p);
      check_close(y.value(), torch_fixture("rope_" + name + "_y"));
      const auto grads = grad(y, {x, p}, u);
      check_close(grads[0].value(), torch_fixture("rope_" + name + "_grad_x"));
      check_close(grads[1].value(), torch_fixture("rope_" + name + "_grad_positions"));
    }
  }
}

BOOST_AUTO_TEST_CASE(rope_hand_values_and_finite_differences) {
  // d = 2: one pair, rotated by p theta_0 = p radians (theta_0 = base^0 = 1).
  Graph<double> g;
  const auto x = g.input("x", {{1, 0}, {1, 0}, {0, 2}});
  const auto y = rope(x, rope_positions(g, 3));
  const double c1 = std::cos(1.0), s1 = std::sin(1.0), c2 = std::cos(2.0), s2 = std::sin(2.0);
  BOOST_TEST(y.value() == (xt::xarray<double>{{1, 0}, {c1, s1}, {-2 * s2, 2 * c2}}), boost::test_tools::per_element());
  // Position 0 leaves x as it is; the rotation keeps each pair's norm.
  const auto z = g.input("z", random_array<double>({4, 6}, 9));
  const auto rz = rope(z, rope_positions(g, 4), 100.0);
  BOOST_TEST(xt::xarray<double>(xt::row(rz.value(), 0)) == xt::xarray<double>(xt::row(z.value(), 0)));
  for (std::size_t t = 0; t < 4; ++t) {
    for (std::size_t i = 0; i < 3; ++i) {
      const double before = std::hypot(z.value()(t, i), z.value()(t, i + 3)), after = std::hypot(rz.value()(t, i), rz.value()(t, i + 3));
      BOOST_TEST(after == before, boost::test_tools::tolerance(1e-14));
    }
  }
  const auto p = g.input("p", xt::xarray<double>{0.5, -1.0, 3.0, 7.5});
  check_gradients(rope(z, p), {z, p});
  const auto u = g.input("u", random_array<double>({4, 6}, 10));
  check_gradients(grad(rope(z, p), {z, p}, u)[1], {z, p, u});  // second order through the positions
}

BOOST_AUTO_TEST_CASE(rope_rejects_bad_shapes_naming_them) {
  Graph<double> g;
  const auto odd = g.input("odd", xt::xarray<double>::from_shape({5, 7}));
  const auto x = g.input("x", xt::xarray<double>::from_shape({2, 3, 5, 8}));
  const auto v = g.input("v", xt::xarray<double>::from_shape({8}));
  const std::size_t nodes = g.size();
  check_error([&] { rope(odd, rope_positions(g, 5)); },
              {"rope: the last axis of x must be even and non-empty", "x is (5, 7), positions (5,)"});
  check_error([&] { rope(v, rope_positions(g, 1)); }, {"rope: x must be (..., T, d), of rank >= 2: x is (8,)"});
  const auto pb = g.input("pb", xt::xarray<double>::from_shape({2, 5}));
  check_error([&] { rope(x, pb); }, {"rope: positions must broadcast against x's shape without its last axis, (2, 3, 5)",
                                     "x is (2, 3, 5, 8), positions (2, 5)"});
  check_error([&] { rope(x, rope_positions(g, 4)); }, {"positions (4,)"});
  check_error([&] { rope(x, rope_positions(g, 5), 0.0); }, {"rope: base must be finite and > 0, got 0"});
  check_error([&] { rope(x, rope_positions(g, 5), std::nan("")); }, {"rope: base must be finite and > 0"});
  BOOST_TEST(g.size() == nodes + 6);  // the 6 leaves made here (positions, pb) only: no node of a refused rope
}

BOOST_AUTO_TEST_SUITE_END()
