#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace {


// A fixture of tests/data/make_torch_fixtures.py's part optim().
xt::xarray<double> fixture(const std::string& name) { return torch_fixture("optim_" + name); }

double max_abs_diff(const xt::xarray<double>& a, const xt::xarray<double>& b) {
  BOOST_TEST_REQUIRE(shapes_equal(a.shape(), b.shape()));
  return xt::amax(xt::abs(a - b))();
}

// The parameters a (3, 4) and b (5,) after each of the fixture's 10 steps, as (10, 3, 4) and
// (10, 5): the gradients set as constants, the learning rate set before each step.
template <class T, class Make>
std::pair<xt::xarray<double>, xt::xarray<double>> run_fixture_steps(Make make) {
  const auto grads_a = fixture("grads_a"), grads_b = fixture("grads_b"), lrs = fixture("lr");
  Graph<T> g;
  const auto a = g.parameter("a", xt::cast<T>(fixture("params_a")));
  const auto b = g.parameter("b", xt::cast<T>(fixture("params_b")));
  const auto grad_a = g.constant("grad_a", xt::zeros<T>({3, 4}));
  const auto grad_b = g.constant("grad_b", xt::zeros<T>({5}));
  auto opt = make(std::vector<Var<T>>{a, b});
  xt::xarray<double> after_a = xt::zeros<double>(grads_a.shape()), after_b = xt::zeros<double>(grads_b.shape());
  for (std::size_t k = 0; k < lrs.size(); ++k) {
    opt.set_lr(lrs(k));
    BOOST_TEST(opt.lr() == lrs(k));
    g.set_value(grad_a, xt::xarray<T>(xt::cast<T>(xt::view(grads_a, k))));
    g.set_value(grad_b, xt::xarray<T>(xt::cast<T>(xt::view(grads_b, k))));
    opt.step({grad_a, grad_b});
    xt::view(after_a, k) = xt::cast<double>(a.value());
    xt::view(after_b, k) = xt::cast<double>(b.value());
  }
  return {after_a, after_b};
}

// Each optimizer of the fixture, as the fixture's script makes it (the lr is set per step).
template <class T>
Sgd<T> fixture_sgd(std::vector<Var<T>> params) { return Sgd<T>(std::move(params), 0.1, 0.9); }
template <class T>
Adam<T> fixture_adam(std::vector<Var<T>> params) { return Adam<T>(std::move(params), 0.1); }
template <class T>
AdamW<T> fixture_adamw(std::vector<Var<T>> params) { return AdamW<T>(std::move(params), 0.1, 0.8, 0.99, 1e-6, 0.1); }

// Runs an optimizer of the fixture in float64 (against PyTorch within 1e-12) and float32
// (against the float64 run, within `float32_tolerance`).
template <class Make64, class Make32>
void check_against_torch(const std::string& name, Make64 make64, Make32 make32, double float32_tolerance) {
  const auto [a64, b64] = run_fixture_steps<double>(make64);
  BOOST_TEST(max_abs_diff(a64, fixture(name + "_a")) <= 1e-12, name << " a: " << max_abs_diff(a64, fixture(name + "_a")));
  BOOST_TEST(max_abs_diff(b64, fixture(name + "_b")) <= 1e-12, name << " b: " << max_abs_diff(b64, fixture(name + "_b")));
  const auto [a32, b32] = run_fixture_steps<float>(make32);
  BOOST_TEST(max_abs_diff(a32, a64) <= float32_tolerance, name << " float32 a: " << max_abs_diff(a32, a64));
  BOOST_TEST(max_abs_diff(b32, b64) <= float32_tolerance, name << " float32 b: " << max_abs_diff(b32, b64));
}

// Part optim_groups() of the fixtures: a (3, 4), b (5,), c (2, 3) in the groups [a, c] and [b].
xt::xarray<double> groups_fixture(const std::string& name) { return torch_fixture("optim_groups_" + name); }

// The worst |actual - expected| / |expected| (0 where both are 0), and where it is.
struct RelativeDiff {
  double worst = 0, actual = 0, expected = 0;
  std::size_t at = 0;
};
RelativeDiff max_rel_diff(const xt::xarray<double>& actual, const xt::xarray<double>& expected) {
  BOOST_TEST_REQUIRE(shapes_equal(actual.shape(), expected.shape()));
  RelativeDiff d;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double x = actual.data()[i], y = expected.data()[i];
    const double r = x == y ? 0.0 : std::abs(x - y) / std::abs(y);
    if (r > d.worst || r != r) d = {r, x, y, i};
  }
  return d;
}
std::ostream& operator<<(std::ostream& out, const RelativeDiff& d) {
  return out << "relative difference " << d.worst << " at flat index " << d.at << ": " << d.actual << " vs torch "
             << d.expected;
}

// The parameters after each of the 6 steps of the fixture, in the order a, b, c, as the script
// runs them: the groups' lrs, then set_lr(0.01) (every group) before step 4 and set_lr(1, 0.004)
// before step 6. make(groups) builds the optimizer; the gradients are constants set per step.
template <class T, class Make>
std::vector<xt::xarray<double>> run_group_steps(Make make, std::vector<xt::xarray<T>>* m = nullptr,
                                                std::vector<xt::xarray<T>>* v = nullptr) {
  const char* names[] = {"a", "b", "c"};
  Graph<T> g;
  std::vector<Var<T>> ps, grads;
  std::vector<xt::xarray<double>> given, after;
  for (const char* p : names) {
    ps.push_back(g.parameter(p, xt::cast<T>(groups_fixture(std::string("params_") + p))));
    given.push_back(groups_fixture(std::string("grads_") + p));
    grads.push_back(g.constant(std::string("grad_") + p, xt::zeros<T>(ps.back().shape())));
    Shape shape = ps.back().shape();
    shape.insert(shape.begin(), 6);
    after.push_back(xt::zeros<double>(shape));
  }
  auto opt = make(std::vector<ParamGroup<T>>{{{ps[0], ps[2]}, std::nullopt, std::nullopt}, {{ps[1]}, std::nullopt, std::nullopt}});
  // opt.params() is a, c, b: the gradients in that order.
  BOOST_TEST_REQUIRE(opt.params().size() == 3u);
  BOOST_TEST((opt.params()[1].id() == ps[2].id() && opt.params()[2].id() == ps[1].id()));
  for (std::size_t k = 0; k < 6; ++k) {
    if (k == 3) opt.set_lr(0.01);
    if (k == 5) opt.set_lr(1, 0.004);
    for (std::size_t i = 0; i < 3; ++i) g.set_value(grads[i], xt::xarray<T>(xt::cast<T>(xt::view(given[i], k))));
    opt.step({grads[0], grads[2], grads[1]});
    for (std::size_t i = 0; i < 3; ++i) xt::view(after[i], k) = xt::cast<double>(ps[i].value());
  }
  BOOST_TEST(opt.lr(0) == 0.01);
  BOOST_TEST(opt.lr(1) == 0.004);
  if constexpr (!std::is_same_v<decltype(opt), Sgd<T>>) {
    BOOST_TEST(opt.state().step == 6);
    if (m) *m = opt.state().m;
    if (v) *v = opt.state().v;
  }
  return after;
}

// The fixture's optimizers with their groups: group 0 sets lr and weight_decay; group 1 takes
// the optimizer's (AdamW: its lr, weight_decay 0).
template <class T>
Sgd<T> groups_sgd(std::vector<ParamGroup<T>> groups) {
  groups[0].lr = 0.1;
  groups[0].weight_decay = 0.05;
  return Sgd<T>(std::move(groups), 0.03, 0.9, 0.01);
}
template <class T>
Adam<T> groups_adam(std::vector<ParamGroup<T>> groups) {
  groups[0].lr = 0.03;
  groups[0].weight_decay = 0.1;
  return Adam<T>(std::move(groups), 0.01, 0.85, 0.98, 1e-7, 0.02);
}
template <class T>
AdamW<T> groups_adamw(std::vector<ParamGroup<T>> groups) {
  groups[0].lr = 0.05;
  groups[0].weight_decay = 0.2;
  groups[1].weight_decay = 0.0;
  return AdamW<T>(std::move(groups), 0.02, 0.9, 0.99, 1e-8, 0.05);
}

// Runs an optimizer of the fixture with groups in float64, against PyTorch within 1e-15
// relative for the parameters and 5e-15 for Adam's and AdamW's moments (a difference of
// rounding: measured 1.5e-16 and 2.9e-15, the latter on an m of 0.0019 from a cancellation), every
// element; --log_level=message prints the worst differences.
template <class Make>
void check_groups_against_torch(const std::string& name, Make make) {
  const double tolerance = 1e-15, moments_tolerance = 5e-15;
  const char* names[] = {"a", "b", "c"};
  std::vector<xt::xarray<double>> m, v;
  const auto after = run_group_steps<double>(make, &m, &v);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto d = max_rel_diff(after[i], groups_fixture(name + "_" + names[i]));
    BOOST_TEST(d.worst <= tolerance, name << " " << names[i] << ": " << d);
    const double abs_diff = max_abs_diff(after[i], groups_fixture(name + "_" + names[i]));
    BOOST_TEST_MESSAGE(name << " " << names[i] << ": max " << d << ", max absolute difference " << abs_diff);
  }
  if (name == "sgd") return;
  const std::size_t order[] = {0, 2, 1};  // the moments are in params() order: a, c, b
  for (std::size_t j = 0; j < 3; ++j) {
    const std::string p = names[order[j]];
    const auto dm = max_rel_diff(m[j], groups_fixture(name + "_m_" + p));
    const auto dv = max_rel_diff(v[j], groups_fixture(name + "_v_" + p));
    BOOST_TEST(dm.worst <= moments_tolerance, name << " m[" << j << "] (" << p << "): " << dm);
    BOOST_TEST(dv.worst <= moments_tolerance, name << " v[" << j << "] (" << p << "): " << dv);
    BOOST_TEST_MESSAGE(name << " m " << p << ": max " << dm << "; v " << p << ": max " << dv);
  }
}

// loss = sum((w - target)^2), its gradient 2 (w - target), as graph nodes.
struct Quadratic {
  Graph<double> g;
  Var<double> w = g.parameter("w", xt::xarray<double>{{1.0, -2.0, 0.5}});
  Var<double> target = g.constant("target", xt::xarray<double>{{3.0, 1.0, -1.0}});
  Var<double> diff = add(w, scale(target, -1.0));
  Var<double> loss = mul(diff, diff);
  Var<double> grad_w = grad(loss, {w})[0];

  double value() const { return xt::sum(loss.value())(); }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(optim)

BOOST_AUTO_TEST_CASE(sgd_with_momentum_matches_hand_steps) {
  Quadratic q;
  Sgd<double> sgd({q.w}, 0.1, 0.5);
  sgd.step({q.grad_w});  // g = 2 (w - t) = [-4, -6, 3]; v = g; w -= 0.1 v
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.4, -1.4, 0.2}}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  q.g.replay();  // g = [-3.2, -4.8, 2.4]; v = 0.5 [-4, -6, 3] + g = [-5.2, -7.8, 3.9]
  sgd.step({q.grad_w});
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.92, -0.62, -0.19}}), boost::test_tools::tolerance(1e-14) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(adam_first_step_moves_each_weight_by_lr) {
  // After one step m^ = g and v^ = g^2: each weight moves by lr * g / (|g| + eps), about lr.
  Quadratic q;
  Adam<double> adam({q.w}, 0.01);
  adam.step({q.grad_w});
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.01, -1.99, 0.49}}), boost::test_tools::tolerance(1e-8) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(optimizers_minimise_a_quadratic_in_one_graph) {
  for (int which = 0; which < 2; ++which) {
    Quadratic q;
    Sgd<double> sgd({q.w}, 0.1, 0.9);
    Adam<double> adam({q.w}, 0.1);
    const std::size_t nodes = q.g.size();
    const double start = q.value();
    for (int step = 0; step < 300; ++step) {
      if (which == 0) sgd.step({q.grad_w});
      else adam.step({q.grad_w});
      q.g.replay();
    }
    BOOST_TEST(q.g.size() == nodes);  // updates keep the graph
    BOOST_TEST(q.value() < 1e-6 * start, (which ? "adam " : "sgd ") << q.value());
  }
}

BOOST_AUTO_TEST_CASE(initialisation_is_deterministic_and_scaled) {
  const auto a = glorot_uniform<double>({64, 32}, 1), b = glorot_uniform<double>({64, 32}, 1);
  BOOST_TEST(a == b);
  BOOST_TEST(!(a == glorot_uniform<double>({64, 32}, 2)));
  const double limit = std::sqrt(6.0 / (64 + 32));
  BOOST_TEST(xt::amax(xt::abs(a))() <= limit);
  BOOST_TEST(xt::amax(xt::abs(a))() > 0.9 * limit);
  const auto h = he_normal<double>({400, 100}, 3);
  const double var = xt::mean(h * h)();
  BOOST_TEST(var == 2.0 / 400, boost::test_tools::tolerance(0.05));
  BOOST_TEST(he_normal<float>({2, 3}, 4) == he_normal<float>({2, 3}, 4));
}

BOOST_AUTO_TEST_CASE(rejects_bad_use) {
  Quadratic q;
  check_error([&] { Sgd<double>({q.target}, 0.1); }, {"Sgd: params[0] is not a parameter", "constant", "Graph::parameter"});
  check_error([&] { Sgd<double>({q.w}, -1.0); }, {"Sgd: lr must be a finite number >= 0, got -1"});
  check_error([&] { Adam<double>({q.w}, 0.1, 1.0); }, {"Adam: beta1 must be in [0, 1), got 1"});
  Sgd<double> sgd({q.w}, 0.1);
  check_error([&] { sgd.step({}); }, {"Sgd::step: 0 gradients for 1 parameters"});
  check_error([&] { sgd.step({q.loss, q.loss}); }, {"2 gradients for 1"});
  check_error([&] { sgd.step({q.g.constant("x", xt::zeros<double>({3, 1}))}); }, {"the gradient of params[0] (1, 3) is (3, 1)"});
}

// Issue 15 (class 8): Sgd::step took gradients of another graph, and Adam an infinite lr.
BOOST_AUTO_TEST_CASE(rejects_gradients_of_another_graph_and_infinite_hyperparameters) {
  Quadratic q, other;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Sgd<double> sgd({q.w}, 0.1);
  check_error([&] { sgd.step({other.grad_w}); },
              {"Sgd::step: the gradient of params[0] (node " + std::to_string(other.grad_w.id()) +
               ") belongs to another graph than the parameter (node 0)"});
  Adam<double> adam({q.w});
  check_error([&] { adam.step({other.grad_w}); }, {"Adam::step: the gradient of params[0]", "another graph"});
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.0, -2.0, 0.5}}));  // unchanged
  check_error([&] { Adam<double>({q.w}, inf); }, {"Adam: lr must be a finite number >= 0, got inf"});
  check_error([&] { Adam<double>({q.w}, 0.1, nan); }, {"Adam: beta1 must be in [0, 1), got nan"});
  check_error([&] { Adam<double>({q.w}, 0.1, 0.9, 0.999, inf); }, {"Adam: eps must be a finite number > 0, got inf"});
  check_error([&] { Sgd<double>({q.w}, nan); }, {"Sgd: lr must be a finite number >= 0, got nan"});
  check_error([&] { Sgd<double>({q.w}, 0.1, 1.0); }, {"Sgd: momentum must be in [0, 1), got 1"});
}

// Issue 15: glorot_uniform and he_normal of {2^32, 2^32} returned an array with no storage.
BOOST_AUTO_TEST_CASE(initialisers_refuse_too_many_elements) {
  const std::size_t big = std::size_t(1) << 32;
  check_error([&] { glorot_uniform<double>({big, big}, 1); },
              {"glorot_uniform: a (4294967296, 4294967296) array makes more than 268435456 elements"});
  check_error([&] { he_normal<float>({big, big}, 1); }, {"he_normal: a (4294967296, 4294967296) array makes more than"});
  Graph<double> g;
  check_error([&] { attention_params(g, std::size_t(1) << 15, 1); }, {"glorot_uniform: a (32768, 32768) array"});
  BOOST_TEST(g.size() == 0u);
}

BOOST_AUTO_TEST_CASE(sgd_adam_and_adamw_match_torch_over_ten_steps_of_a_schedule) {
  // 10 steps with the lr set before each (warm-up, cosine decay to 0, two steps after), against
  // torch.optim.SGD (momentum 0.9), Adam and AdamW (betas 0.8, 0.99, eps 1e-6, weight_decay 0.1).
  check_against_torch("sgd", fixture_sgd<double>, fixture_sgd<float>, 1e-6);
  check_against_torch("adam", fixture_adam<double>, fixture_adam<float>, 1e-6);
  check_against_torch("adamw", fixture_adamw<double>, fixture_adamw<float>, 1e-6);
}

BOOST_AUTO_TEST_CASE(a_step_at_lr_0_changes_no_parameter) {
  // The fixture's 8th lr is 0 (the end of the cosine decay): no parameter moves at that step,
  // in PyTorch and here, and the moments still advance (the next steps agree with PyTorch above).
  BOOST_TEST_REQUIRE(fixture("lr")(7) == 0.0);
  const auto [a, b] = run_fixture_steps<double>(fixture_adamw<double>);
  BOOST_TEST((xt::view(a, 7) == xt::view(a, 6)));
  BOOST_TEST((xt::view(b, 7) == xt::view(b, 6)));
  BOOST_TEST((xt::view(fixture("adamw_a"), 7) == xt::view(fixture("adamw_a"), 6)));
  BOOST_TEST(!(xt::view(a, 8) == xt::view(a, 7)));
  Quadratic q;
  Sgd<double> sgd({q.w}, 0.0);
  Adam<double> adam({q.w}, 0.0);
  AdamW<double> adamw({q.w}, 0.0);
  sgd.step({q.grad_w});
  adam.step({q.grad_w});
  adamw.step({q.grad_w});
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.0, -2.0, 0.5}}));
}

BOOST_AUTO_TEST_CASE(adamw_first_step_matches_hand_values) {
  // p = 1, g = 2, lr 0.1, betas 0.9, 0.999, eps 1e-8, weight_decay 0.5:
  // p = 1 (1 - 0.1 * 0.5) = 0.95; m = 0.2, v = 0.004; step_size = 0.1 / 0.1 = 1;
  // denom = sqrt(0.004) / sqrt(0.001) + 1e-8 = 2 + 1e-8; p = 0.95 - 0.2 / (2 + 1e-8).
  Graph<double> g;
  const auto w = g.parameter("w", xt::xarray<double>{1.0});
  const auto grad_w = g.constant("grad_w", xt::xarray<double>{2.0});
  AdamW<double> adamw({w}, 0.1, 0.9, 0.999, 1e-8, 0.5);
  adamw.step({grad_w});
  BOOST_TEST(w.value()(0) == 0.95 - 0.2 / (2 + 1e-8), boost::test_tools::tolerance(1e-14));
  // weight_decay 0 is Adam, bit for bit.
  Quadratic q, r;
  AdamW<double> no_decay({q.w}, 0.05, 0.9, 0.999, 1e-8, 0.0);
  Adam<double> adam({r.w}, 0.05);
  for (int step = 0; step < 5; ++step) {
    no_decay.step({q.grad_w});
    adam.step({r.grad_w});
    q.g.replay();
    r.g.replay();
  }
  BOOST_TEST(q.w.value() == r.w.value());
}

BOOST_AUTO_TEST_CASE(adamw_defaults_are_pytorchs) {
  // lr 1e-3, weight_decay 0.01: the first step decays p by 1 - 1e-5, then moves it by about lr.
  Graph<double> g;
  const auto w = g.parameter("w", xt::xarray<double>{2.0});
  const auto grad_w = g.constant("grad_w", xt::xarray<double>{-3.0});
  AdamW<double> adamw({w});
  BOOST_TEST(adamw.lr() == 1e-3);
  adamw.step({grad_w});
  BOOST_TEST(w.value()(0) == 2.0 * (1 - 1e-5) + 1e-3 * 3.0 / (3.0 + 1e-8), boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(set_lr_changes_the_next_steps) {
  Quadratic q, r;
  Sgd<double> sgd({q.w}, 0.1);
  Sgd<double> half({r.w}, 0.3);
  half.set_lr(0.05);
  BOOST_TEST(half.lr() == 0.05);
  sgd.step({q.grad_w});
  half.step({r.grad_w});
  // g = [-4, -6, 3]: w = [1, -2, 0.5] - lr g
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.4, -1.4, 0.2}}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  BOOST_TEST(r.w.value() == (xt::xarray<double>{{1.2, -1.7, 0.35}}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_matches_torch) {
  // Cases: max_norm 1 (clips), 1.5 times the total (does not), 5e-7 below the total (clips, as
  // torch divides by total + 1e-6), 100 (does not).
  const auto cases = fixture("clip_cases");
  for (std::size_t k = 0; k < cases.shape(0); ++k) {
    Graph<double> g;
    Graph<float> h;
    std::vector<Var<double>> grads;
    std::vector<Var<float>> grads32;
    for (int i = 0; i < 3; ++i) {
      grads.push_back(g.constant("g" + std::to_string(i), fixture("clip_g" + std::to_string(i))));
      grads32.push_back(h.constant("g" + std::to_string(i), xt::cast<float>(fixture("clip_g" + std::to_string(i)))));
    }
    const double total = clip_grad_norm(grads, cases(k, 0));
    BOOST_TEST(total == cases(k, 1), boost::test_tools::tolerance(1e-14));
    const double total32 = clip_grad_norm(grads32, cases(k, 0));
    BOOST_TEST(total32 == cases(k, 1), boost::test_tools::tolerance(1e-6));
    for (int i = 0; i < 3; ++i) {
      const auto expected = fixture("clip" + std::to_string(k) + "_g" + std::to_string(i));
      BOOST_TEST(max_abs_diff(grads[i].value(), expected) <= 1e-12, "case " << k << " grad " << i);
      BOOST_TEST(max_abs_diff(xt::cast<double>(grads32[i].value()), expected) <= 1e-6, "float32 case " << k << " grad " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_matches_hand_values) {
  Graph<double> g;
  const auto a = g.constant("a", xt::xarray<double>{3.0, 0.0});
  const auto b = g.constant("b", xgrad::matrix<double>({{4.0}}));
  BOOST_TEST(clip_grad_norm<double>({a, b}, 10.0) == 5.0);  // below: unchanged, bit for bit
  BOOST_TEST(a.value() == (xt::xarray<double>{3.0, 0.0}));
  BOOST_TEST(clip_grad_norm<double>({a, b}, 1.0) == 5.0);  // above: scaled by 1 / (5 + 1e-6)
  BOOST_TEST(a.value()(0) == 3.0 / (5.0 + 1e-6), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(b.value()(0, 0) == 4.0 / (5.0 + 1e-6), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(clip_grad_norm<double>({}, 1.0) == 0.0);
  // A Var listed twice counts twice in the norm and is scaled once.
  const auto c = g.constant("c", xt::xarray<double>{3.0, 4.0});
  BOOST_TEST(clip_grad_norm<double>({c, c}, 1.0) == std::sqrt(50.0), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(c.value()(1) == 4.0 / (std::sqrt(50.0) + 1e-6), boost::test_tools::tolerance(1e-15));
  // Non-finite norms, as torch: NaN makes every gradient NaN; inf makes finite ones 0.
  const double inf = std::numeric_limits<double>::infinity();
  const auto d = g.constant("d", xt::xarray<double>{1.0, std::nan("")});
  const auto e = g.constant("e", xt::xarray<double>{2.0});
  BOOST_TEST(std::isnan(clip_grad_norm<double>({d, e}, 1.0)));
  BOOST_TEST(std::isnan(e.value()(0)));
  const auto f = g.constant("f", xt::xarray<double>{inf});
  const auto h = g.constant("h", xt::xarray<double>{2.0});
  BOOST_TEST(clip_grad_norm<double>({f, h}, 1.0) == inf);
  BOOST_TEST(h.value()(0) == 0.0);
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_then_step_in_a_training_loop) {
  // The gradient nodes are scaled in place, step() reads the scaled values, and the next replay
  // recomputes them unclipped.
  Quadratic q;
  Graph<double>& g = q.g;
  const auto unused = g.parameter("unused", xt::xarray<double>{5.0});
  const auto grads = grad(q.loss, {q.w, unused});  // the gradient of unused: the zeros grad() makes
  Sgd<double> sgd({q.w, unused}, 0.5);
  const std::size_t nodes = g.size();
  for (int step = 0; step < 3; ++step) {
    const xt::xarray<double> before = q.w.value(), unclipped = 2.0 * (q.w.value() - q.target.value());
    BOOST_TEST(grads[0].value() == unclipped, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
    const double norm = clip_grad_norm(grads, 1.0);
    BOOST_TEST(norm == std::sqrt(xt::sum(unclipped * unclipped)()), boost::test_tools::tolerance(1e-14));
    BOOST_TEST(std::sqrt(xt::sum(grads[0].value() * grads[0].value())()) == 1.0, boost::test_tools::tolerance(1e-5));
    BOOST_TEST(grads[1].value()(0) == 0.0);
    sgd.step(grads);
    const xt::xarray<double> moved = before - q.w.value();  // 0.5 * unclipped / |unclipped|
    BOOST_TEST(moved == xt::xarray<double>(0.5 * unclipped / (norm + 1e-6)), boost::test_tools::tolerance(1e-14) << boost::test_tools::per_element());
    g.replay();
  }
  BOOST_TEST(g.size() == nodes);
  BOOST_TEST(unused.value()(0) == 5.0);
}

BOOST_AUTO_TEST_CASE(rejects_bad_adamw_set_lr_and_clip_grad_norm) {
  Quadratic q, other;
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  check_error([&] { AdamW<double>({q.target}); }, {"AdamW: params[0] is not a parameter", "constant"});
  check_error([&] { AdamW<double>({q.w}, -1e-3); }, {"AdamW: lr must be a finite number >= 0, got -0.001"});
  check_error([&] { AdamW<double>({q.w}, 1e-3, 0.9, nan); }, {"AdamW: beta2 must be in [0, 1), got nan"});
  check_error([&] { AdamW<double>({q.w}, 1e-3, -0.1); }, {"AdamW: beta1 must be in [0, 1), got -0.1"});
  check_error([&] { AdamW<double>({q.w}, 1e-3, 0.9, 0.999, 0.0); }, {"AdamW: eps must be a finite number > 0, got 0"});
  check_error([&] { AdamW<double>({q.w}, 1e-3, 0.9, 0.999, 1e-8, -0.01); }, {"AdamW: weight_decay must be a finite number >= 0, got -0.01"});
  check_error([&] { AdamW<double>({q.w}, 1e-3, 0.9, 0.999, 1e-8, inf); }, {"AdamW: weight_decay must be a finite number >= 0, got inf"});
  AdamW<double> adamw({q.w});
  check_error([&] { adamw.step({q.g.constant("x", xt::zeros<double>({3}))}); }, {"AdamW::step: the gradient of params[0] (1, 3) is (3,)"});
  check_error([&] { adamw.step({other.grad_w}); }, {"AdamW::step: the gradient of params[0]", "belongs to another graph"});
  check_error([&] { adamw.step({}); }, {"AdamW::step: 0 gradients for 1 parameters"});
  BOOST_TEST(q.w.value() == (xt::xarray<double>{{1.0, -2.0, 0.5}}));  // unchanged
  // set_lr refuses what the constructors refuse, and keeps the lr it had.
  Sgd<double> sgd({q.w}, 0.1);
  Adam<double> adam({q.w}, 0.1);
  check_error([&] { sgd.set_lr(-1.0); }, {"Sgd::set_lr: lr must be a finite number >= 0, got -1"});
  check_error([&] { adam.set_lr(nan); }, {"Adam::set_lr: lr must be a finite number >= 0, got nan"});
  check_error([&] { adamw.set_lr(inf); }, {"AdamW::set_lr: lr must be a finite number >= 0, got inf"});
  BOOST_TEST(sgd.lr() == 0.1);
  BOOST_TEST(adam.lr() == 0.1);
  BOOST_TEST(adamw.lr() == 1e-3);
  // clip_grad_norm: max_norm, empty and unreadable Vars, and the seed of grad(), changing nothing.
  const std::vector<Var<double>> grads = {q.grad_w};
  check_error([&] { clip_grad_norm(grads, -1.0); }, {"clip_grad_norm: max_norm must be a finite number >= 0, got -1"});
  check_error([&] { clip_grad_norm(grads, inf); }, {"clip_grad_norm: max_norm must be a finite number >= 0, got inf"});
  check_error([&] { clip_grad_norm(grads, nan); }, {"clip_grad_norm: max_norm must be a finite number >= 0, got nan"});
  check_error([&] { clip_grad_norm<double>({q.grad_w, Var<double>()}, 1.0); }, {"clip_grad_norm: grads[1] is an empty Var"});
  const auto ids = q.g.indices("ids", xt::xarray<std::int64_t>{1, 2});
  check_error([&] { clip_grad_norm<double>({q.grad_w, ids}, 1.0); }, {"'ids'", "is an index leaf"});
  const auto seed_grad = grad(q.w, {q.w})[0];  // y = w: its gradient is the seed grad() made
  check_error([&] { clip_grad_norm<double>({q.grad_w, seed_grad}, 1.0); },
              {"clip_grad_norm: grads[1] (node " + std::to_string(seed_grad.id()) +
               ", constant 'grad_out') is a leaf that grad() made, which every replay reuses"});
  BOOST_TEST(q.grad_w.value() == (xt::xarray<double>{{-4.0, -6.0, 3.0}}));  // unchanged
  BOOST_TEST(seed_grad.value() == (xt::xarray<double>{{1.0, 1.0, 1.0}}));
  Graph<double> g;
  const auto s = scale(g.constant("c", xt::xarray<double>{1.0}), 2.0);
  g.keep_only({});
  check_error([&] { clip_grad_norm<double>({s}, 1.0); }, {"has no value: keep_only released it"});
}

BOOST_AUTO_TEST_CASE(clip_grad_norm_to_zero_zeroes_every_gradient) {
  Graph<double> g;
  const auto w = g.parameter("w", xt::xarray<double>{3.0, -4.0});
  const auto grads = grad(mul(w, w), {w});  // 2 w: norm 10
  BOOST_TEST(clip_grad_norm(grads, 0.0) == 10.0);
  BOOST_TEST((grads[0].value() == xt::xarray<double>{0.0, -0.0}));
}

BOOST_AUTO_TEST_CASE(adam_state_restored_in_a_new_optimizer_continues_bit_for_bit) {
  // 3 steps, the state and the parameters carried into a new graph and optimizer, 3 more: the
  // same bits as 6 steps in one, for Adam and AdamW (a checkpoint that resumes, examples/char_gpt).
  const auto run = [](auto make, bool restart) {
    using Opt = decltype(make(std::vector<Var<float>>{}));
    Graph<float> g;
    const auto w = g.parameter("w", xt::xarray<float>{0.5f, -1.25f, 2.0f});
    const auto loss = sum(w * w * w);
    const auto grads = grad(loss, {w});
    Opt opt = make(std::vector<Var<float>>{w});
    for (int k = 0; k < 3; ++k) {
      opt.step(grads);
      g.replay();
    }
    if (!restart) {
      for (int k = 0; k < 3; ++k) {
        opt.step(grads);
        g.replay();
      }
      return std::make_pair(xt::xarray<float>(w.value()), opt.state().step);
    }
    const AdamState<float> saved = opt.state();
    BOOST_TEST(saved.step == 3);
    Graph<float> g2;
    const auto w2 = g2.parameter("w", w.value());
    const auto grads2 = grad(sum(w2 * w2 * w2), {w2});
    Opt opt2 = make(std::vector<Var<float>>{w2});
    opt2.set_state(saved);
    for (int k = 0; k < 3; ++k) {
      opt2.step(grads2);
      g2.replay();
    }
    return std::make_pair(xt::xarray<float>(w2.value()), opt2.state().step);
  };
  const auto adam = [](std::vector<Var<float>> p) { return Adam<float>(std::move(p), 0.1); };
  const auto adamw = [](std::vector<Var<float>> p) { return AdamW<float>(std::move(p), 0.1, 0.9, 0.99, 1e-8, 0.1); };
  for (const bool w : {false, true}) {
    const auto whole = w ? run(adamw, false) : run(adam, false);
    const auto resumed = w ? run(adamw, true) : run(adam, true);
    BOOST_TEST(whole.second == 6);
    BOOST_TEST(resumed.second == 6);
    BOOST_TEST(same_bits(whole.first, resumed.first));
  }
}

BOOST_AUTO_TEST_CASE(set_state_refuses_a_state_of_other_parameters) {
  Graph<double> g;
  const auto a = g.parameter("a", xt::zeros<double>({2}));
  const auto b = g.parameter("b", xt::zeros<double>({2, 3}));
  AdamW<double> opt({a, b});
  AdamState<double> bad = opt.state();
  bad.m[1] = xt::zeros<double>({3});
  check_error([&] { opt.set_state(bad); }, {"AdamW::set_state: m[1] is (3,), the parameter (2, 3)"});
  bad = opt.state();
  bad.v.pop_back();
  check_error([&] { opt.set_state(bad); }, {"AdamW::set_state: 1 arrays in v for 2 parameters"});
  bad = opt.state();
  bad.step = -1;
  Adam<double> adam({a, b});
  check_error([&] { adam.set_state(bad); }, {"Adam::set_state: step must be >= 0, got -1"});
  BOOST_TEST(opt.state().step == 0);  // nothing changed
  BOOST_TEST(shapes_equal(opt.state().m[1].shape(), Shape{2, 3}));
}

// Issue 36: parameter groups, as torch.optim's param_groups.

BOOST_AUTO_TEST_CASE(sgd_adam_and_adamw_with_two_groups_match_torch) {
  // Groups [a, c] (its own lr and weight_decay) and [b] (the optimizer's), 6 steps, the lr of
  // every group set before step 4 and of group 1 before step 6, against torch.optim.SGD
  // (momentum 0.9, L2 weight_decay), Adam (L2 weight_decay) and AdamW (decoupled).
  check_groups_against_torch("sgd", groups_sgd<double>);
  check_groups_against_torch("adam", groups_adam<double>);
  check_groups_against_torch("adamw", groups_adamw<double>);
  // float32 follows the float64 run.
  for (int which = 0; which < 3; ++which) {
    const auto a64 = which == 0 ? run_group_steps<double>(groups_sgd<double>)
                     : which == 1 ? run_group_steps<double>(groups_adam<double>)
                                  : run_group_steps<double>(groups_adamw<double>);
    const auto a32 = which == 0 ? run_group_steps<float>(groups_sgd<float>)
                     : which == 1 ? run_group_steps<float>(groups_adam<float>)
                                  : run_group_steps<float>(groups_adamw<float>);
    for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(max_abs_diff(a32[i], a64[i]) <= 1e-5, "optimizer " << which << " param " << i);
  }
}

BOOST_AUTO_TEST_CASE(groups_take_the_optimizers_lr_and_weight_decay_where_unset) {
  Graph<double> g;
  const auto a = g.parameter("a", xt::zeros<double>({2, 2}));
  const auto b = g.parameter("b", xt::zeros<double>({2}));
  const auto c = g.parameter("c", xt::zeros<double>({3}));
  AdamW<double> opt({{{a}, 0.5, std::nullopt}, {{b, c}, std::nullopt, 0.25}, {{}, std::nullopt, std::nullopt}}, 0.01, 0.9, 0.999, 1e-8, 0.1);
  BOOST_TEST_REQUIRE(opt.groups().size() == 3u);
  BOOST_TEST(*opt.groups()[0].lr == 0.5);
  BOOST_TEST(*opt.groups()[0].weight_decay == 0.1);
  BOOST_TEST(*opt.groups()[1].lr == 0.01);
  BOOST_TEST(*opt.groups()[1].weight_decay == 0.25);
  BOOST_TEST(*opt.groups()[2].lr == 0.01);  // an empty group: allowed
  BOOST_TEST(opt.groups()[2].params.empty());
  BOOST_TEST(opt.params().size() == 3u);
  BOOST_TEST(opt.state().m.size() == 3u);
  // The defaults of the constructors: Sgd's and Adam's weight_decay 0, AdamW's 0.01.
  BOOST_TEST(*Sgd<double>(std::vector<ParamGroup<double>>{{{a}}}, 0.1).groups()[0].weight_decay == 0.0);
  BOOST_TEST(*Adam<double>(std::vector<ParamGroup<double>>{{{a}}}).groups()[0].weight_decay == 0.0);
  BOOST_TEST(*AdamW<double>(std::vector<ParamGroup<double>>{{{a}}}).groups()[0].weight_decay == 0.01);
  BOOST_TEST(*AdamW<double>(std::vector<ParamGroup<double>>{{{a}}}).groups()[0].lr == 1e-3);
}

BOOST_AUTO_TEST_CASE(a_list_of_parameters_is_one_group) {
  // The constructors of a list step as one group of the same values does, bit for bit.
  const auto run = [](bool grouped, int which) {
    Quadratic q;
    const auto c = q.g.parameter("c", xt::xarray<double>{0.25, -4.0});
    const auto grads = grad(add(sum(q.loss), sum(mul(c, c))), {q.w, c});
    const std::vector<Var<double>> list = {q.w, c};
    const std::vector<ParamGroup<double>> groups = {{list, std::nullopt, std::nullopt}};
    Sgd<double> sgd = grouped ? Sgd<double>(groups, 0.1, 0.5, 0.2) : Sgd<double>(list, 0.1, 0.5, 0.2);
    Adam<double> adam = grouped ? Adam<double>(groups, 0.1, 0.8, 0.9, 1e-6, 0.3) : Adam<double>(list, 0.1, 0.8, 0.9, 1e-6, 0.3);
    AdamW<double> adamw = grouped ? AdamW<double>(groups, 0.1, 0.8, 0.9, 1e-6, 0.3) : AdamW<double>(list, 0.1, 0.8, 0.9, 1e-6, 0.3);
    BOOST_TEST(adam.groups().size() == 1u);
    BOOST_TEST(*adam.groups()[0].weight_decay == 0.3);
    BOOST_TEST(adam.params().size() == 2u);
    for (int step = 0; step < 4; ++step) {
      if (which == 0) sgd.step(grads);
      if (which == 1) adam.step(grads);
      if (which == 2) adamw.step(grads);
      q.g.replay();
    }
    return std::make_pair(xt::xarray<double>(q.w.value()), xt::xarray<double>(c.value()));
  };
  for (int which = 0; which < 3; ++which) {
    BOOST_TEST(same_bits(run(false, which).first, run(true, which).first), "optimizer " << which);
    BOOST_TEST(same_bits(run(false, which).second, run(true, which).second), "optimizer " << which);
  }
}

BOOST_AUTO_TEST_CASE(sgd_and_adam_weight_decay_match_hand_values) {
  // Sgd: p = 1, g = 2, weight_decay 0.5, lr 0.1: d = 2 + 0.5 = 2.5, p = 1 - 0.25 = 0.75; with
  // momentum 0.5, step 2: d = 2 + 0.375 = 2.375, velocity = 1.25 + 2.375 = 3.625, p = 0.3875.
  Graph<double> g;
  const auto w = g.parameter("w", xt::xarray<double>{1.0});
  const auto grad_w = g.constant("grad_w", xt::xarray<double>{2.0});
  Sgd<double> sgd({w}, 0.1, 0.5, 0.5);
  sgd.step({grad_w});
  BOOST_TEST(w.value()(0) == 0.75, boost::test_tools::tolerance(1e-15));
  sgd.step({grad_w});
  BOOST_TEST(w.value()(0) == 0.3875, boost::test_tools::tolerance(1e-15));
  // Adam's L2 term enters the gradient: p = 1, g = 2, weight_decay 0.5: g = 2.5, and the first
  // step moves p by lr g / (|g| + eps) = lr 2.5 / (2.5 + 1e-8).
  Graph<double> h;
  const auto u = h.parameter("u", xt::xarray<double>{1.0});
  const auto grad_u = h.constant("grad_u", xt::xarray<double>{2.0});
  Adam<double> adam({u}, 0.1, 0.9, 0.999, 1e-8, 0.5);
  adam.step({grad_u});
  BOOST_TEST(u.value()(0) == 1.0 - 0.1 * 2.5 / (2.5 + 1e-8), boost::test_tools::tolerance(1e-14));
  BOOST_TEST(adam.state().m[0](0) == 0.25, boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(lr_and_set_lr_per_group) {
  Graph<double> g;
  const auto a = g.parameter("a", xt::zeros<double>({2, 2}));
  const auto b = g.parameter("b", xt::zeros<double>({2}));
  Sgd<double> sgd({{{a}, 0.5, std::nullopt}, {{b}, std::nullopt, std::nullopt}}, 0.1);
  BOOST_TEST(sgd.lr(0) == 0.5);
  BOOST_TEST(sgd.lr(1) == 0.1);
  check_error([&] { sgd.lr(); }, {"Sgd::lr: the groups have different learning rates (groups[0].lr 0.5, groups[1].lr 0.1); read lr(group)"});
  sgd.set_lr(0.2);  // every group
  BOOST_TEST(sgd.lr() == 0.2);
  BOOST_TEST(sgd.lr(0) == 0.2);
  sgd.set_lr(1, 0.05);
  BOOST_TEST(sgd.lr(0) == 0.2);
  BOOST_TEST(sgd.lr(1) == 0.05);
  BOOST_TEST(*sgd.groups()[1].lr == 0.05);
  check_error([&] { sgd.set_lr(2, 0.1); }, {"Sgd::set_lr: no groups[2], the optimizer has 2 groups"});
  check_error([&] { sgd.lr(7); }, {"Sgd::lr: no groups[7], the optimizer has 2 groups"});
  check_error([&] { sgd.set_lr(1, -0.5); }, {"Sgd::set_lr: groups[1].lr must be a finite number >= 0, got -0.5"});
  check_error([&] { sgd.set_lr(std::nan("")); }, {"Sgd::set_lr: lr must be a finite number >= 0, got nan"});
  BOOST_TEST(sgd.lr(0) == 0.2);  // unchanged
  BOOST_TEST(sgd.lr(1) == 0.05);
  Adam<double> adam({a, b});
  check_error([&] { adam.lr(1); }, {"Adam::lr: no groups[1], the optimizer has 1 group"});
  adam.set_lr(0, 0.3);
  BOOST_TEST(adam.lr() == 0.3);
  // The lr of each group moves its parameters: g = 1 everywhere, plain SGD.
  const auto ga = g.constant("ga", xt::ones<double>({2, 2}));
  const auto gb = g.constant("gb", xt::ones<double>({2}));
  sgd.step({ga, gb});
  BOOST_TEST(a.value()(0, 0) == -0.2);
  BOOST_TEST(b.value()(1) == -0.05);
}

BOOST_AUTO_TEST_CASE(decay_groups_splits_a_small_model_as_nanogpt) {
  // An embedding, a linear layer, layer_norm, a linear read-out and a scalar temperature: the
  // rank >= 2 tensors decay, the biases, gains and the scalar do not; each group keeps the order.
  Graph<double> g;
  const auto table = g.parameter("table", glorot_uniform<double>({5, 4}, 1));
  const auto w1 = g.parameter("w1", glorot_uniform<double>({4, 6}, 2));
  const auto b1 = g.parameter("b1", xt::zeros<double>({6}));
  const auto gamma = g.parameter("gamma", xt::ones<double>({6}));
  const auto beta = g.parameter("beta", xt::zeros<double>({6}));
  const auto w2 = g.parameter("w2", glorot_uniform<double>({6, 3}, 3));
  const auto b2 = g.parameter("b2", xt::zeros<double>({3}));
  const auto temperature = g.parameter("temperature", xt::xarray<double>(1.0));
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{0, 3, 4});
  const auto h = layer_norm(relu(add(matmul(embedding(table, ids), w1), b1)), gamma, beta);
  const auto logits = mul(add(matmul(h, w2), b2), temperature);
  const auto loss = mse_loss(logits, g.constant("target", xt::ones<double>({3, 3})));
  const auto params = g.parameters();
  BOOST_TEST_REQUIRE(params.size() == 8u);
  const auto groups = decay_groups(params, 0.1);
  BOOST_TEST_REQUIRE(groups.size() == 2u);
  const auto ids_of = [](const std::vector<Var<double>>& vs) {
    std::vector<std::size_t> out;
    for (const auto& v : vs) out.push_back(v.id());
    return out;
  };
  BOOST_TEST(ids_of(groups[0].params) == (std::vector<std::size_t>{table.id(), w1.id(), w2.id()}), boost::test_tools::per_element());
  BOOST_TEST(ids_of(groups[1].params) == (std::vector<std::size_t>{b1.id(), gamma.id(), beta.id(), b2.id(), temperature.id()}), boost::test_tools::per_element());
  BOOST_TEST(*groups[0].weight_decay == 0.1);
  BOOST_TEST(*groups[1].weight_decay == 0.0);
  BOOST_TEST(!groups[0].lr.has_value());  // the optimizer's
  BOOST_TEST(!groups[1].lr.has_value());
  // One AdamW on the groups steps as two AdamWs do (decay 0.1 and 0), bit for bit, and its lr is
  // the optimizer's.
  AdamW<double> opt(groups, 3e-3, 0.9, 0.95);
  BOOST_TEST(opt.lr() == 3e-3);
  BOOST_TEST(ids_of(opt.params()) == (std::vector<std::size_t>{table.id(), w1.id(), w2.id(), b1.id(), gamma.id(), beta.id(), b2.id(), temperature.id()}), boost::test_tools::per_element());
  std::vector<xt::xarray<double>> start;
  for (const auto& p : opt.params()) start.push_back(p.value());
  const auto grads = grad(loss, opt.params());
  const auto run = [&](bool one) {
    for (std::size_t i = 0; i < start.size(); ++i) g.set_value(opt.params()[i], start[i]);
    g.replay();
    AdamW<double> grouped(groups, 3e-3, 0.9, 0.95);
    AdamW<double> decayed(groups[0].params, 3e-3, 0.9, 0.95, 1e-8, 0.1), other(groups[1].params, 3e-3, 0.9, 0.95, 1e-8, 0.0);
    for (int step = 0; step < 3; ++step) {
      if (one) {
        grouped.step(grads);
      } else {
        decayed.step(std::vector<Var<double>>(grads.begin(), grads.begin() + 3));
        other.step(std::vector<Var<double>>(grads.begin() + 3, grads.end()));
      }
      g.replay();
    }
    std::vector<xt::xarray<double>> out;
    for (const auto& p : opt.params()) out.push_back(p.value());
    return out;
  };
  const auto one = run(true), two = run(false);
  for (std::size_t i = 0; i < one.size(); ++i) {
    BOOST_TEST(same_bits(one[i], two[i]), "params()[" << i << "]");
    BOOST_TEST(!same_bits(one[i], start[i]), "params()[" << i << "] moved");
  }
  // A model without biases: the second group is empty, and the optimizer takes it.
  const auto only_weights = decay_groups<double>({w1, w2}, 0.1);
  BOOST_TEST(only_weights[1].params.empty());
  Adam<double> adam(only_weights);
  BOOST_TEST(adam.params().size() == 2u);
}

BOOST_AUTO_TEST_CASE(state_with_groups_round_trips_in_params_order) {
  // AdamW with groups [a (3, 4), c (2, 3)] and [b (5,)]: the moments are in params() order
  // a, c, b. 3 steps, the state carried into a new graph and optimizer of the same groups, 3
  // more: the same bits as 6 steps in one.
  const auto run = [](bool restart, AdamState<double>* first_state) {
    const auto build = [](Graph<double>& g, const std::vector<xt::xarray<double>>& values) {
      std::vector<Var<double>> ps;
      for (std::size_t i = 0; i < 3; ++i) ps.push_back(g.parameter(std::string(1, char('a' + i)), values[i]));
      return ps;
    };
    std::vector<xt::xarray<double>> values = {groups_fixture("params_a"), groups_fixture("params_b"), groups_fixture("params_c")};
    Graph<double> g;
    auto ps = build(g, values);
    const auto loss = add(add(sum(ps[0] * ps[0] * ps[0]), sum(ps[1] * ps[1])), sum(ps[2] * ps[2] * ps[2] * ps[2]));
    const auto make = [](const std::vector<Var<double>>& p) {
      return AdamW<double>({{{p[0], p[2]}, 0.05, 0.2}, {{p[1]}, std::nullopt, 0.0}}, 0.02, 0.9, 0.99);
    };
    AdamW<double> opt = make(ps);
    const auto grads = grad(loss, opt.params());
    for (int k = 0; k < 3; ++k) {
      opt.step(grads);
      g.replay();
    }
    if (first_state) *first_state = opt.state();
    if (!restart) {
      for (int k = 0; k < 3; ++k) {
        opt.step(grads);
        g.replay();
      }
      return std::vector<xt::xarray<double>>{ps[0].value(), ps[1].value(), ps[2].value()};
    }
    for (std::size_t i = 0; i < 3; ++i) values[i] = ps[i].value();
    Graph<double> g2;
    auto ps2 = build(g2, values);
    const auto loss2 = add(add(sum(ps2[0] * ps2[0] * ps2[0]), sum(ps2[1] * ps2[1])), sum(ps2[2] * ps2[2] * ps2[2] * ps2[2]));
    AdamW<double> opt2 = make(ps2);
    const auto grads2 = grad(loss2, opt2.params());
    opt2.set_state(opt.state());
    BOOST_TEST(opt2.state().step == 3);
    for (int k = 0; k < 3; ++k) {
      opt2.step(grads2);
      g2.replay();
    }
    BOOST_TEST(opt2.state().step == 6);
    return std::vector<xt::xarray<double>>{ps2[0].value(), ps2[1].value(), ps2[2].value()};
  };
  AdamState<double> state;
  const auto whole = run(false, &state), resumed = run(true, nullptr);
  for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(same_bits(whole[i], resumed[i]), "parameter " << i);
  BOOST_TEST(shapes_equal(state.m[0].shape(), Shape{3, 4}));
  BOOST_TEST(shapes_equal(state.m[1].shape(), Shape{2, 3}));
  BOOST_TEST(shapes_equal(state.v[2].shape(), Shape{5}));
  // A state in the parameters' creation order (a, b, c) is refused, naming the first mismatch.
  Graph<double> g;
  const auto a = g.parameter("a", xt::zeros<double>({3, 4}));
  const auto b = g.parameter("b", xt::zeros<double>({5}));
  const auto c = g.parameter("c", xt::zeros<double>({2, 3}));
  AdamW<double> opt({{{a, c}}, {{b}}});
  AdamState<double> creation_order;
  for (const auto& p : {a, b, c}) {
    creation_order.m.push_back(xt::zeros<double>(p.shape()));
    creation_order.v.push_back(xt::zeros<double>(p.shape()));
  }
  check_error([&] { opt.set_state(creation_order); }, {"AdamW::set_state: m[1] is (5,), the parameter (2, 3)"});
}

BOOST_AUTO_TEST_CASE(rejects_bad_groups) {
  Graph<double> g;
  const auto a = g.parameter("a", xt::zeros<double>({2, 2}));
  const auto b = g.parameter("b", xt::zeros<double>({2}));
  const auto x = g.constant("x", xt::zeros<double>({2}));
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  using Groups = std::vector<ParamGroup<double>>;
  check_error([&] { Adam<double>(Groups{{{a, b}}, {{b}}}); },
              {"Adam: groups[1].params[0] (node 1, 'b') is groups[0].params[1] again; give each parameter to one group, once"});
  check_error([&] { AdamW<double>(Groups{{{a, b, a}}}); }, {"AdamW: groups[0].params[2] (node 0, 'a') is groups[0].params[0] again"});
  check_error([&] { Sgd<double>({a, b, b}, 0.1); }, {"Sgd: params[2] (node 1, 'b') is params[1] again; give each parameter once"});
  check_error([&] { Adam<double>(Groups{{{a}}, {{x}}}); },
              {"Adam: groups[1].params[0] is not a parameter (node 2, constant); make trainable leaves with Graph::parameter"});
  check_error([&] { Sgd<double>(Groups{{{a}}, {{Var<double>()}}}, 0.1); }, {"Sgd: groups[1].params[0] is not a parameter;"});
  check_error([&] { Sgd<double>(Groups{}, 0.1); }, {"Sgd: no parameter groups; give at least one (a group may have no parameters)"});
  check_error([&] { AdamW<double>(Groups{}); }, {"AdamW: no parameter groups"});
  check_error([&] { Sgd<double>(Groups{{{a}}, {{b}, -1.0, std::nullopt}}, 0.1); }, {"Sgd: groups[1].lr must be a finite number >= 0, got -1"});
  check_error([&] { Adam<double>(Groups{{{a}, inf, std::nullopt}}); }, {"Adam: groups[0].lr must be a finite number >= 0, got inf"});
  check_error([&] { AdamW<double>(Groups{{{a}}, {{b}, std::nullopt, -0.1}}); }, {"AdamW: groups[1].weight_decay must be a finite number >= 0, got -0.1"});
  check_error([&] { Adam<double>(Groups{{{a}, 0.1, nan}}); }, {"Adam: groups[0].weight_decay must be a finite number >= 0, got nan"});
  // The constructor's own lr and weight_decay, checked also where every group sets its own.
  check_error([&] { Sgd<double>(Groups{{{a}, 0.1, 0.0}}, -0.1); }, {"Sgd: lr must be a finite number >= 0, got -0.1"});
  check_error([&] { Sgd<double>({a}, 0.1, 0.9, -1.0); }, {"Sgd: weight_decay must be a finite number >= 0, got -1"});
  check_error([&] { Adam<double>({a}, 0.1, 0.9, 0.999, 1e-8, inf); }, {"Adam: weight_decay must be a finite number >= 0, got inf"});
  check_error([&] { Adam<double>(Groups{{{a}, 0.1, 0.0}}, 0.1, 0.9, 0.999, 1e-8, -2.0); }, {"Adam: weight_decay must be a finite number >= 0, got -2"});
  check_error([&] { Sgd<double>(Groups{{{a}}}, 0.1, 1.5); }, {"Sgd: momentum must be in [0, 1), got 1.5"});
  // decay_groups.
  check_error([&] { decay_groups<double>({a, x}, 0.1); }, {"decay_groups: params[1] is not a parameter (node 2, constant)"});
  check_error([&] { decay_groups<double>({a, a}, 0.1); }, {"decay_groups: params[1] (node 0, 'a') is params[0] again; give each parameter once"});
  check_error([&] { decay_groups<double>({a}, -0.1); }, {"decay_groups: weight_decay must be a finite number >= 0, got -0.1"});
  // Parameters of two graphs may share an optimizer, as before; a step checks each gradient's.
  Graph<double> h;
  const auto c = h.parameter("c", xt::zeros<double>({2}));
  Sgd<double> sgd(Groups{{{a}}, {{c}}}, 0.1);  // ({{{a}}, {{c}}}) would also read as a list of Vars
  check_error([&] { sgd.step({g.constant("ga", xt::zeros<double>({2, 2})), g.constant("gc", xt::zeros<double>({2}))}); },
              {"Sgd::step: the gradient of params[1]", "belongs to another graph than the parameter"});
}

BOOST_AUTO_TEST_SUITE_END()
