#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(gelu)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const double inf = std::numeric_limits<double>::infinity();
  const auto x = g.input("x", xt::xarray<double>{0.0, 1.0, -1.0, 10.0, inf, -inf, std::nan("")});
  const auto y = xgrad::gelu(x).value();
  BOOST_TEST(y(0) == 0.0);
  BOOST_TEST(y(1) == 0.5 * (1 + std::erf(1 / std::sqrt(2.0))), boost::test_tools::tolerance(1e-15));  // Phi(1) = 0.8413...
  BOOST_TEST(y(1) == 0.841344746068543, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y(2) == -0.15865525393145702, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y(3) == 10.0);
  BOOST_TEST(y(4) == inf);
  BOOST_TEST(std::isnan(y(5)));  // -inf * Phi(-inf) = -inf * 0, as PyTorch
  BOOST_TEST(std::isnan(y(6)));
  const auto t = xgrad::gelu(x, GeluApprox::tanh).value();
  BOOST_TEST(t(0) == 0.0);
  BOOST_TEST(t(1) == 0.8411919906082768, boost::test_tools::tolerance(1e-15));  // PyTorch, approximate="tanh"
  BOOST_TEST(t(4) == inf);
  BOOST_TEST(std::isnan(t(5)));
}

BOOST_AUTO_TEST_CASE(both_forms_match_pytorch_to_second_order) {
  // PyTorch's y, grad for u, and the gradient of <grad, v> w.r.t. x (second order), float64.
  for (const auto& [name, approx] : {std::pair{"none", GeluApprox::none}, std::pair{"tanh", GeluApprox::tanh}}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto x = g.input("x", torch_fixture("gelu_x"));
      const auto u = g.input("u", torch_fixture("gelu_u"));
      const auto v = g.input("v", torch_fixture("gelu_v"));
      const auto y = xgrad::gelu(x, approx);
      check_close(y.value(), torch_fixture(std::string("gelu_") + name + "_y"), 1e-15);
      const auto gx = grad(y, {x}, u)[0];
      check_close(gx.value(), torch_fixture(std::string("gelu_") + name + "_grad"));
      check_close(grad(gx, {x}, v)[0].value(), torch_fixture(std::string("gelu_") + name + "_grad2"));
    }
  }
}

BOOST_AUTO_TEST_CASE(float32_agrees_with_float64) {
  for (GeluApprox approx : {GeluApprox::none, GeluApprox::tanh}) {
    Graph<float> f;
    Graph<double> d;
    const xt::xarray<double> x = torch_fixture("gelu_x");
    const auto yf = xgrad::gelu(f.input("x", xt::xarray<float>(xt::cast<float>(x))), approx);
    const auto yd = xgrad::gelu(d.input("x", x), approx);
    check_close(yf.value(), yd.value(), 1e-6);
  }
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  for (GeluApprox approx : {GeluApprox::none, GeluApprox::tanh}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({3, 4}, 1) * 2.0);
    const auto u = g.input("u", random_array<double>({3, 4}, 2));
    check_gradients(xgrad::gelu(x, approx), {x});
    check_gradients(grad(xgrad::gelu(x, approx), {x}, u)[0], {x, u});  // second order
  }
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", {{-1, 2}});
  check_attrs_round_trip(xgrad::gelu(x), "gelu", R"({"approximate":"none"})");
  check_attrs_round_trip(xgrad::gelu(x, GeluApprox::tanh), "gelu", R"({"approximate":"tanh"})");
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][1]["attrs"]["approximate"] = "erf";
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[1].attrs.approximate: expected \"none\" or \"tanh\", got \"erf\""});
}

BOOST_AUTO_TEST_SUITE_END()
