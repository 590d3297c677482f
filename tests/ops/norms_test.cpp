// What layer_norm and rms_norm share, checked once for both (their own suites, layer_norm_test.cpp
// and rms_norm_test.cpp, check the rest): each normalises the last axis of x with parameters of
// that axis's length, writes statistics (rows, 1) beside y, and has a fused VJP node of x, gamma, the statistics and grad_y
// whose formula composed of nodes is the reference. A Norm describes one of them:
//   name, params (the parameters' names, gamma first), stats (the statistics' names), norm(x,
//   params, eps) and vjp(x, gamma, stats..., grad_y) (the fused node's outputs, grad_x first).
#include "../check.hpp"

namespace {

struct LayerNormForm {
  static constexpr const char* name = "layer_norm";
  static inline const std::vector<std::string> params = {"gamma", "beta"};
  static inline const std::vector<std::string> stats = {"mean", "rstd"};
  template <class T>
  static Var<T> norm(const Var<T>& x, const std::vector<Var<T>>& p, double eps) {
    return layer_norm(x, p[0], p[1], eps);
  }
  template <class T>
  static std::vector<Var<T>> vjp(const std::vector<Var<T>>& in) {
    const auto f = layer_norm_vjp(in[0], in[1], in[2], in[3], in[4]);
    return {f.grad_x, f.grad_gamma, f.grad_beta};
  }
};

struct RmsNormForm {
  static constexpr const char* name = "rms_norm";
  static inline const std::vector<std::string> params = {"gamma"};
  static inline const std::vector<std::string> stats = {"rstd"};
  template <class T>
  static Var<T> norm(const Var<T>& x, const std::vector<Var<T>>& p, double eps) {
    return rms_norm(x, p[0], eps);
  }
  template <class T>
  static std::vector<Var<T>> vjp(const std::vector<Var<T>>& in) {
    const auto f = rms_norm_vjp(in[0], in[1], in[2], in[3]);
    return {f.grad_x, f.grad_gamma};
  }
};

// The fused VJP's formula composed of nodes, as the norms' VJPs were built before they were
// fused, from the inputs x, gamma, the statistics (layer_norm's mean and rstd, rms_norm's rstd)
// and grad_y: xhat = (x - mean) rstd or x rstd, gy = grad_y gamma, and
//   grad_x = rstd (gy [- mean(gy)] - xhat mean(gy xhat)), grad_gamma = sum(grad_y xhat)
//   [, grad_beta = sum(grad_y)], the bracketed terms layer_norm's.
template <class T>
std::vector<Var<T>> composed_vjp(const std::vector<Var<T>>& in) {
  const bool centred = in.size() == 5;  // layer_norm's: x - mean
  const Var<T>& x = in[0];
  const Var<T>& gamma = in[1];
  const Var<T>& rstd = in[in.size() - 2];
  const Var<T>& g = in.back();
  const Var<T> xhat = mul(centred ? sub(x, in[2]) : x, rstd);
  const Var<T> gy = mul(g, gamma);
  const Var<T> gy_centred = centred ? sub(gy, mean(gy, {-1}, true)) : gy;
  const Var<T> gx = mul(rstd, sub(gy_centred, mul(xhat, mean(mul(gy, xhat), {-1}, true))));
  std::vector<Var<T>> grads = {gx, sum_to_shape_of(mul(g, xhat), gamma)};
  if (centred) grads.push_back(sum_to_shape_of(g, gamma));
  return grads;
}

// The parameters of Norm for a last axis of d, random from `seed` on, as g's inputs or, if
// `trained`, parameters.
template <class Norm, class T>
std::vector<Var<T>> norm_params(Graph<T>& g, std::size_t d, std::uint64_t seed, bool trained = false) {
  std::vector<Var<T>> p;
  for (const std::string& name : Norm::params) {
    const xt::xarray<T> value = random_array<T>({d}, seed++);
    p.push_back(trained ? g.parameter(name, value) : g.input(name, value));
  }
  return p;
}

// y's statistics, the outputs after y.
template <class T>
std::vector<Var<T>> stats_of(const Var<T>& y, std::size_t count) {
  std::vector<Var<T>> s;
  for (std::size_t k = 1; k <= count; ++k) s.push_back(y.graph().var(y.id(), k));
  return s;
}

template <class T>
std::vector<Var<T>> joined(std::vector<Var<T>> a, const std::vector<Var<T>>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

using norm_forms = boost::mpl::list<LayerNormForm, RmsNormForm>;

}  // namespace

BOOST_AUTO_TEST_SUITE(norms)

// Against PyTorch (tests/data/make_torch_fixtures.py): y and the gradients of x and of each
// parameter for grad_y = u, from <name>_x, _<param>, _u, _y, _grad_x and _grad_<param>.
BOOST_AUTO_TEST_CASE_TEMPLATE(matches_pytorch, Norm, norm_forms) {
  const std::string f = std::string(Norm::name) + "_";
  Graph<double> g;
  std::vector<Var<double>> wrt = {g.input("x", torch_fixture(f + "x"))};
  for (const std::string& p : Norm::params) wrt.push_back(g.parameter(p, torch_fixture(f + p)));
  const auto y = Norm::norm(wrt[0], std::vector<Var<double>>(wrt.begin() + 1, wrt.end()), 1e-5);
  check_close(y.value(), torch_fixture(f + "y"));
  const auto grads = grad(y, wrt, g.input("u", torch_fixture(f + "u")));
  for (std::size_t i = 0; i < wrt.size(); ++i) {
    check_close(grads[i].value(), torch_fixture(f + "grad_" + (i == 0 ? std::string("x") : Norm::params[i - 1])));
  }
}

// Finite differences of y, of each statistic alone, of all outputs at once, and of the
// gradients of x and gamma (second order).
BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_matches_finite_differences_for_every_output, Norm, norm_forms) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto p = norm_params<Norm>(g, 4, 2);
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 4));
  const auto wrt = joined({x}, p);
  const auto y = Norm::norm(x, p, 0.1);
  check_gradients(y, wrt);
  Var<double> all = sum(y);
  for (const auto& s : stats_of(y, Norm::stats.size())) {
    check_gradients(s, wrt);
    all = add(all, sum(s));
  }
  check_gradients(all, wrt);
  for (std::size_t i : {0, 1}) check_gradients(grad(y, wrt, u)[i], joined(wrt, {u}));
}

// Whichever gradient is asked for, grad_y's part is one <name>_vjp node (beside the seed).
BOOST_AUTO_TEST_CASE_TEMPLATE(grad_y_reaches_the_inputs_through_one_fused_node, Norm, norm_forms) {
  const std::string fused_op = std::string(Norm::name) + "_vjp";
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto p = norm_params<Norm>(g, 4, 2, true);
  const auto y = Norm::norm(x, p, 1e-5);
  for (const auto& wrt : {std::vector<Var<double>>{p.back()}, joined({x}, p)}) {
    const std::size_t before = g.size();
    grad(y, wrt);
    std::size_t fused = 0;
    for (std::size_t i = before; i < g.size(); ++i) {
      const std::string op = g.node(i).op_name();
      fused += op == fused_op;
      BOOST_TEST((op == fused_op || op == "constant"), "node " << i << " is " << op);  // the seed ones is a constant
    }
    BOOST_TEST(fused == 1u);
  }
}

// The fused VJP node against its composition, on the norm's own statistics, with 1 and 2 threads
// (the same bits), in float32 and float64.
BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_node_agrees_with_its_composition, Norm, norm_forms) {
  const auto check = [](auto zero, double tol) {
    using T = decltype(zero);
    std::vector<xt::xarray<T>> by_threads[2];
    for (int threads = 1; threads <= 2; ++threads) {
      const BlasThreads use(threads);
      Graph<T> g;
      const auto x = g.input("x", xt::xarray<T>(xt::cast<T>(random_array<double>({64, 50, 96}, 1) * 3.0)));
      const auto p = norm_params<Norm>(g, 96, 2);
      const auto u = g.input("u", random_array<T>({64, 50, 96}, 4));
      const auto in = joined(joined({x, p[0]}, stats_of(Norm::norm(x, p, 1e-5), Norm::stats.size())), {u});
      const auto fused = Norm::vjp(in);
      const auto composed = composed_vjp(in);
      for (std::size_t k = 0; k < fused.size(); ++k) {
        check_close(fused[k].value(), composed[k].value(), k == 0 ? tol : 40 * tol);  // parameters: sums of 3200 rows
        by_threads[threads - 1].push_back(fused[k].value());
      }
    }
    for (std::size_t k = 0; k < by_threads[0].size(); ++k) {
      BOOST_TEST(same_bits(by_threads[0][k], by_threads[1][k]), "output " << k);
    }
  };
  check(0.0f, 1e-5);
  check(0.0, 1e-13);
}

// Every input of the fused VJP node free (the statistics leaves too, rstd around 2): finite
// differences of each output, then of the gradient of grad_x for x and the last statistic;
// and an input given twice (grad_y = x), the gradients of both slots together.
BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_node_matches_finite_differences_to_second_order, Norm, norm_forms) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  std::vector<Var<double>> in = {x, g.input("gamma", random_array<double>({4}, 2))};
  for (const std::string& s : Norm::stats) {
    const xt::xarray<double> r = random_array<double>({2, 3, 1}, 3 + in.size());
    in.push_back(g.input(s, s == "rstd" ? xt::xarray<double>(r + 2.0) : r));
  }
  const auto u = g.input("u", random_array<double>({2, 3, 4}, 9));
  const auto w = g.input("w", random_array<double>({2, 3, 4}, 10));
  const auto all = joined(in, {u});
  const auto f = Norm::vjp(all);
  for (const auto& out : f) check_gradients(out, all);
  const auto second = grad(f[0], all, w);
  check_gradients(second[0], joined(all, {w}));
  check_gradients(second[in.size() - 1], joined(all, {w}));
  check_gradients(Norm::vjp(joined(in, {x}))[0], in);
}

// The fused VJP node refuses inputs of the wrong shapes, naming every shape, before adding a node.
BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_rejects_bad_shapes, Norm, norm_forms) {
  const std::string op = std::string(Norm::name) + "_vjp";
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto d3 = g.input("d3", xt::ones<double>({3}));
  const auto st = g.input("st", xt::ones<double>({2, 1}));
  const auto s = g.input("s", xt::xarray<double>::from_shape({}));
  const std::size_t n = Norm::stats.size();
  // The inputs x, gamma, the statistics (the first of them (2, 3)) and grad_y.
  const auto inputs = [&](const Var<double>& gamma, const Var<double>& first, const Var<double>& grad_y) {
    std::vector<Var<double>> in = {x, gamma, first};
    for (std::size_t k = 1; k < n; ++k) in.push_back(st);
    in.push_back(grad_y);
    return in;
  };
  std::string needs = Norm::stats[0], got = Norm::stats[0] + " (2, 3)";
  for (std::size_t k = 1; k < n; ++k) {
    needs += " and " + Norm::stats[k];
    got += ", " + Norm::stats[k] + " (2, 1)";
  }
  check_error([&] { Norm::vjp(inputs(d3, x, x)); }, {op + " (node 4): x (2, 3) needs gamma (3,), " + needs +
                                                     " (2, 1) and grad_y (2, 3); got gamma (3,), " + got + ", grad_y (2, 3)"});
  check_error([&] { Norm::vjp(inputs(st, st, x)); }, {"got gamma (2, 1)"});
  check_error([&] { Norm::vjp(inputs(d3, st, st)); }, {"grad_y (2, 1)"});
  check_error([&] { Norm::vjp(std::vector<Var<double>>(n + 3, s)); },
              {op + " (node 4): normalises the last axis, of at least 1 element: x is ()"});
  BOOST_TEST(g.size() == 4u);
}

// x of no last axis to normalise, and eps not finite or negative: refused, naming them, before a
// node is added.
BOOST_AUTO_TEST_CASE_TEMPLATE(rejects_bad_x_and_eps, Norm, norm_forms) {
  const std::string op = Norm::name;
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto p = norm_params<Norm>(g, 3, 1);
  const std::size_t nodes = g.size();
  const auto s = g.constant("s", xt::xarray<double>::from_shape({}));
  const auto e = g.constant("e", xt::zeros<double>({2, 0}));
  check_error([&] { Norm::norm(s, p, 1e-5); },
              {op + " (node " + std::to_string(nodes + 2) + "): normalises the last axis, of at least 1 element: x is ()"});
  check_error([&] { Norm::norm(e, p, 1e-5); }, {"x is (2, 0)"});
  check_error([&] { Norm::norm(x, p, -1.0); }, {op + ": eps must be finite and >= 0, got -1"});
  check_error([&] { Norm::norm(x, p, std::nan("")); }, {"eps must be finite and >= 0, got nan"});
  check_error([&] { Norm::norm(x, p, INFINITY); }, {"eps must be finite and >= 0, got inf"});
  BOOST_TEST(g.size() == nodes + 2);
}

// float32 against float64 on the PyTorch fixture's x: y and grad_x within 1e-5.
BOOST_AUTO_TEST_CASE_TEMPLATE(float32_agrees_with_float64, Norm, norm_forms) {
  const std::string f = std::string(Norm::name) + "_";
  Graph<float> gf;
  Graph<double> gd;
  const auto cast = [](const xt::xarray<double>& a) { return xt::xarray<float>(xt::cast<float>(a)); };
  const auto xf = gf.input("x", cast(torch_fixture(f + "x")));
  const auto xd = gd.input("x", torch_fixture(f + "x"));
  std::vector<Var<float>> pf;
  std::vector<Var<double>> pd;
  for (const std::string& p : Norm::params) {
    pf.push_back(gf.input(p, cast(torch_fixture(f + p))));
    pd.push_back(gd.input(p, torch_fixture(f + p)));
  }
  const auto yf = Norm::norm(xf, pf, 1e-5);
  const auto yd = Norm::norm(xd, pd, 1e-5);
  check_close(yf.value(), yd.value(), 1e-5);
  const xt::xarray<double> u = torch_fixture(f + "u");
  check_close(grad(yf, {xf}, cast(u))[0].value(), grad(yd, {xd}, u)[0].value(), 1e-5);
}

// The attrs of the norm ({"eps"}) and of its fused VJP node ({}) round-trip; the import refuses an
// eps that is negative, not a number or null, and an unknown key, naming the node.
BOOST_AUTO_TEST_CASE_TEMPLATE(attrs_round_trip_and_refusals, Norm, norm_forms) {
  {
    Graph<double> v;
    const auto x = v.input("x", {{1, 2, 4}});
    std::vector<Var<double>> in = {x, v.input("gamma", xt::xarray<double>{1, 2, 3})};
    for (const std::string& s : Norm::stats) in.push_back(v.input(s, {{0.5}}));
    in.push_back(x);
    check_attrs_round_trip(Norm::vjp(in)[0], std::string(Norm::name) + "_vjp", "{}");
  }
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 4}});
  const auto y = Norm::norm(x, norm_params<Norm>(g, 3, 1, true), 1e-6);
  const Json j = check_attrs_round_trip(y, Norm::name, R"({"eps":1e-06})");
  const std::string at = "nodes[" + std::to_string(y.id()) + "].attrs";
  check_refuses_attr(j, y.id(), "eps", -0.5, at + ".eps: expected a finite number >= 0, got -0.5");
  check_refuses_attr(j, y.id(), "eps", "small", at + ".eps: expected");
  check_refuses_attr(j, y.id(), "eps", nullptr, at + ".eps: expected");
  check_refuses_attr(j, y.id(), "axis", -1, at + ".axis: unknown key");
}

// A graph of the norm and its gradients through JSON (check_json_replays): the same text back,
// and new inputs replayed through both graphs give the same bits.
BOOST_AUTO_TEST_CASE_TEMPLATE(exports_imports_and_replays, Norm, norm_forms) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 7));
  const auto wrt = joined({x}, norm_params<Norm>(g, 4, 8, true));
  const auto y = Norm::norm(x, std::vector<Var<double>>(wrt.begin() + 1, wrt.end()), 1e-3);
  Var<double> loss = sum(mul(y, y));
  for (const auto& s : stats_of(y, Norm::stats.size())) loss = add(loss, sum(s));
  g.set_output("loss", loss);
  const auto grads = grad(loss, wrt);
  for (std::size_t i = 0; i < wrt.size(); ++i) g.set_grad(wrt[i].node().name, grads[i]);
  const std::string text = check_json_replays(g, x, {random_array<double>({2, 3, 4}, 9)});
  BOOST_TEST(text.find("\"op\":\"" + std::string(Norm::name) + "_vjp\"") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
