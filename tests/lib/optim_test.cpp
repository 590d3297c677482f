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

BOOST_AUTO_TEST_SUITE_END()
