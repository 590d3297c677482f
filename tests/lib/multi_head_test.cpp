#include "../check.hpp"

#include <xtensor/xbuilder.hpp>
#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace {

// Projections W = I and biases 0: the block reduces to attention of its inputs, head by head.
AttentionParams<double> identity_params(Graph<double>& g, std::size_t d_model) {
  AttentionParams<double> p = attention_params(g, d_model, 7);
  for (const Var<double>* w : {&p.w_q, &p.w_k, &p.w_v, &p.w_o}) g.set_value(*w, xt::eye<double>(d_model));
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(multi_head)

BOOST_AUTO_TEST_CASE(one_head_with_identity_projections_is_attention) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const AttentionParams<double> p = identity_params(g, 4);
  const auto out = multi_head_attention(x, x, p, 1);
  BOOST_TEST(out.value() == attention(x, x, x).value(), boost::test_tools::tolerance(1e-14) << boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(heads_attend_separately) {
  // Two heads with identity projections: head h sees only features [2h, 2h + 2).
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({1, 3, 4}, 2));
  const AttentionParams<double> p = identity_params(g, 4);
  const auto out = multi_head_attention(x, x, p, 2);
  for (std::size_t h = 0; h < 2; ++h) {
    const auto part = g.input("part", xt::xarray<double>(xt::view(x.value(), xt::all(), xt::all(), xt::range(2 * h, 2 * h + 2))));
    const auto expected = attention(part, part, part).value();
    for (std::size_t t = 0; t < 3; ++t) {
      for (std::size_t c = 0; c < 2; ++c) BOOST_TEST(out.value()(0, t, 2 * h + c) == expected(0, t, c), boost::test_tools::tolerance(1e-14));
    }
  }
}

BOOST_AUTO_TEST_CASE(the_whole_block_matches_finite_differences) {
  for (bool masked : {false, true}) {
    Graph<double> g;
    const auto x_q = g.input("x_q", random_array<double>({2, 3, 4}, 3));
    const auto x_kv = g.input("x_kv", random_array<double>({2, 4, 4}, 4));
    AttentionParams<double> p = attention_params(g, 4, 9);
    for (const Var<double>* b : {&p.b_q, &p.b_k, &p.b_v, &p.b_o}) g.set_value(*b, random_array<double>({4}, b->id()));
    g.replay();
    const auto out = masked ? multi_head_attention(x_q, x_kv, p, 2, causal_mask(3, 4)) : multi_head_attention(x_q, x_kv, p, 2);
    BOOST_TEST_CONTEXT((masked ? "causal" : "no mask")) {
      check_gradients(out, {x_q, x_kv, p.w_q, p.b_q, p.w_k, p.b_k, p.w_v, p.b_v, p.w_o, p.b_o});
    }
    // It exports and replays like any graph.
    grad(out, {x_q, p.w_q});
    const std::string text = to_json(g, ExportValues::all).dump();
    BOOST_TEST(to_json(*graph_from_json<double>(text), ExportValues::all).dump() == text);
  }
}

BOOST_AUTO_TEST_CASE(the_fused_block_agrees_with_the_composed_one) {
  xt::xarray<double> results[2][3];
  for (const AttentionImpl impl : {AttentionImpl::composed, AttentionImpl::fused}) {
    Graph<double> g;
    const auto x_q = g.input("x_q", random_array<double>({2, 3, 4}, 5));
    const auto x_kv = g.input("x_kv", random_array<double>({2, 6, 4}, 6));
    const AttentionParams<double> p = attention_params(g, 4, 11);
    const auto out = multi_head_attention(x_q, x_kv, p, 2, std::nullopt, impl);
    const auto grads = grad(out, {x_q, p.w_k}, random_array<double>({2, 3, 4}, 12));
    auto* r = results[impl == AttentionImpl::fused];
    r[0] = out.value();
    r[1] = grads[0].value();
    r[2] = grads[1].value();
    if (impl == AttentionImpl::fused) check_gradients(out, {x_q, x_kv, p.w_q, p.w_v});
  }
  for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(xt::amax(xt::abs(results[1][i] - results[0][i]))() <= 1e-12);
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3, 4}));
  const auto flat = g.input("flat", xt::zeros<double>({3, 4}));
  const auto p = attention_params(g, 4, 1);
  const auto small = attention_params(g, 2, 1, "small");
  check_error([&] { multi_head_attention(x, x, p, 3); }, {"3 heads do not divide d_model = 4"});
  check_error([&] { multi_head_attention(flat, x, p, 2); }, {"x_q is (3, 4), x_kv is (2, 3, 4)"});
  check_error([&] { multi_head_attention(x, x, small, 2); }, {"w_q is (2, 2), expected (4, 4)"});
  check_error([&] { multi_head_attention(x, x, p, 2, padding_mask({3, 1}, 3, 3, true), AttentionImpl::fused); },
              {"multi_head_attention: the fused attention takes causal_mask(3, 3) as its fixed mask, not this (2, 1, 3, 3) mask"});
}

// Issue 15 (class 8): every check before the first node. A Var of another graph, a mask that
// does not broadcast to (B, H, T_q, T_k), T_k = 0, d_model = 0 or scores of too many elements
// were found after the projections had been added.
BOOST_AUTO_TEST_CASE(a_rejected_call_adds_no_node) {
  Graph<double> g, other;
  const auto x = g.input("x", xt::zeros<double>({2, 3, 4}));
  const auto none = g.input("none", xt::zeros<double>({2, 0, 4}));
  const auto x0 = g.input("x0", xt::zeros<double>({2, 3, 0}));
  const auto p = attention_params(g, 4, 1);
  const auto p0 = attention_params(g, 0, 1, "zero");
  const auto alien = other.input("alien", xt::zeros<double>({2, 3, 4}));
  auto mixed = p;
  mixed.b_v = other.parameter("b_v", xt::zeros<double>({4}));
  const auto tall = g.input("tall", xt::zeros<double>(Shape{1, std::size_t(1) << 15, 2}));
  const auto wide = g.input("wide", xt::zeros<double>(Shape{1, std::size_t(1) << 14, 2}));
  const auto p2 = attention_params(g, 2, 1, "two");
  const std::size_t nodes = g.size();
  check_error([&] { multi_head_attention(x, alien, p, 2); }, {"multi_head_attention: x_kv (node 0) belongs to another graph than x_q"});
  check_error([&] { multi_head_attention(x, x, mixed, 2); }, {"multi_head_attention: b_v (node 1) belongs to another graph than x_q"});
  check_error([&] { multi_head_attention(x, Var<double>(), p, 2); }, {"multi_head_attention: x_kv is an empty Var"});
  check_error([&] { multi_head_attention(x, x, p, 2, causal_mask(3, 2)); },
              {"masked_attention: the mask (3, 2) does not broadcast to the scores (2, 2, 3, 3)"});
  check_error([&] { multi_head_attention(x, none, p, 2); },
              {"multi_head_attention: needs d_model > 0 and T_k > 0", "x_q is (2, 3, 4), x_kv is (2, 0, 4)"});
  check_error([&] { multi_head_attention(x0, x0, p0, 2); }, {"needs d_model > 0", "x_q is (2, 3, 0)"});
  check_error([&] { multi_head_attention(tall, wide, p2, 1); }, {"attention: the scores (1, 1, 32768, 16384)", "more than 268435456"});
  BOOST_TEST(g.size() == nodes);
  BOOST_TEST(other.size() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
