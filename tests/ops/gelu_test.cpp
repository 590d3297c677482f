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

BOOST_AUTO_TEST_CASE(vjp_matches_hand_values) {
  // gelu'(x) = Phi(x) + x phi(x): 0.5 at 0; Phi(1) + phi(1) = 0.841344746068543 + 0.241970724519143.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{0.0, 1.0, -1.0, 0.0});
  const auto u = g.input("u", xt::xarray<double>{1.0, 1.0, 1.0, -2.0});
  const auto z = gelu_vjp(x, u).value();
  BOOST_TEST(z(0) == 0.5);
  BOOST_TEST(z(1) == 1.0833154705876864, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(z(2) == -0.0833154705876864, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(z(3) == -1.0);
  BOOST_TEST(gelu_vjp(x, u, GeluApprox::tanh).value()(0) == 0.5);  // 0.5 (1 + tanh 0)
}

BOOST_AUTO_TEST_CASE(gradient_is_one_node_that_agrees_with_the_nodes_it_replaced) {
  // gelu's VJP was erf, exp, tanh, mul, add and scale nodes before it was one gelu_vjp node; the
  // node rounds in their order, with vector_erf and row_exp for std::erf and std::exp (the tanh
  // form keeps std::tanh: the same bits). The composition is rebuilt here from those ops, in
  // float32 and float64, over a wide range of x.
  const auto check = [](auto zero, double tol) {
    using T = decltype(zero);
    Graph<T> g;
    const auto x = g.input("x", xt::xarray<T>(xt::cast<T>(random_array<double>({40, 50}, 3) * 8.0)));
    const auto u = g.input("u", xt::xarray<T>(xt::cast<T>(random_array<double>({40, 50}, 4))));
    const Var<T> cdf = scale(add(u, mul(u, erf(scale(x, 0.70710678118654752440)))), 0.5);
    const Var<T> density = scale(exp(scale(mul(x, x), -0.5)), 0.39894228040143267794);
    const Var<T> none = add(cdf, mul(mul(u, x), density));
    const double c = 0.79788456080286535588, k = 0.044715;
    const Var<T> x2 = mul(x, x);
    const Var<T> t = tanh(scale(add(x, scale(mul(x, x2), k)), c));
    const Var<T> gx = mul(u, x);
    const Var<T> h = sub(gx, mul(gx, mul(t, t)));
    const Var<T> tanh_form = add(scale(add(u, mul(u, t)), 0.5), scale(add(h, scale(mul(h, x2), 3 * k)), 0.5 * c));
    const auto fused = grad(xgrad::gelu(x), {x}, u)[0];
    const auto fused_tanh = grad(xgrad::gelu(x, GeluApprox::tanh), {x}, u)[0];
    BOOST_TEST(fused.node().op_name() == "gelu_vjp");
    check_close(fused.value(), none.value(), tol);
    BOOST_TEST(same_bits(fused_tanh.value(), tanh_form.value()), dtype_name<T>());
  };
  check(0.0f, 1e-6);
  check(0.0, 1e-15);
}

BOOST_AUTO_TEST_CASE(vjp_node_matches_finite_differences_to_second_order) {
  // gelu_vjp's own VJP (w.r.t. x and grad_out), and the VJP of that: gelu's second and third
  // derivatives, both forms.
  for (GeluApprox approx : {GeluApprox::none, GeluApprox::tanh}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({3, 4}, 5) * 2.0);
    const auto u = g.input("u", random_array<double>({3, 4}, 6));
    const auto w = g.input("w", random_array<double>({3, 4}, 7));
    const auto z = gelu_vjp(x, u, approx);
    check_gradients(z, {x, u});
    check_gradients(grad(z, {x, u}, w)[0], {x, u, w});
  }
}

BOOST_AUTO_TEST_CASE(vjp_rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto u = g.input("u", xt::zeros<double>({3, 2}));
  check_error([&] { gelu_vjp(x, u); }, {"gelu_vjp (node 2): x and grad_out differ in shape: x is (2, 3), grad_out is (3, 2)"});
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", {{-1, 2}});
  check_attrs_round_trip(xgrad::gelu(x), "gelu", R"({"approximate":"none"})");
  check_attrs_round_trip(xgrad::gelu(x, GeluApprox::tanh), "gelu", R"({"approximate":"tanh"})");
  check_attrs_round_trip(gelu_vjp(x, x, GeluApprox::tanh), "gelu_vjp", R"({"approximate":"tanh"})");
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][1]["attrs"]["approximate"] = "erf";
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[1].attrs.approximate: expected \"none\" or \"tanh\", got \"erf\""});
}

BOOST_AUTO_TEST_SUITE_END()
