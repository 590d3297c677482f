// pow(x, p) of a scalar exponent: hand values at the edges of IEEE arithmetic, PyTorch's values,
// gradients and second derivatives for exponents 2, 0.5, 1.5, -1, 3, 0 and 1, finite differences
// to second order, the exponents refused, and the JSON round trip.
#include "../check.hpp"

#include <limits>

namespace xgrad_tests {  // the suite is a namespace: `pow` is <cmath>'s (and xgrad's)

BOOST_AUTO_TEST_SUITE(pow)

const double inf = std::numeric_limits<double>::infinity();
const double nan = std::numeric_limits<double>::quiet_NaN();

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{0.0, -0.0, 1.0, -2.0, 4.0, inf, -inf});
  BOOST_TEST((xgrad::pow(x, 2.0).value() == xt::xarray<double>{0, 0, 1, 4, 16, inf, inf}));
  BOOST_TEST((xgrad::pow(x, 3.0).value() == xt::xarray<double>{0, -0.0, 1, -8, 64, inf, -inf}));
  BOOST_TEST(std::signbit(xgrad::pow(x, 3.0).value()(1)));  // (-0)^3 = -0
  BOOST_TEST((xgrad::pow(x, -1.0).value() == xt::xarray<double>{inf, -inf, 1, -0.5, 0.25, 0, -0.0}));
  BOOST_TEST((xgrad::pow(x, 0.0).value() == xt::ones<double>({7})));  // x^0 = 1, 0 and inf included
  const auto half = xgrad::pow(x, 0.5).value();
  BOOST_TEST(half(0) == 0.0);
  BOOST_TEST(half(2) == 1.0);
  BOOST_TEST(std::isnan(half(3)));  // a negative x to a non-integer power
  BOOST_TEST(half(4) == 2.0);
  BOOST_TEST(half(5) == inf);
  BOOST_TEST((xgrad::pow(x, 1.0).value() == x.value()));
  const auto n = g.input("n", xt::xarray<double>{nan});
  BOOST_TEST(std::isnan(xgrad::pow(n, 2.0).value()(0)));
  BOOST_TEST(xgrad::pow(n, 0.0).value()(0) == 1.0);  // as std::pow and torch.pow
  // float32 rounds p to float and computes in float.
  Graph<float> f;
  const auto xf = f.input("x", xt::xarray<float>{3.0f, 2.0f});
  BOOST_TEST(xgrad::pow(xf, 0.1).value()(0) == std::pow(3.0f, 0.1f));
  BOOST_TEST(xgrad::pow(xf, 2.0).value()(1) == 4.0f);
}

BOOST_AUTO_TEST_CASE(matches_pytorch_with_gradients_of_two_orders) {
  // torch.pow(x, p): y, the gradient for u and the VJP of that gradient for v.
  const std::pair<const char*, const char*> cases[] = {{"2", "real"},     {"0.5", "positive"}, {"1.5", "positive"},
                                                       {"-1", "negative"}, {"3", "negative"},   {"0", "real"},
                                                       {"1", "real"}};
  for (const auto& [p, input] : cases) {
    BOOST_TEST_CONTEXT("p = " << p) {
      Graph<double> g;
      const auto x = g.input("x", torch_fixture(std::string("pow_") + input));
      const auto u = g.input("u", torch_fixture("pow_u"));
      const auto v = g.input("v", torch_fixture("pow_v"));
      const auto y = xgrad::pow(x, std::stod(p));
      check_close(y.value(), torch_fixture(std::string("pow_") + p + "_y"));
      const auto gx = grad(y, {x}, u)[0];
      check_close(gx.value(), torch_fixture(std::string("pow_") + p + "_grad"));
      check_close(grad(gx, {x}, v)[0].value(), torch_fixture(std::string("pow_") + p + "_grad2"));
    }
  }
}

BOOST_AUTO_TEST_CASE(pytorchs_forms_give_pytorchs_bits) {
  // torch.pow computes 2, 3, -2, 0.5, -0.5 and -1 without pow (x * x, x * x * x, 1 / (x * x),
  // sqrt, 1 / sqrt, 1 / x): the same bits as its fixtures, where std::pow differs by an ulp.
  const std::pair<const char*, const char*> cases[] = {{"2", "real"}, {"0.5", "positive"}, {"-1", "negative"}, {"3", "negative"}};
  for (const auto& [p, input] : cases) {
    Graph<double> g;
    const auto x = g.input("x", torch_fixture(std::string("pow_") + input));
    BOOST_TEST(xgrad::pow(x, std::stod(p)).value() == torch_fixture(std::string("pow_") + p + "_y"), "p = " << p);
  }
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{-0.0, -inf, 4.0, 0.0});
  const auto half = xgrad::pow(x, 0.5).value();
  BOOST_TEST((half(0) == 0.0 && std::signbit(half(0))));  // sqrt(-0), as torch (std::pow gives +0)
  BOOST_TEST(std::isnan(half(1)));                       // sqrt(-inf), as torch (std::pow gives inf)
  BOOST_TEST((xgrad::pow(x, -0.5).value()(2) == 0.5));
  BOOST_TEST((xgrad::pow(x, -2.0).value()(2) == 1.0 / 16));
  BOOST_TEST((xgrad::pow(x, -2.0).value()(3) == inf));
}

BOOST_AUTO_TEST_CASE(exponent_zero_gives_a_gradient_of_exactly_zero) {
  // x^0 = 1: the gradient is a constant 0, also at x = 0 and from an inf grad_out (p x^(p - 1)
  // would be 0 * inf there); p = 2 at x = 0 gives 0 too.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{0.0, -3.0, inf});
  const auto gz = grad(xgrad::pow(x, 0.0), {x}, g.constant("grad_out", xt::xarray<double>{inf, nan, 1.0}))[0];
  BOOST_TEST((gz.value() == xt::zeros<double>({3})));
  BOOST_TEST(gz.node().is_leaf());  // zeros, no product
  const auto g2 = grad(sum(xgrad::pow(x, 2.0)), {x})[0].value();
  BOOST_TEST(g2(0) == 0.0);
  BOOST_TEST(g2(1) == -6.0);
  // p = 1: grad_out itself, no node.
  const auto before = g.size();
  const auto seed = g.constant("seed", xt::xarray<double>{1.0, 2.0, 3.0});
  const auto y1 = xgrad::pow(x, 1.0);
  BOOST_TEST(grad(y1, {x}, seed)[0].id() == seed.id());
  BOOST_TEST(g.size() == before + 2);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences_to_second_order) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4}, 1));
  const auto p = g.input("p", 0.5 + 0.75 * (xt::tanh(random_array<double>({3, 4}, 2)) + 1.0));  // in (0.5, 2)
  const auto u = g.input("u", random_array<double>({3, 4}, 3));
  for (double e : {2.0, 3.0, 0.0, 1.0, -2.0}) {
    BOOST_TEST_CONTEXT("x^" << e) {
      check_gradients(xgrad::pow(x, e), {x});
      check_gradients(grad(xgrad::pow(x, e), {x}, u)[0], {x, u});
    }
  }
  for (double e : {0.5, 1.5, -1.0, -0.5, 2.5}) {
    BOOST_TEST_CONTEXT("p^" << e) {
      check_gradients(xgrad::pow(p, e), {p});
      check_gradients(grad(xgrad::pow(p, e), {p}, u)[0], {p, u});
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_an_exponent_that_is_not_finite) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{1.0, 2.0});
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::pow(x, inf); }, {"pow: the exponent must be finite, got inf"});
  check_error([&] { xgrad::pow(x, -inf); }, {"pow: the exponent must be finite, got -inf"});
  check_error([&] { xgrad::pow(x, nan); }, {"pow: the exponent must be finite, got nan"});
  BOOST_TEST(g.size() == nodes);  // nothing added
  // The shape is any: pow of a scalar, of an empty array.
  BOOST_TEST(xgrad::pow(g.input("s", xt::xarray<double>(3.0)), 2.0).value()() == 9.0);
  BOOST_TEST(xgrad::pow(g.input("e", xt::xarray<double>::from_shape({0, 2})), 2.0).value().size() == 0u);
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{{1.5, 2.0}});
  check_attrs_round_trip(xgrad::pow(x, 2.5), "pow", R"({"exponent":2.5})");
  check_attrs_round_trip(xgrad::pow(x, -1.0), "pow", R"({"exponent":-1.0})");
  // A file's exponent must be finite too, named by its JSON path.
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][1]["attrs"]["exponent"] = "inf";
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[1].attrs.exponent: expected a finite number, got inf"});
  bad["nodes"][1]["attrs"] = Json::object();
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[1].attrs", "exponent"});
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace xgrad_tests
