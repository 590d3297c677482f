#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(layer_norm)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // Row (1, 2, 3): mean 2, biased variance 2/3; with eps 0, xhat = (-1, 0, 1) sqrt(3/2).
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {5, 5, 5}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto beta = g.parameter("beta", xt::xarray<double>{0, 1, 0});
  const auto y = xgrad::layer_norm(x, gamma, beta, 0.0);
  const double r = std::sqrt(1.5);
  BOOST_TEST(y.value()(0, 0) == -r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 1) == 1.0);
  BOOST_TEST(y.value()(0, 2) == 3 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isnan(y.value()(1, 0)));  // variance 0 and eps 0: 0 * inf
  const auto z = xgrad::layer_norm(x, gamma, beta);  // eps 1e-5: a constant row gives beta
  for (std::size_t j = 0; j < 3; ++j) BOOST_TEST(z.value()(1, j) == beta.value()(j));
  // Outputs 1 and 2: the mean and 1 / sqrt(var + eps), (rows, 1).
  const xt::xarray<double> means = matrix<double>({{2.0}, {5.0}});
  BOOST_TEST(g.var(z.id(), 1).value() == means);
  BOOST_TEST(g.var(z.id(), 2).value()(0, 0) == 1 / std::sqrt(2.0 / 3 + 1e-5), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(g.var(z.id(), 2).value()(1, 0) == 1 / std::sqrt(1e-5), boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(matches_pytorch) {
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("layer_norm_x"));  // (2, 3, 5), one constant row
  const auto gamma = g.parameter("gamma", torch_fixture("layer_norm_gamma"));
  const auto beta = g.parameter("beta", torch_fixture("layer_norm_beta"));
  const auto u = g.input("u", torch_fixture("layer_norm_u"));
  const auto y = xgrad::layer_norm(x, gamma, beta);
  check_close(y.value(), torch_fixture("layer_norm_y"));
  const auto grads = grad(y, {x, gamma, beta}, u);
  check_close(grads[0].value(), torch_fixture("layer_norm_grad_x"));
  check_close(grads[1].value(), torch_fixture("layer_norm_grad_gamma"));
  check_close(grads[2].value(), torch_fixture("layer_norm_grad_beta"));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences_for_every_output) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.input("gamma", random_array<double>({4}, 2));
  const auto beta = g.input("beta", random_array<double>({4}, 3));
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 4));
  const auto y = xgrad::layer_norm(x, gamma, beta, 0.1);
  check_gradients(y, {x, gamma, beta});
  check_gradients(g.var(y.id(), 1), {x, gamma, beta});  // the mean alone
  check_gradients(g.var(y.id(), 2), {x, gamma, beta});  // the rstd alone
  check_gradients(grad(y, {x, gamma, beta}, u)[0], {x, gamma, beta, u});  // second order
  check_gradients(grad(y, {x, gamma, beta}, u)[1], {x, gamma, beta, u});
}

BOOST_AUTO_TEST_CASE(grad_y_reaches_the_inputs_through_one_fused_node) {
  // Whichever gradient is asked for, grad_y's part is one layer_norm_vjp node (beside the seed).
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.parameter("gamma", random_array<double>({4}, 2));
  const auto beta = g.parameter("beta", random_array<double>({4}, 3));
  const auto y = xgrad::layer_norm(x, gamma, beta);
  for (const auto& wrt : {std::vector<Var<double>>{beta}, std::vector<Var<double>>{x, gamma, beta}}) {
    const std::size_t before = g.size();
    grad(y, wrt);
    std::size_t fused = 0;
    for (std::size_t i = before; i < g.size(); ++i) {
      const std::string op = g.node(i).op_name();
      fused += op == "layer_norm_vjp";
      BOOST_TEST((op == "layer_norm_vjp" || op == "constant"), "node " << i << " is " << op);  // the seed ones is a constant
    }
    BOOST_TEST(fused == 1u);
  }
}

// layer_norm_vjp's formula composed of nodes, as layer_norm's VJP was built before it was fused.
template <class T>
std::vector<Var<T>> composed_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& mu, const Var<T>& rstd,
                                 const Var<T>& g) {
  const Var<T> xhat = mul(sub(x, mu), rstd);
  const Var<T> gy = mul(g, gamma);
  const Var<T> gx = mul(rstd, sub(sub(gy, mean(gy, {-1}, true)), mul(xhat, mean(mul(gy, xhat), {-1}, true))));
  return {gx, sum_to_shape_of(mul(g, xhat), gamma), sum_to_shape_of(g, gamma)};
}

BOOST_AUTO_TEST_CASE(vjp_node_agrees_with_its_composition) {
  // On layer_norm's own mean and rstd, 1 and 2 threads (the same bits), float32 and float64.
  const auto check = [](auto zero, double tol) {
    using T = decltype(zero);
    std::vector<xt::xarray<T>> by_threads[2];
    for (int threads = 1; threads <= 2; ++threads) {
      const test::BlasThreads use(threads);
      Graph<T> g;
      const auto cast = [](const xt::xarray<double>& a) { return xt::xarray<T>(xt::cast<T>(a)); };
      const auto x = g.input("x", cast(random_array<double>({64, 50, 96}, 1) * 3.0));
      const auto gamma = g.input("gamma", cast(random_array<double>({96}, 2)));
      const auto beta = g.input("beta", cast(random_array<double>({96}, 3)));
      const auto u = g.input("u", cast(random_array<double>({64, 50, 96}, 4)));
      const auto y = xgrad::layer_norm(x, gamma, beta);
      const auto fused = layer_norm_vjp(x, gamma, g.var(y.id(), 1), g.var(y.id(), 2), u);
      const auto composed = composed_vjp(x, gamma, g.var(y.id(), 1), g.var(y.id(), 2), u);
      check_close(fused.grad_x.value(), composed[0].value(), tol);
      check_close(fused.grad_gamma.value(), composed[1].value(), 40 * tol);  // sums of 3200 rows
      check_close(fused.grad_beta.value(), composed[2].value(), 40 * tol);
      by_threads[threads - 1] = {fused.grad_x.value(), fused.grad_gamma.value(), fused.grad_beta.value()};
    }
    for (std::size_t k = 0; k < 3; ++k) BOOST_TEST(same_bits(by_threads[0][k], by_threads[1][k]), "output " << k);
  };
  check(0.0f, 1e-5);
  check(0.0, 1e-13);
}

BOOST_AUTO_TEST_CASE(vjp_node_matches_finite_differences_to_second_order) {
  // Every input of the node free (mean and rstd as leaves too), each output and two of them at
  // once, then the gradient of those gradients.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.input("gamma", random_array<double>({4}, 2));
  const auto mu = g.input("mu", random_array<double>({2, 3, 1}, 3));
  const auto rstd = g.input("rstd", random_array<double>({2, 3, 1}, 4) + 2.0);
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 5));
  const auto w = g.input("w", random_array<double>({2, 3, 4}, 6));
  const std::vector<Var<double>> all = {x, gamma, mu, rstd, u};
  const auto f = layer_norm_vjp(x, gamma, mu, rstd, u);
  check_gradients(f.grad_x, all);
  check_gradients(f.grad_gamma, all);
  check_gradients(f.grad_beta, all);
  const auto second = grad(f.grad_x, all, w);
  check_gradients(second[0], {x, gamma, mu, rstd, u, w});
  check_gradients(second[3], {x, gamma, mu, rstd, u, w});
  // An input given twice (grad_y = x): the gradients of both slots together.
  check_gradients(layer_norm_vjp(x, gamma, mu, rstd, x).grad_x, {x, gamma, mu, rstd});
}

BOOST_AUTO_TEST_CASE(vjp_rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto st = g.input("st", xt::ones<double>({2, 1}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  check_error([&] { layer_norm_vjp(x, d3, x, st, x); }, {"layer_norm_vjp (node 4): x (2, 3) needs gamma (3,), mean and rstd (2, 1) and grad_y (2, 3); got gamma (3,), mean (2, 3), rstd (2, 1), grad_y (2, 3)"});
  check_error([&] { layer_norm_vjp(x, st, st, st, x); }, {"got gamma (2, 1)"});
  check_error([&] { layer_norm_vjp(x, d3, st, st, st); }, {"grad_y (2, 1)"});
  check_error([&] { layer_norm_vjp(s, s, s, s, s); }, {"layer_norm_vjp (node 4): normalises the last axis, of at least 1 element: x is ()"});
  BOOST_TEST(g.size() == 4u);
}

BOOST_AUTO_TEST_CASE(float32_agrees_with_float64) {
  Graph<float> f;
  Graph<double> d;
  const xt::xarray<double> x = torch_fixture("layer_norm_x"), gamma = torch_fixture("layer_norm_gamma"),
                           beta = torch_fixture("layer_norm_beta");
  const auto cast = [](const xt::xarray<double>& a) { return xt::xarray<float>(xt::cast<float>(a)); };
  const auto yf = xgrad::layer_norm(f.input("x", cast(x)), f.input("g", cast(gamma)), f.input("b", cast(beta)));
  const auto yd = xgrad::layer_norm(d.input("x", x), d.input("g", gamma), d.input("b", beta));
  check_close(yf.value(), yd.value(), 1e-5);
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_and_eps) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  const auto e = g.input("e", xt::zeros<double>({2, 0}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto d2 = g.input("d2", xt::ones<double>({2}));
  check_error([&] { xgrad::layer_norm(x, d2, d3); }, {"layer_norm (node 5): gamma (2,) and beta (3,) must be (3,), the last axis of x (2, 3)"});
  check_error([&] { xgrad::layer_norm(x, d3, d2); }, {"gamma (3,) and beta (2,) must be (3,)"});
  check_error([&] { xgrad::layer_norm(s, d3, d3); }, {"layer_norm (node 5): normalises the last axis, of at least 1 element: x is ()"});
  check_error([&] { xgrad::layer_norm(e, d3, d3); }, {"x is (2, 0)"});
  check_error([&] { xgrad::layer_norm(x, d3, d3, -1.0); }, {"layer_norm: eps must be finite and >= 0, got -1"});
  check_error([&] { xgrad::layer_norm(x, d3, d3, std::nan("")); }, {"eps must be finite and >= 0, got nan"});
  BOOST_TEST(g.size() == 5u);
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  {
    Graph<double> v;
    const auto x = v.input("x", {{1, 2, 4}});
    const auto f = layer_norm_vjp(x, v.input("gamma", xt::xarray<double>{1, 2, 3}), v.input("mu", {{2}}), v.input("rstd", {{0.5}}), x);
    check_attrs_round_trip(f.grad_x, "layer_norm_vjp", "{}");
  }
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 4}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto beta = g.parameter("beta", xt::xarray<double>{0, 1, 0});
  const auto y = xgrad::layer_norm(x, gamma, beta, 1e-6);
  check_attrs_round_trip(y, "layer_norm", R"({"eps":1e-06})");
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][3]["attrs"]["eps"] = -0.5;
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[3].attrs.eps: expected a finite number >= 0, got -0.5"});
}

BOOST_AUTO_TEST_SUITE_END()
