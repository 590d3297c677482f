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

BOOST_AUTO_TEST_CASE(builds_only_the_nodes_a_wanted_gradient_reads) {
  // beta's gradient is grad_y summed over the rows: no xhat, no product, no mean.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.parameter("gamma", random_array<double>({4}, 2));
  const auto beta = g.parameter("beta", random_array<double>({4}, 3));
  const auto y = xgrad::layer_norm(x, gamma, beta);
  const std::size_t before = g.size();
  grad(y, {beta});
  for (std::size_t i = before; i < g.size(); ++i) {
    const std::string op = g.node(i).op_name();
    BOOST_TEST((op == "sum_to" || op == "constant"), "node " << i << " is " << op);  // the seed ones is a constant
  }
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
