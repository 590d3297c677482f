#include "../check.hpp"

#include <xtensor/xmath.hpp>

namespace {

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
  check_error([&] { Sgd<double>({q.w}, -1.0); }, {"Sgd: lr must be a finite number > 0, got -1"});
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
  check_error([&] { Adam<double>({q.w}, inf); }, {"Adam: lr must be a finite number > 0, got inf"});
  check_error([&] { Adam<double>({q.w}, 0.1, nan); }, {"Adam: beta1 must be in [0, 1), got nan"});
  check_error([&] { Adam<double>({q.w}, 0.1, 0.9, 0.999, inf); }, {"Adam: eps must be a finite number > 0, got inf"});
  check_error([&] { Sgd<double>({q.w}, nan); }, {"Sgd: lr must be a finite number > 0, got nan"});
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

BOOST_AUTO_TEST_SUITE_END()
