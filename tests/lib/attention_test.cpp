#include "../check.hpp"

#include <xtensor/xmath.hpp>

namespace {

// The spec's documented example, and the closed forms of the gradients of sum(out).
template <class T>
void check_documented_example() {
  const DocumentedExample e = documented_example();
  Graph<T> g;
  const auto q = g.input("q", xt::cast<T>(e.q));
  const auto k = g.input("k", xt::cast<T>(e.k));
  const auto v = g.input("v", xt::cast<T>(e.v));
  const auto a = attention_nodes(q, k, v);
  BOOST_TEST(xt::amax(xt::abs(xt::cast<double>(a.output.value()) - e.output.value))() <= 1e-6);
  check_ulps(a.weights.value(), e.weights.value, 4);
  check_ulps(a.output.value(), e.output.value, 4);

  const auto grads = grad(a.output, {q, k, v});
  check_ulps(grads[0].value(), e.grad_q.value, 4);
  check_ulps(grads[1].value(), e.grad_k.value, 4);
  check_ulps(grads[2].value(), e.grad_v.value, 4);
}

struct Dims {
  Shape batch;
  std::size_t t_q, t_k, d_k, d_v;
};

Shape with(Shape batch, std::size_t rows, std::size_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(attention)

BOOST_AUTO_TEST_CASE(documented_example_float32) { check_documented_example<float>(); }
BOOST_AUTO_TEST_CASE(documented_example_float64) { check_documented_example<double>(); }

BOOST_AUTO_TEST_CASE(weights_average_the_values) {
  // scores [0, ln 3] give weights [0.25, 0.75]; over scalar values [2, 6] that is 5.
  Graph<double> g;
  const auto q = g.input("q", {{std::log(3.0)}});
  const auto k = g.input("k", {{0.0}, {1.0}});
  const auto v = g.input("v", {{2.0}, {6.0}});
  const auto a = attention_nodes(q, k, v);
  BOOST_TEST(a.weights.value()(0, 0) == 0.25, boost::test_tools::tolerance(1e-15));
  BOOST_TEST(a.output.value()(0, 0) == 5.0, boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(softmax_runs_over_keys_not_queries) {
  // scores [[0, ln 3], [0, ln 2]]: over keys (rows) the output is [[5], [14/3]]; over queries
  // (columns) it would be [[4.6], [3.4]].
  Graph<double> g;
  const auto q = g.input("q", {{std::log(3.0)}, {std::log(2.0)}});
  const auto k = g.input("k", {{0.0}, {1.0}});
  const auto v = g.input("v", {{2.0}, {6.0}});
  const auto& out = xgrad::attention(q, k, v).value();
  BOOST_TEST(out(0, 0) == 5.0, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(out(1, 0) == 14.0 / 3, boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(is_built_from_the_four_ops) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3}, {4, 3}, {4, 5}, 1);
  const auto a = attention_nodes(q, k, v);
  std::vector<std::string> ops;
  for (std::size_t i = 3; i < g.size(); ++i) ops.push_back(g.node(i).op_name());
  BOOST_TEST((ops == std::vector<std::string>{"scale", "transpose", "matmul", "softmax", "matmul"}));
  // The scale multiplies q (T_q x d_k), the first input of the scores' matmul.
  const auto& scaled_q = g.node(a.scores.node().inputs[0].node);
  BOOST_TEST(scaled_q.op->attrs()["alpha"].get<double>() == 1 / std::sqrt(3.0));
  BOOST_TEST(scaled_q.inputs[0].node == q.id());
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences_on_random_shapes) {
  std::mt19937_64 rng(2024);
  const auto pick = [&](std::size_t lo, std::size_t hi) {
    return std::uniform_int_distribution<std::size_t>(lo, hi)(rng);
  };
  const Shape batches[] = {{}, {1}, {2}, {2, 2}, {1, 3}};
  int cases = 0, tq_ne_tk = 0, dk_ne_dv = 0, size_one = 0, batched = 0;
  for (int c = 0; c < 120; ++c) {
    const Dims d{batches[pick(0, 4)], pick(1, 4), pick(1, 4), pick(1, 4), pick(1, 4)};
    Graph<double> g;
    const auto q = g.input("q", random_array<double>(with(d.batch, d.t_q, d.d_k), 3 * c));
    const auto k = g.input("k", random_array<double>(with(d.batch, d.t_k, d.d_k), 3 * c + 1));
    const auto v = g.input("v", random_array<double>(with(d.batch, d.t_k, d.d_v), 3 * c + 2));
    BOOST_TEST_CONTEXT("case " << c << ": q " << shape_str(q.value().shape()) << ", k "
                               << shape_str(k.value().shape()) << ", v " << shape_str(v.value().shape())) {
      check_gradients(xgrad::attention(q, k, v), {q, k, v});
    }
    ++cases;
    tq_ne_tk += d.t_q != d.t_k;
    dk_ne_dv += d.d_k != d.d_v;
    size_one += d.t_q == 1 || d.t_k == 1 || d.d_k == 1 || d.d_v == 1;
    batched += !d.batch.empty();
  }
  BOOST_TEST(cases >= 100);
  BOOST_TEST(tq_ne_tk >= 20);
  BOOST_TEST(dk_ne_dv >= 20);
  BOOST_TEST(size_one >= 20);
  BOOST_TEST(batched >= 20);
}

BOOST_AUTO_TEST_CASE(float32_gradients_match_float64_differences) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({2, 3, 4}, 11));
  const auto k = g.input("k", random_array<float>({2, 5, 4}, 12));
  const auto v = g.input("v", random_array<float>({2, 5, 3}, 13));
  check_gradients(xgrad::attention(q, k, v), {q, k, v});
}

BOOST_AUTO_TEST_CASE(second_order_gradients_match_finite_differences) {
  for (const Shape& batch : {Shape{}, Shape{2}}) {
    Graph<double> g;
    const auto q = g.input("q", random_array<double>(with(batch, 3, 2), 21));
    const auto k = g.input("k", random_array<double>(with(batch, 4, 2), 22));
    const auto v = g.input("v", random_array<double>(with(batch, 4, 3), 23));
    const auto u = g.input("u", random_array<double>(with(batch, 3, 3), 24));
    const auto grads = grad(xgrad::attention(q, k, v), {q, k, v}, u);
    for (std::size_t i = 0; i < 3; ++i) {
      BOOST_TEST_CONTEXT("d grad[" << i << "], batch " << shape_str(batch)) {
        check_gradients(grads[i], {q, k, v, u});
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(self_attention_sums_three_contributions) {
  Graph<double> g;
  const xt::xarray<double> value = random_array<double>({3, 4}, 31);
  const auto x = g.input("x", value);
  const auto gx = grad(xgrad::attention(x, x, x), {x})[0];
  // The same computation with q, k and v as three separate inputs.
  const auto q = g.input("q", value), k = g.input("k", value), v = g.input("v", value);
  const auto parts = grad(xgrad::attention(q, k, v), {q, k, v});
  const xt::xarray<double> sum = parts[0].value() + parts[1].value() + parts[2].value();
  BOOST_TEST(gx.value() == sum, boost::test_tools::tolerance(1e-14) << boost::test_tools::per_element());
  BOOST_TEST(xt::amax(xt::abs(gx.value() - parts[0].value()))() > 1e-3);  // not one contribution alone
  check_gradients(xgrad::attention(x, x, x), {x});
}

BOOST_AUTO_TEST_CASE(huge_scores_give_finite_rows_summing_to_one_in_float32) {
  for (double magnitude : {1e2, 1e3, 1e4}) {
    Graph<float> g;
    // Scores q k^T / sqrt(d_k) of magnitude about `magnitude`.
    const auto q = g.input("q", random_array<float>({6, 8}, 41, std::sqrt(magnitude)));
    const auto k = g.input("k", random_array<float>({7, 8}, 42, std::sqrt(magnitude)));
    const auto v = g.input("v", random_array<float>({7, 3}, 43));
    const auto a = attention_nodes(q, k, v);
    BOOST_TEST_CONTEXT("magnitude " << magnitude) {
      BOOST_TEST(xt::amax(xt::abs(a.scores.value()))() > 0.1 * magnitude);
      BOOST_TEST(xt::all(xt::isfinite(a.output.value())));
      const xt::xarray<float> sums = xt::sum(a.weights.value(), {1}, xt::evaluation_strategy::immediate);
      for (float s : sums) BOOST_TEST(s == 1.0f, boost::test_tools::tolerance(1e-6f));
      const auto grads = grad(a.output, {q, k, v});
      for (const auto& gr : grads) BOOST_TEST(xt::all(xt::isfinite(gr.value())));
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g, other;
  const auto q = g.input("q", xt::zeros<double>({2, 3}));
  const auto k = g.input("k", xt::zeros<double>({4, 3}));
  const auto v = g.input("v", xt::zeros<double>({4, 5}));
  const auto k5 = g.input("k5", xt::zeros<double>({4, 5}));
  const auto v3 = g.input("v3", xt::zeros<double>({3, 5}));
  const auto flat = g.input("flat", xt::zeros<double>({3}));
  const auto qb = g.input("qb", xt::zeros<double>({2, 2, 3}));
  const auto kb = g.input("kb", xt::zeros<double>({3, 4, 3}));
  const auto vb = g.input("vb", xt::zeros<double>({2, 4, 5}));
  const auto k0 = g.input("k0", xt::zeros<double>({0, 3}));
  const auto v0 = g.input("v0", xt::zeros<double>({0, 5}));
  const auto q0 = g.input("q0", xt::zeros<double>({2, 0}));
  const auto kd0 = g.input("kd0", xt::zeros<double>({4, 0}));
  const auto alien = other.input("alien", xt::zeros<double>({4, 3}));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::attention(q, k5, v); }, {"d_k differs", "q has d_k = 3", "k has d_k = 5", "q is (2, 3)", "(4, 5)"});
  check_error([&] { xgrad::attention(q, k, v3); }, {"T_k differs", "k has T_k = 4", "v has T_k = 3", "(3, 5)"});
  check_error([&] { xgrad::attention(flat, k, v); }, {"rank >= 2", "q is (3,)"});
  check_error([&] { xgrad::attention(qb, kb, vb); }, {"batch axes differ", "(2, 2, 3)", "(3, 4, 3)", "(2, 4, 5)"});
  check_error([&] { xgrad::attention(qb, k, v); }, {"batch axes differ", "(2, 2, 3)", "(4, 3)"});
  check_error([&] { xgrad::attention(q, k0, v0); }, {"T_k = 0", "(0, 3)", "(0, 5)"});
  check_error([&] { xgrad::attention(q0, kd0, v); }, {"d_k = 0", "(2, 0)", "(4, 0)"});
  check_error([&] { xgrad::attention(q, alien, v); }, {"k (node 0) belongs to another graph"});
  check_error([&] { xgrad::attention(q, Var<double>(), v); }, {"k is an empty Var"});
  BOOST_TEST(g.size() == nodes);  // nothing was added
  const auto out = xgrad::attention(q, k, v);
  check_error([&] { grad(out, {q}, xt::xarray<double>(xt::zeros<double>({5, 2}))); },
              {"grad_out is (5, 2)", "is (2, 5)"});
}

// Issue 15 (class 7): q, k of 2^15 rows make (2^15, 2^15) scores; attention refuses before its
// first node (the scale node was added before matmul refused).
BOOST_AUTO_TEST_CASE(refuses_scores_of_too_many_elements_before_any_node) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>(Shape{std::size_t(1) << 15, 1}));
  const auto k = g.input("k", xt::zeros<double>(Shape{std::size_t(1) << 15, 1}));
  check_error([&] { xgrad::attention(q, k, k); },
              {"attention: the scores (32768, 32768) (B..., T_q, T_k) makes more than 268435456 elements"});
  check_error([&] { xgrad::masked_attention(q, k, k, xt::xarray<bool>(xt::ones<bool>({1}))); },
              {"attention: the scores (32768, 32768)"});
  BOOST_TEST(g.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
