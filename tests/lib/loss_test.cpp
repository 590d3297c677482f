#include "../check.hpp"

#include <cmath>
#include <limits>
#include <optional>

namespace {

using Labels = xt::xarray<std::int64_t>;

// One case of tests/data/make_torch_fixtures.py, part cross_entropy (its table `cases`): the
// input (logits, labels, u), ignore_index, the weights' fixture (or none), label_smoothing and
// reduction.
struct TorchCase {
  const char* name;
  const char* input;
  std::optional<std::int64_t> ignore_index;
  const char* weights;
  double label_smoothing;
  Reduction reduction;
};

constexpr auto mean_ = Reduction::mean;
constexpr auto sum_ = Reduction::sum;
constexpr auto none_ = Reduction::none;
const std::optional<std::int64_t> kept = std::nullopt;

const TorchCase torch_cases[] = {
    {"plain_mean", "batch_kept", kept, nullptr, 0.0, mean_},
    {"plain_sum", "batch_kept", kept, nullptr, 0.0, sum_},
    {"plain_none", "batch_kept", kept, nullptr, 0.0, none_},
    {"ignore_mean", "batch", -100, nullptr, 0.0, mean_},
    {"ignore_sum", "batch", -100, nullptr, 0.0, sum_},
    {"ignore_none", "batch", -100, nullptr, 0.0, none_},
    {"ignore_in_range_mean", "in_range", 2, nullptr, 0.0, mean_},
    {"weights_mean", "batch_kept", kept, "weights", 0.0, mean_},
    {"weights_sum", "batch_kept", kept, "weights", 0.0, sum_},
    {"weights_none", "batch_kept", kept, "weights", 0.0, none_},
    {"weights_ignore_mean", "batch", -100, "weights", 0.0, mean_},
    {"weights_ignore_none", "batch", -100, "weights", 0.0, none_},
    {"smoothing_mean", "batch_kept", kept, nullptr, 0.1, mean_},
    {"smoothing_sum", "batch_kept", kept, nullptr, 0.1, sum_},
    {"smoothing_none", "batch_kept", kept, nullptr, 0.1, none_},
    {"smoothing_weights_mean", "batch_kept", kept, "weights", 0.25, mean_},
    {"smoothing_ignore_mean", "batch", -100, nullptr, 0.25, mean_},
    {"smoothing_ignore_in_range_sum", "in_range", 2, nullptr, 0.3, sum_},
    {"all_options_mean", "batch", -100, "weights", 0.2, mean_},
    {"all_options_sum", "batch", -100, "weights", 0.2, sum_},
    {"all_options_none", "batch", -100, "weights", 0.2, none_},
    {"smoothing_one_mean", "batch", -100, "weights", 1.0, mean_},
    {"seq_all_options_mean", "seq", -100, "weights", 0.15, mean_},
    {"seq_all_options_none", "seq", -100, "weights", 0.15, none_},
    {"seq_ignore_sum", "seq", -100, nullptr, 0.0, sum_},
    {"single_mean", "single", kept, nullptr, 0.0, mean_},
    {"single_smoothing_weights_none", "single", kept, "weights", 0.2, none_},
    {"all_ignored_mean", "all_ignored", -100, nullptr, 0.0, mean_},
    {"all_ignored_sum", "all_ignored", -100, nullptr, 0.0, sum_},
    {"all_ignored_none", "all_ignored", -100, nullptr, 0.0, none_},
    {"all_ignored_all_options_mean", "all_ignored", -100, "weights", 0.2, mean_},
    {"zero_weight_mean", "zero_weight", -100, "zero_weights", 0.0, mean_},
    {"zero_weight_smoothing_mean", "zero_weight", -100, "zero_weights", 0.2, mean_},
};

xt::xarray<double> fixture(const std::string& name) { return torch_fixture("cross_entropy_" + name); }

// The largest |a - e| over the elements where e is finite (NaN and inf are checked apart).
double max_difference(const xt::xarray<double>& a, const xt::xarray<double>& e) {
  double worst = 0;
  for (std::size_t i = 0; i < e.size(); ++i) {
    if (std::isfinite(e.data()[i])) worst = std::max(worst, std::abs(a.data()[i] - e.data()[i]));
  }
  return worst;
}

// The loss of a case in a fresh graph of T, and its gradient w.r.t. the logits (for reduction
// none, of sum(loss * u)).
template <class T>
std::pair<xt::xarray<double>, xt::xarray<double>> run_torch_case(const TorchCase& c) {
  const std::string source = std::string(c.input) == "batch_kept" ? "batch" : c.input;
  Graph<T> g;
  const auto logits = g.parameter("logits", xt::cast<T>(fixture(source + "_logits")));
  const auto labels = g.indices("labels", xt::cast<std::int64_t>(fixture(std::string(c.input) + "_labels")));
  CrossEntropyOptions<T> o;
  o.ignore_index = c.ignore_index;
  if (c.weights) o.weights = xt::cast<T>(fixture(c.weights));
  o.label_smoothing = c.label_smoothing;
  o.reduction = c.reduction;
  const auto loss = cross_entropy(logits, labels, o);
  const auto gl = c.reduction == Reduction::none ? grad(loss, {logits}, g.constant("u", xt::cast<T>(fixture(source + "_u"))))[0]
                                                 : grad(loss, {logits})[0];
  return {xt::cast<double>(loss.value()), xt::cast<double>(gl.value())};
}

CrossEntropyOptions<double> all_options(double eps, Reduction r) {
  CrossEntropyOptions<double> o;
  o.ignore_index = -100;
  o.weights = xt::xarray<double>{0.5, 1.0, 2.0, 1.5};
  o.label_smoothing = eps;
  o.reduction = r;
  return o;
}

}  // namespace

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

BOOST_AUTO_TEST_CASE(cross_entropy_of_labels_matches_hand_values) {
  // The rows of cross_entropy_matches_hand_values as labels: row 0 class 1, -log 0.75; row 1
  // uniform over 2 classes, class 0, log 2.
  Graph<double> g;
  const auto logits = g.input("logits", {{0, std::log(3.0)}, {1, 1}});
  const auto labels = g.indices("labels", Labels{1, 0});
  const auto loss = cross_entropy(logits, labels, CrossEntropyOptions<double>{});
  BOOST_TEST(loss.value().dimension() == 0u);
  BOOST_TEST(loss.value()() == (-std::log(0.75) + std::log(2.0)) / 2, boost::test_tools::tolerance(1e-15));
  // d loss / d logits = (softmax - one_hot) / rows.
  const xt::xarray<double> expected = {{0.125, -0.125}, {-0.25, 0.25}};
  BOOST_TEST(grad(loss, {logits})[0].value() == expected, boost::test_tools::tolerance(1e-15) << boost::test_tools::per_element());
  // none: the per-position losses; an ignored position's is 0; sum: their sum; the weights
  // scale each position by its label's weight, and the mean divides by the kept weights' sum.
  CrossEntropyOptions<double> o;
  o.reduction = Reduction::none;
  o.ignore_index = 0;
  const auto per = cross_entropy(logits, labels, o);
  BOOST_TEST(per.value()(0) == -std::log(0.75), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(per.value()(1) == 0);
  o.reduction = Reduction::mean;
  o.ignore_index = std::nullopt;
  o.weights = xt::xarray<double>{3, 1};
  BOOST_TEST(cross_entropy(logits, labels, o).value()() == (-std::log(0.75) + 3 * std::log(2.0)) / 4,
             boost::test_tools::tolerance(1e-15));
  // label_smoothing eps: the target (1 - eps) one_hot + eps / C; row 1 is uniform, log 2 whatever eps.
  CrossEntropyOptions<double> s;
  s.label_smoothing = 0.5;
  s.reduction = Reduction::sum;
  BOOST_TEST(cross_entropy(logits, labels, s).value()() == -0.75 * std::log(0.75) - 0.25 * std::log(0.25) + std::log(2.0),
             boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_labels_is_the_probability_form_of_one_hot) {
  Graph<double> g;
  const auto logits = g.input("logits", random_array<double>({2, 3, 5}, 1));
  const auto labels = g.indices("labels", Labels{{0, 4, 2}, {1, 1, 3}});
  const auto dense = g.input("dense", one_hot<double>(xt::xarray<std::size_t>{{0, 4, 2}, {1, 1, 3}}, 5));
  const auto a = cross_entropy(logits, labels, CrossEntropyOptions<double>{});
  const auto b = cross_entropy(logits, dense);
  BOOST_TEST(a.value()() == b.value()(), boost::test_tools::tolerance(1e-15));
  check_close(grad(a, {logits})[0].value(), grad(b, {logits})[0].value(), 1e-15);
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_labels_matches_pytorch) {
  // tests/data/make_torch_fixtures.py, part cross_entropy: PyTorch 1.13's F.cross_entropy in
  // float64, every option alone and combined, each reduction, N of rank 0, 1 and 2, an ignore_index
  // in [0, C), all labels ignored (mean NaN, gradient 0) and kept weights summing to 0 (NaN);
  // the loss and its gradient w.r.t. the logits. float32 runs the same cases within 1e-5.
  double worst_loss = 0, worst_grad = 0, worst_loss32 = 0, worst_grad32 = 0;
  for (const TorchCase& c : torch_cases) {
    BOOST_TEST_CONTEXT(c.name) {
      const xt::xarray<double> loss = fixture(std::string(c.name) + "_loss"), gl = fixture(std::string(c.name) + "_grad");
      const auto [l64, g64] = run_torch_case<double>(c);
      check_close(l64, loss, 1e-14);
      check_close(g64, gl, 1e-14);
      worst_loss = std::max(worst_loss, max_difference(l64, loss));
      worst_grad = std::max(worst_grad, max_difference(g64, gl));
      const auto [l32, g32] = run_torch_case<float>(c);
      check_close(l32, loss, 1e-5);
      check_close(g32, gl, 1e-5);
      worst_loss32 = std::max(worst_loss32, max_difference(l32, loss));
      worst_grad32 = std::max(worst_grad32, max_difference(g32, gl));
    }
  }
  BOOST_TEST_MESSAGE("cross_entropy vs PyTorch, max |difference|: float64 loss " << worst_loss << ", gradient " << worst_grad
                                                                               << "; float32 loss " << worst_loss32
                                                                               << ", gradient " << worst_grad32);
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_labels_matches_finite_differences) {
  Graph<double> g;
  const auto logits = g.input("logits", random_array<double>({2, 3, 4}, 2));
  const auto labels = g.indices("labels", Labels{{3, -100, 0}, {1, 1, 2}});
  for (double eps : {0.0, 0.3}) {
    for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
      BOOST_TEST_CONTEXT("label_smoothing " << eps << ", reduction " << static_cast<int>(r)) {
        check_gradients(cross_entropy(logits, labels, all_options(eps, r)), {logits});
        CrossEntropyOptions<double> plain;
        plain.label_smoothing = eps;
        plain.reduction = r;
        plain.ignore_index = -100;
        check_gradients(cross_entropy(logits, labels, plain), {logits});
      }
    }
  }
}

// Issue 36: a mask baked into a constant at build time kept the first batch's; the labels must
// be read by the nodes. A replay after set_value of new labels gives the loss and gradient a
// graph built afresh with those labels gives, bit for bit, with every option on.
BOOST_AUTO_TEST_CASE(a_replay_with_new_labels_gives_the_new_loss) {
  const xt::xarray<double> x = random_array<double>({3, 2, 4}, 3);
  const Labels first = {{0, 1}, {-100, 3}, {2, 2}}, second = {{3, -100}, {-100, 0}, {1, 2}};
  for (double eps : {0.0, 0.2}) {
    for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
      BOOST_TEST_CONTEXT("label_smoothing " << eps << ", reduction " << static_cast<int>(r)) {
        Graph<double> g;
        const auto logits = g.parameter("logits", x);
        const auto labels = g.indices("labels", first);
        const auto loss = cross_entropy(logits, labels, all_options(eps, r));
        const auto gl = grad(loss, {logits})[0];
        const xt::xarray<double> before = loss.value();
        g.set_value(labels, second);
        g.replay();
        Graph<double> fresh;
        const auto f_logits = fresh.parameter("logits", x);
        const auto f_loss = cross_entropy(f_logits, fresh.indices("labels", second), all_options(eps, r));
        const auto f_gl = grad(f_loss, {f_logits})[0];
        BOOST_TEST(same_bits(loss.value(), f_loss.value()));
        BOOST_TEST(same_bits(gl.value(), f_gl.value()));
        BOOST_TEST(!same_bits(loss.value(), before));  // and it is another batch's loss
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_all_ignored_labels_is_nan_with_zero_gradient) {
  // PyTorch's: the mean is 0 / 0 = NaN, the sum 0, and the gradient 0 in all three reductions.
  Graph<double> g;
  const auto logits = g.input("logits", random_array<double>({2, 4}, 4));
  const auto labels = g.indices("labels", Labels{-100, -100});
  for (double eps : {0.0, 0.2}) {
    for (Reduction r : {Reduction::mean, Reduction::sum, Reduction::none}) {
      BOOST_TEST_CONTEXT("label_smoothing " << eps << ", reduction " << static_cast<int>(r)) {
        const auto loss = cross_entropy(logits, labels, all_options(eps, r));
        if (r == Reduction::mean) BOOST_TEST(std::isnan(loss.value()()));
        else BOOST_TEST(loss.value() == xt::xarray<double>(xt::zeros<double>(loss.value().shape())));
        BOOST_TEST(grad(loss, {logits})[0].value() == xt::xarray<double>(xt::zeros<double>({2, 4})));
        CrossEntropyOptions<double> plain;
        plain.ignore_index = -100;
        plain.label_smoothing = eps;
        plain.reduction = r;
        BOOST_TEST(grad(cross_entropy(logits, labels, plain), {logits})[0].value() == xt::xarray<double>(xt::zeros<double>({2, 4})));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(cross_entropy_of_labels_rejects_bad_labels_and_options) {
  Graph<double> g, other;
  const auto logits = g.input("logits", xt::zeros<double>({2, 5}));
  const auto labels = g.indices("labels", Labels{1, 4});
  const CrossEntropyOptions<double> none;
  // A label out of range names its value and position, at the call (before any node) and at a
  // replay (from the take_label node).
  const auto bad = g.indices("bad", Labels{1, 5}), neg = g.indices("neg", Labels{-100, 0}), neg2 = g.indices("neg2", Labels{0, -100});
  const std::size_t size = g.size();
  check_error([&] { cross_entropy(logits, bad, none); }, {"cross_entropy: label 5 at labels[1] is outside the classes [0, 5)"});
  check_error([&] { cross_entropy(logits, neg, none); }, {"cross_entropy: label -100 at labels[0] is outside the classes [0, 5)"});
  CrossEntropyOptions<double> ignoring;
  ignoring.ignore_index = -1;
  check_error([&] { cross_entropy(logits, neg2, ignoring); },
              {"cross_entropy: label -100 at labels[1] is outside the classes [0, 5) and is not ignore_index -1"});
  BOOST_TEST(g.size() == size);
  const auto loss = cross_entropy(logits, labels, ignoring);
  g.set_value(labels, Labels{7, 0});
  check_error([&] { g.replay(); }, {"take_label (node", "label 7 at labels[0] is outside the classes [0, 5) and is not ignore_index -1"});
  g.set_value(labels, Labels{-1, 0});
  g.replay();
  BOOST_TEST(loss.value()() == std::log(5.0), boost::test_tools::tolerance(1e-15));
  // The checks before any node: each names the shapes, the node or the value.
  const std::size_t built = g.size();
  BOOST_TEST(built > size);
  check_error([&] { cross_entropy(logits, g.indices("l3", Labels{0, 1, 2}), none); },
              {"cross_entropy: labels (3,) must be (2,), the shape of logits (2, 5) without its class axis"});
  check_error([&] { cross_entropy(logits, g.indices("l22", Labels{{0, 1}, {2, 3}}), none); },
              {"cross_entropy: labels (2, 2) must be (2,), the shape of logits (2, 5) without its class axis"});
  check_error([&] { cross_entropy(logits, g.constant("c", xt::xarray<double>{1, 4}), none); },
              {"cross_entropy: labels (node", ", constant) must be an index leaf (Graph::indices) of int64 class labels"});
  check_error([&] { cross_entropy(g.input("s", xt::xarray<double>(1.0)), g.indices("l0", Labels(0)), none); },
              {"cross_entropy: logits () have no class axis: they must be (N..., C)"});
  CrossEntropyOptions<double> w;
  w.weights = xt::xarray<double>{1, 2, 3};
  check_error([&] { cross_entropy(logits, labels, w); }, {"cross_entropy: weights (3,) must be (5,), one per class of logits (2, 5)"});
  w.weights = xt::xarray<double>(xt::ones<double>({1, 5}));
  check_error([&] { cross_entropy(logits, labels, w); }, {"cross_entropy: weights (1, 5) must be (5,)"});
  CrossEntropyOptions<double> s;
  s.label_smoothing = 1.5;
  check_error([&] { cross_entropy(logits, labels, s); }, {"cross_entropy: label_smoothing must be in [0, 1], got 1.5"});
  s.label_smoothing = std::numeric_limits<double>::quiet_NaN();
  check_error([&] { cross_entropy(logits, labels, s); }, {"cross_entropy: label_smoothing must be in [0, 1], got nan"});
  check_error([&] { cross_entropy(logits, other.indices("alien", Labels{0, 1}), none); },
              {"cross_entropy: labels (node 0) belongs to another graph than logits"});
  check_error([&] { cross_entropy(Var<double>(), labels, none); }, {"cross_entropy: logits is an empty Var"});
  // Class labels given to the probability form, as a bare {} for the options does (it selects
  // the form with an axis): it says what to call.
  check_error([&] { cross_entropy(logits, labels, {}); },
              {"cross_entropy: targets (node", ") is an index leaf: this form takes target probabilities; for class labels pass "
               "options, cross_entropy(logits, labels, CrossEntropyOptions<T>{})"});
  BOOST_TEST(g.size() == built + 5);  // the five leaves made above; no rejected call added a node
}

BOOST_AUTO_TEST_SUITE_END()
