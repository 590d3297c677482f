#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(loss)

BOOST_AUTO_TEST_CASE(cross_entropy_matches_hand_values) {
  // Row 0: softmax [0.25, 0.75], target class 1: -log 0.75. Row 1: uniform over 3 classes
  // padded... kept 2 wide: [0.5, 0.5] against the soft target [0.5, 0.5]: log 2.
  Graph<double> g;
  const auto logits = g.input("logits", {{0, std::log(3.0)}, {1, 1}});
  const auto targets = g.input("targets", {{0, 1}, {0.5, 0.5}});
  const auto loss = cross_entropy(logits, targets);
  BOOST_TEST(loss.value().dimension() == 0u);
  BOOST_TEST(loss.value()() == (-std::log(0.75) + std::log(2.0)) / 2, boost::test_tools::tolerance(1e-15));
  // d loss / d logits = (softmax - targets) / rows.
  const auto gl = grad(loss, {logits})[0];
  const xt::xarray<double> expected = {{0.125, -0.125}, {0, 0}};
  BOOST_TEST(gl.value() == expected, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_a_batch_matches_finite_differences) {
  Graph<double> g;
  const auto logits = g.input("logits", random_array<double>({2, 3, 5}, 1));
  const auto targets = g.input("targets", one_hot<double>(xt::xarray<std::size_t>{{0, 4, 2}, {1, 1, 3}}, 5));
  check_gradients(cross_entropy(logits, targets), {logits, targets});
  const auto along_0 = g.input("p", xgrad::softmax(g.input("r", random_array<double>({2, 3, 5}, 2)), 0).value());
  check_gradients(cross_entropy(logits, along_0, 0), {logits, along_0});
}

BOOST_AUTO_TEST_CASE(cross_entropy_stays_finite_for_extreme_logits) {
  Graph<float> g;
  const auto logits = g.input("logits", {{1e4f, -1e4f}, {0.0f, 80.0f}});
  const auto targets = g.input("targets", {{0.0f, 1.0f}, {0.0f, 1.0f}});
  const auto loss = cross_entropy(logits, targets);
  BOOST_TEST(loss.value()() == 1e4f, boost::test_tools::tolerance(1e-6f));  // (2e4 + ~0) / 2
  const auto gl = grad(loss, {logits})[0];
  for (float e : gl.value()) BOOST_TEST(std::isfinite(e));
}

BOOST_AUTO_TEST_CASE(mse_loss_matches_hand_values_and_finite_differences) {
  Graph<double> g;
  const auto p = g.input("p", xt::xarray<double>{1, 2, 3});
  const auto t = g.input("t", xt::xarray<double>{1, 0, 0});
  const auto loss = mse_loss(p, t);
  BOOST_TEST(loss.value()() == 13.0 / 3, boost::test_tools::tolerance(1e-15));
  const auto gp = grad(loss, {p})[0];  // 2 (p - t) / n
  BOOST_TEST(gp.value() == (xt::xarray<double>{0, 4.0 / 3, 2}), boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  const auto a = g.input("a", random_array<double>({2, 3, 4}, 1));
  const auto b = g.input("b", random_array<double>({2, 3, 4}, 2));
  check_gradients(mse_loss(a, b), {a, b});
}

BOOST_AUTO_TEST_CASE(one_hot_marks_each_label) {
  const xt::xarray<double> y = one_hot<double>(xt::xarray<std::size_t>{2, 0, 2}, 3);
  BOOST_TEST(y == (xt::xarray<double>{{0, 0, 1}, {1, 0, 0}, {0, 0, 1}}));
  const xt::xarray<std::size_t> one = xt::ones<std::size_t>({1, 1});
  const xt::xarray<float> y3 = one_hot<float>(one, 2);
  BOOST_TEST(y3 == (xt::xarray<float>{{{0.0f, 1.0f}}}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_and_labels) {
  Graph<double> g;
  const auto logits = g.input("logits", xt::zeros<double>({2, 3}));
  const auto targets = g.input("targets", xt::zeros<double>({3}));
  check_error([&] { cross_entropy(logits, targets); }, {"cross_entropy: logits (2, 3) and targets (3,) must have one shape"});
  check_error([&] { cross_entropy(logits, logits, 2); }, {"log_softmax (node 2)", "axis 2 is out of range for a (2, 3) input"});
  check_error([&] { mse_loss(logits, targets); }, {"mse_loss: prediction (2, 3) and target (3,) must have one shape"});
  BOOST_TEST(g.size() == 2u);  // a rejected call adds no node
  check_error([&] { one_hot<double>(xt::xarray<std::size_t>{{0, 1}, {3, 0}}, 3); },
              {"one_hot: label 3 at [1, 0] is not below the number of classes, 3"});
}

// Issue 15 (class 8): mse_loss and cross_entropy of Vars of two graphs added a node (scale, or
// log_softmax) before the op refused; now they refuse first, naming the Var.
BOOST_AUTO_TEST_CASE(vars_of_two_graphs_add_no_node) {
  Graph<double> g, other;
  const auto a = g.input("a", xt::zeros<double>({2, 3}));
  const auto b = other.input("b", xt::zeros<double>({2, 3}));
  check_error([&] { mse_loss(a, b); }, {"mse_loss: target (node 0) belongs to another graph than prediction"});
  check_error([&] { mse_loss(b, a); }, {"mse_loss: target (node 0) belongs to another graph than prediction"});
  check_error([&] { cross_entropy(a, b); }, {"cross_entropy: targets (node 0) belongs to another graph than logits"});
  check_error([&] { cross_entropy(Var<double>(), a); }, {"cross_entropy: logits is an empty Var"});
  BOOST_TEST(g.size() == 1u);
  BOOST_TEST(other.size() == 1u);
}

// Issue 15: one_hot({0, 1}, 2^63) crashed (xtensor's strides overflowed); refused before allocating.
BOOST_AUTO_TEST_CASE(one_hot_refuses_too_many_elements) {
  check_error([&] { one_hot<double>(xt::xarray<std::size_t>{0, 1}, std::size_t(1) << 63); },
              {"one_hot: a (2, 9223372036854775808) result makes more than 268435456 elements"});
  check_error([&] { one_hot<float>(xt::xarray<std::size_t>::from_shape({0}), std::size_t(1) << 29); },
              {"one_hot: a (0, 536870912) result"});
}

BOOST_AUTO_TEST_SUITE_END()
