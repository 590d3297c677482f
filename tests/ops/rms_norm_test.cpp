#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(rms_norm)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // Row (1, 2, 2): mean of squares 3; with eps 0, y = (1, 2, 2) / sqrt(3) * gamma.
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 2}, {0, 0, 0}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto y = xgrad::rms_norm(x, gamma, 0.0);
  const double r = 1 / std::sqrt(3.0);
  BOOST_TEST(y.value()(0, 0) == r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 1) == 4 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(y.value()(0, 2) == 6 * r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isnan(y.value()(1, 0)));  // a row of zeros and eps 0: 0 * inf
  BOOST_TEST(g.var(y.id(), 1).value()(0, 0) == r, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isinf(g.var(y.id(), 1).value()(1, 0)));
  // The default eps 1e-5: a row of zeros gives zeros, its rstd 1 / sqrt(1e-5); output 1 is (rows, 1).
  const auto z = xgrad::rms_norm(x, gamma);
  for (std::size_t j = 0; j < 3; ++j) BOOST_TEST(z.value()(1, j) == 0.0);
  const auto& rstd = g.var(z.id(), 1).value();
  BOOST_TEST_REQUIRE(rstd.shape() == (std::vector<std::size_t>{2, 1}), boost::test_tools::per_element());
  BOOST_TEST(rstd(0, 0) == 1 / std::sqrt(3 + 1e-5), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(rstd(1, 0) == 1 / std::sqrt(1e-5), boost::test_tools::tolerance(1e-15));
  // Rank 1, d = 1: x / |x| (eps 0) times gamma.
  const auto one = g.input("one", xt::xarray<double>{-4});
  BOOST_TEST(xgrad::rms_norm(one, g.input("g1", xt::xarray<double>{2.5}), 0.0).value()(0) == -2.5);
  Graph<float> f;
  const auto yf = xgrad::rms_norm(f.input("x", xt::xarray<float>{3, 4}), f.input("g", xt::xarray<float>{1, 1}), 0.0);
  // mean of squares 12.5: (3, 4) / sqrt(12.5)
  BOOST_TEST(yf.value()(1) == 4 / std::sqrt(12.5f), boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(matches_pytorch) {
  // The formula in torch float64 with autograd (torch 1.13 has no F.rms_norm), a row of zeros included.
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("rms_norm_x"));  // (2, 3, 5)
  const auto gamma = g.parameter("gamma", torch_fixture("rms_norm_gamma"));
  const auto u = g.input("u", torch_fixture("rms_norm_u"));
  const auto w = g.input("w", torch_fixture("rms_norm_w"));
  const auto y = xgrad::rms_norm(x, gamma);
  const auto rstd = g.var(y.id(), 1);
  check_close(y.value(), torch_fixture("rms_norm_y"));
  check_close(rstd.value(), torch_fixture("rms_norm_rstd"));
  const auto grads = grad(y, {x, gamma}, u);
  check_close(grads[0].value(), torch_fixture("rms_norm_grad_x"));
  check_close(grads[1].value(), torch_fixture("rms_norm_grad_gamma"));
  // Both outputs carry a gradient: u on y and w on rstd.
  const auto both = grad(add(sum(mul(y, u)), sum(mul(rstd, w))), {x, gamma});
  check_close(both[0].value(), torch_fixture("rms_norm_both_grad_x"));
  check_close(both[1].value(), torch_fixture("rms_norm_both_grad_gamma"));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences_for_every_output) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.input("gamma", random_array<double>({4}, 2));
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 4));
  const auto y = xgrad::rms_norm(x, gamma, 0.1);
  check_gradients(y, {x, gamma});
  check_gradients(g.var(y.id(), 1), {x, gamma});  // the rstd alone
  check_gradients(add(sum(y), sum(g.var(y.id(), 1))), {x, gamma});  // both
  check_gradients(grad(y, {x, gamma}, u)[0], {x, gamma, u});  // second order
  check_gradients(grad(y, {x, gamma}, u)[1], {x, gamma, u});
  // Rank 1 and the default eps.
  const auto v = g.input("v", random_array<double>({5}, 5));
  const auto gv = g.input("gv", random_array<double>({5}, 6));
  check_gradients(xgrad::rms_norm(v, gv), {v, gv});
  check_gradients(grad(xgrad::rms_norm(v, gv), {v, gv})[0], {v, gv});
}

BOOST_AUTO_TEST_CASE(grad_y_reaches_the_inputs_through_one_fused_node) {
  // Whichever gradient is asked for, grad_y's part is one rms_norm_vjp node (beside the seed).
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.parameter("gamma", random_array<double>({4}, 2));
  const auto y = xgrad::rms_norm(x, gamma);
  for (const auto& wrt : {std::vector<Var<double>>{gamma}, std::vector<Var<double>>{x, gamma}}) {
    const std::size_t before = g.size();
    grad(y, wrt);
    std::size_t fused = 0;
    for (std::size_t i = before; i < g.size(); ++i) {
      const std::string op = g.node(i).op_name();
      fused += op == "rms_norm_vjp";
      BOOST_TEST((op == "rms_norm_vjp" || op == "constant"), "node " << i << " is " << op);  // the seed ones is a constant
    }
    BOOST_TEST(fused == 1u);
  }
}

// rms_norm_vjp's formula composed of nodes.
template <class T>
std::vector<Var<T>> composed_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& rstd, const Var<T>& g) {
  const Var<T> xhat = mul(x, rstd);
  const Var<T> gy = mul(g, gamma);
  const Var<T> gx = mul(rstd, sub(gy, mul(xhat, mean(mul(gy, xhat), {-1}, true))));
  return {gx, sum_to_shape_of(mul(g, xhat), gamma)};
}

BOOST_AUTO_TEST_CASE(vjp_node_agrees_with_its_composition) {
  // On rms_norm's own rstd, 1 and 2 threads (the same bits), float32 and float64.
  const auto check = [](auto zero, double tol) {
    using T = decltype(zero);
    std::vector<xt::xarray<T>> by_threads[2];
    for (int threads = 1; threads <= 2; ++threads) {
      const test::BlasThreads use(threads);
      Graph<T> g;
      const auto cast = [](const xt::xarray<double>& a) { return xt::xarray<T>(xt::cast<T>(a)); };
      const auto x = g.input("x", cast(random_array<double>({64, 50, 96}, 1) * 3.0));
      const auto gamma = g.input("gamma", cast(random_array<double>({96}, 2)));
      const auto u = g.input("u", cast(random_array<double>({64, 50, 96}, 4)));
      const auto y = xgrad::rms_norm(x, gamma);
      const auto fused = rms_norm_vjp(x, gamma, g.var(y.id(), 1), u);
      const auto composed = composed_vjp(x, gamma, g.var(y.id(), 1), u);
      check_close(fused.grad_x.value(), composed[0].value(), tol);
      check_close(fused.grad_gamma.value(), composed[1].value(), 40 * tol);  // sums of 3200 rows
      by_threads[threads - 1] = {fused.grad_x.value(), fused.grad_gamma.value()};
    }
    for (std::size_t k = 0; k < 2; ++k) BOOST_TEST(same_bits(by_threads[0][k], by_threads[1][k]), "output " << k);
  };
  check(0.0f, 1e-5);
  check(0.0, 1e-13);
}

BOOST_AUTO_TEST_CASE(vjp_node_matches_finite_differences_to_second_order) {
  // Every input of the node free (rstd a leaf too), each output, then the gradient of those gradients.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto gamma = g.input("gamma", random_array<double>({4}, 2));
  const auto rstd = g.input("rstd", random_array<double>({2, 3, 1}, 4) + 2.0);
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 5));
  const auto w = g.input("w", random_array<double>({2, 3, 4}, 6));
  const std::vector<Var<double>> all = {x, gamma, rstd, u};
  const auto f = rms_norm_vjp(x, gamma, rstd, u);
  check_gradients(f.grad_x, all);
  check_gradients(f.grad_gamma, all);
  const auto second = grad(f.grad_x, all, w);
  check_gradients(second[0], {x, gamma, rstd, u, w});
  check_gradients(second[2], {x, gamma, rstd, u, w});
  // An input given twice (grad_y = x): the gradients of both slots together.
  check_gradients(rms_norm_vjp(x, gamma, rstd, x).grad_x, {x, gamma, rstd});
}

BOOST_AUTO_TEST_CASE(vjp_rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto st = g.input("st", xt::ones<double>({2, 1}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  check_error([&] { rms_norm_vjp(x, d3, x, x); }, {"rms_norm_vjp (node 4): x (2, 3) needs gamma (3,), rstd (2, 1) and grad_y (2, 3); got gamma (3,), rstd (2, 3), grad_y (2, 3)"});
  check_error([&] { rms_norm_vjp(x, st, st, x); }, {"got gamma (2, 1)"});
  check_error([&] { rms_norm_vjp(x, d3, st, st); }, {"grad_y (2, 1)"});
  check_error([&] { rms_norm_vjp(s, s, s, s); }, {"rms_norm_vjp (node 4): normalises the last axis, of at least 1 element: x is ()"});
  BOOST_TEST(g.size() == 4u);
}

BOOST_AUTO_TEST_CASE(float32_agrees_with_float64) {
  Graph<float> f;
  Graph<double> d;
  const xt::xarray<double> x = torch_fixture("rms_norm_x"), gamma = torch_fixture("rms_norm_gamma"),
                           u = torch_fixture("rms_norm_u");
  const auto cast = [](const xt::xarray<double>& a) { return xt::xarray<float>(xt::cast<float>(a)); };
  const auto xf = f.input("x", cast(x)), gf = f.input("g", cast(gamma));
  const auto xd = d.input("x", x), gd = d.input("g", gamma);
  const auto yf = xgrad::rms_norm(xf, gf);
  const auto yd = xgrad::rms_norm(xd, gd);
  check_close(yf.value(), yd.value(), 1e-5);
  check_close(grad(yf, {xf}, cast(u))[0].value(), grad(yd, {xd}, u)[0].value(), 1e-5);
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_and_eps) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  const auto e = g.input("e", xt::zeros<double>({2, 0}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto d2 = g.input("d2", xt::ones<double>({2}));
  const auto m = g.input("m", xt::ones<double>({1, 3}));
  check_error([&] { xgrad::rms_norm(x, d2); }, {"rms_norm (node 6): gamma (2,) must be (3,), the last axis of x (2, 3)"});
  check_error([&] { xgrad::rms_norm(x, m); }, {"gamma (1, 3) must be (3,)"});
  check_error([&] { xgrad::rms_norm(x, s); }, {"gamma () must be (3,)"});
  check_error([&] { xgrad::rms_norm(s, d3); }, {"rms_norm (node 6): normalises the last axis, of at least 1 element: x is ()"});
  check_error([&] { xgrad::rms_norm(e, e); }, {"x is (2, 0)"});
  check_error([&] { xgrad::rms_norm(x, d3, -1.0); }, {"rms_norm: eps must be finite and >= 0, got -1"});
  check_error([&] { xgrad::rms_norm(x, d3, std::nan("")); }, {"eps must be finite and >= 0, got nan"});
  check_error([&] { xgrad::rms_norm(x, d3, INFINITY); }, {"eps must be finite and >= 0, got inf"});
  BOOST_TEST(g.size() == 6u);
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  {
    Graph<double> v;
    const auto x = v.input("x", {{1, 2, 4}});
    const auto f = rms_norm_vjp(x, v.input("gamma", xt::xarray<double>{1, 2, 3}), v.input("rstd", {{0.5}}), x);
    check_attrs_round_trip(f.grad_x, "rms_norm_vjp", "{}");
  }
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 4}});
  const auto gamma = g.parameter("gamma", xt::xarray<double>{1, 2, 3});
  const auto y = xgrad::rms_norm(x, gamma, 1e-6);
  check_attrs_round_trip(y, "rms_norm", R"({"eps":1e-06})");
  for (const Json& bad_eps : {Json(-0.5), Json("small"), Json(nullptr)}) {
    Json bad = to_json(g, ExportValues::all);
    bad["nodes"][2]["attrs"]["eps"] = bad_eps;
    check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[2].attrs.eps: expected"});
  }
  Json bad = to_json(g, ExportValues::all);
  bad["nodes"][2]["attrs"]["eps"] = -0.5;
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[2].attrs.eps: expected a finite number >= 0, got -0.5"});
  bad["nodes"][2]["attrs"] = {{"eps", 1e-5}, {"axis", -1}};
  check_error([&] { graph_from_json<double>(bad.dump()); }, {"nodes[2].attrs", "axis"});
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays) {
  // A graph of rms_norm and its gradients through JSON: the same text back, and new inputs
  // replayed through the imported graph give a fresh build's values.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 7));
  const auto gamma = g.parameter("gamma", random_array<double>({4}, 8));
  const auto y = xgrad::rms_norm(x, gamma, 1e-3);
  const auto loss = add(sum(mul(y, y)), sum(g.var(y.id(), 1)));
  g.set_output("loss", loss);
  const auto grads = grad(loss, {x, gamma});
  g.set_grad("x", grads[0]);
  g.set_grad("gamma", grads[1]);
  const std::string text = to_json(g, ExportValues::all).dump();
  BOOST_TEST(text.find("\"op\":\"rms_norm_vjp\"") != std::string::npos);
  const auto imported = graph_from_json<double>(text);
  imported->replay();
  BOOST_TEST(to_json(*imported, ExportValues::all).dump() == text);
  const xt::xarray<double> x2 = random_array<double>({2, 3, 4}, 9);
  imported->set_value(imported->var(x.id()), x2);
  imported->replay();
  Graph<double> fresh;
  const auto fx = fresh.input("x", x2), fg = fresh.parameter("gamma", gamma.value());
  const auto fy = xgrad::rms_norm(fx, fg, 1e-3);
  const auto floss = add(sum(mul(fy, fy)), sum(fresh.var(fy.id(), 1)));
  const auto fgrads = grad(floss, {fx, fg});
  BOOST_TEST(imported->node(loss.id()).value() == floss.value());
  for (std::size_t i = 0; i < 2; ++i) BOOST_TEST(imported->var(grads[i].slot()).value() == fgrads[i].value());
}

BOOST_AUTO_TEST_SUITE_END()
