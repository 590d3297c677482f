// Mask leaves (Graph::mask): booleans as graph inputs, replaced per batch. Issue 36: a mask
// given as xt::xarray<bool> became a constant, and a training loop's replay kept batch 0's mask.
#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace {

// q, k, v (B, H, T, d) of fixed seeds, in one graph.
template <class T>
struct Heads {
  Graph<T> g;
  Var<T> q, k, v;
  explicit Heads(const Shape& shape) {
    q = g.input("q", xt::cast<T>(random_array<double>(shape, 1)));
    k = g.input("k", xt::cast<T>(random_array<double>(shape, 2)));
    v = g.input("v", xt::cast<T>(random_array<double>(shape, 3)));
  }
};

// masked attention with a fixed (constant) mask in a graph of its own: the reference a replay
// with a new mask leaf must give.
xt::xarray<double> fresh_attention(const Shape& shape, const xt::xarray<bool>& mask) {
  Heads<double> h(shape);
  return masked_attention(h.q, h.k, h.v, mask).value();
}

}  // namespace

BOOST_AUTO_TEST_SUITE(mask_leaf)

BOOST_AUTO_TEST_CASE(holds_booleans_read_through_mask) {
  Graph<double> g;
  const xt::xarray<bool> m = {{true, false}, {false, true}};
  const auto leaf = g.mask("pad", m);
  BOOST_TEST(std::string(role_name(leaf.node().role)) == "input");
  BOOST_TEST(leaf.node().op_name() == "mask");
  BOOST_TEST((leaf.shape() == Shape{2, 2}));
  BOOST_TEST((leaf.mask() == m));
  check_error([&] { (void)leaf.value(); }, {"node 0 ('pad') is a mask leaf", "mask()", "float64"});
  const auto x = g.input("x", {{1, 2}, {3, 4}});
  check_error([&] { (void)x.mask(); }, {"node 1 ('x') (input) holds no mask"});
}

BOOST_AUTO_TEST_CASE(set_value_replaces_it_and_replay_reads_it) {
  // Issue 36's bug: the documented loop (build once, set_value, replay) must use each batch's
  // mask. Three batches of key lengths, each checked against a graph built for it.
  const Shape shape{3, 2, 5, 4};
  Heads<double> h(shape);
  const auto pad = h.g.mask("pad", key_padding_mask({5, 3, 1}, 5));
  const auto out = masked_attention(h.q, h.k, h.v, pad);
  const auto grads = grad(sum(out), {h.q, h.k, h.v});
  for (const std::vector<std::size_t>& lengths : {std::vector<std::size_t>{2, 5, 4}, {1, 1, 5}, {5, 3, 1}}) {
    h.g.set_value(pad, key_padding_mask(lengths, 5));
    h.g.replay();
    BOOST_TEST((pad.mask() == key_padding_mask(lengths, 5)));
    const xt::xarray<double> expected = fresh_attention(shape, key_padding_mask(lengths, 5));
    BOOST_TEST(xt::amax(xt::abs(out.value() - expected))() == 0.0);  // the same nodes: the same bits
    // Padded keys get exactly no weight: their v has gradient 0.
    for (std::size_t b = 0; b < 3; ++b) {
      for (std::size_t j = lengths[b]; j < 5; ++j) {
        BOOST_TEST(xt::amax(xt::abs(xt::view(grads[2].value(), b, xt::all(), j, xt::all())))() == 0.0);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_fixed_mask_is_a_constant_that_replay_keeps) {
  // The xarray overloads do what their comment and docs/api.md say: the mask is a constant
  // node "mask", which a replay after new inputs still applies, unchanged.
  const Shape shape{1, 1, 4, 4};
  Heads<double> h(shape);
  const auto out = masked_attention(h.q, h.k, h.v, causal_mask(4, 4));
  const auto& constant = h.g.node(out.id() - 3);  // mask, apply_mask, softmax, matmul
  BOOST_TEST(constant.name == "mask");
  BOOST_TEST(std::string(role_name(constant.role)) == "constant");
  h.g.set_value(h.q, xt::cast<double>(random_array<double>(shape, 9)));
  h.g.replay();
  Graph<double> g2;
  const auto q2 = g2.input("q", random_array<double>(shape, 9));
  const auto k2 = g2.input("k", random_array<double>(shape, 2));
  const auto v2 = g2.input("v", random_array<double>(shape, 3));
  BOOST_TEST(xt::amax(xt::abs(out.value() - masked_attention(q2, k2, v2, causal_mask(4, 4)).value()))() == 0.0);
}

BOOST_AUTO_TEST_CASE(has_no_gradient) {
  Heads<double> h({2, 3, 2});
  const auto pad = h.g.mask("pad", xt::xarray<bool>{{{true, true, false}}, {{true, false, false}}});
  const auto out = masked_attention(h.q, h.k, h.v, pad);
  check_error([&] { grad(sum(out), {pad}); }, {"grad: x[0] (node 3, 'pad') is a mask leaf: a mask has no gradient"});
  check_gradients(sum(mul(out, out)), {h.q, h.k, h.v});
}

BOOST_AUTO_TEST_CASE(set_value_refuses_another_kind_or_shape) {
  Graph<double> g;
  const auto pad = g.mask("pad", xt::xarray<bool>{true, false});
  const auto x = g.input("x", xt::xarray<double>{1, 2});
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{0, 1});
  check_error([&] { g.set_value(pad, xt::xarray<double>{1, 0}); },
              {"set_value: node 0 ('pad') is a mask leaf: its new value is a bool mask (xt::xarray<bool>), not float64 values"});
  check_error([&] { g.set_value(x, xt::xarray<bool>{true, false}); },
              {"set_value: node 1 ('x') is an input leaf: its new value is float64 values", "not a bool mask"});
  check_error([&] { g.set_value(ids, xt::xarray<bool>{true, false}); },
              {"node 2 ('ids') is an index leaf: its new value is int64 indices", "not a bool mask"});
  check_error([&] { g.set_value(pad, xt::xarray<bool>{true, false, true}); },
              {"set_value: node 0 ('pad') is a mask of shape (2,), the new mask is (3,)"});
  check_error([&] { g.set_value(add(x, x), xt::xarray<bool>{true, false}); }, {"only leaves"});
  BOOST_TEST((pad.mask() == xt::xarray<bool>{true, false}));  // a refused value changes nothing
}

BOOST_AUTO_TEST_CASE(json_round_trip_keeps_a_mask_leaf) {
  Heads<double> h({2, 3, 2});
  const auto pad = h.g.mask("pad", xt::xarray<bool>{{{true, true, false}}, {{true, false, false}}});
  h.g.set_output("out", masked_attention(h.q, h.k, h.v, pad));
  const Json j = to_json(h.g, ExportValues::inputs);
  BOOST_TEST(j["nodes"][3]["op"] == "mask");
  BOOST_TEST(j["nodes"][3]["role"] == "input");
  BOOST_TEST(j["nodes"][3]["outputs"][0]["data"].dump() == "[true,true,false,true,false,false]");
  const auto copy = graph_from_json<double>(j.dump());
  BOOST_TEST(copy->node(3).mask_leaf);
  const Var<double> out = copy->var(copy->outputs().at("out"));
  BOOST_TEST(xt::amax(xt::abs(out.value() - h.g.var(h.g.outputs().at("out")).value()))() == 0.0);
  // The imported leaf takes a new mask and the replay reads it.
  const xt::xarray<bool> next = {{{true, false, false}}, {{true, true, true}}};
  copy->set_value(copy->var(3), next);
  copy->replay();
  h.g.set_value(pad, next);
  h.g.replay();
  BOOST_TEST(xt::amax(xt::abs(out.value() - h.g.var(h.g.outputs().at("out")).value()))() == 0.0);
  BOOST_TEST(to_json(*copy, ExportValues::all).dump() == to_json(h.g, ExportValues::all).dump());
}

BOOST_AUTO_TEST_CASE(json_refuses_a_mask_of_numbers) {
  Graph<double> g;
  g.mask("pad", xt::xarray<bool>{true, false});
  std::string text = to_json(g, ExportValues::inputs).dump();
  const std::string data = "[true,false]";
  text.replace(text.find(data), data.size(), "[1,0]");
  check_error([&] { graph_from_json<double>(text); },
              {"nodes[0].outputs[0].data[0]", "expected true or false (a mask leaf holds booleans)"});
}

BOOST_AUTO_TEST_CASE(multi_head_attention_takes_a_mask_leaf) {
  // A key-padding mask leaf (B, 1, 1, T_k) broadcasts over heads and queries; the same model
  // with padding_mask(..., head_axis = true) as a constant gives the same bits.
  const std::size_t b = 3, t = 4, d = 8;
  const std::vector<std::size_t> lengths{4, 2, 1};
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({b, t, d}, 5));
  const auto p = attention_params(g, d, 11);
  const auto pad = g.mask("pad", key_padding_mask(lengths, t));
  const auto with_leaf = multi_head_attention(x, x, p, 2, pad);
  const auto with_constant = multi_head_attention(x, x, p, 2, padding_mask(lengths, t, t, true));
  BOOST_TEST(xt::amax(xt::abs(with_leaf.value() - with_constant.value()))() == 0.0);
  // (B, T_q, T_k) meets the heads axis with its B: both shapes named, and what to use instead.
  check_error([&] { multi_head_attention(x, x, p, 2, padding_mask(lengths, t, t)); },
              {"the mask (3, 4, 4) does not broadcast to the scores (3, 2, 4, 4)", "key_padding_mask"});
  const auto wrong = g.mask("wrong", xt::xarray<bool>(xt::ones<bool>(Shape{b, t, t})));
  check_error([&] { multi_head_attention(x, x, p, 2, wrong); }, {"the mask (3, 4, 4) does not broadcast"});
  Graph<double> other;
  const auto alien = other.mask("alien", key_padding_mask(lengths, t));
  check_error([&] { multi_head_attention(x, x, p, 2, alien); }, {"mask (node 0) belongs to another graph than x_q"});
  check_error([&] { multi_head_attention(x, x, p, 2, Var<double>()); }, {"multi_head_attention: mask is an empty Var"});
}

BOOST_AUTO_TEST_CASE(multi_head_attention_fused_takes_key_padding_and_causal_masks) {
  // The fused block against the composed one: a key-padding mask leaf (a sequence of length 0
  // included: rows of no allowed key), the fixed causal mask, and a new mask after a replay.
  const std::size_t b = 3, t = 6, d = 8;
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({b, t, d}, 7));
  const auto p = attention_params(g, d, 13);
  const auto pad = g.mask("pad", key_padding_mask({6, 0, 2}, t));
  const auto fused = multi_head_attention(x, x, p, 2, pad, AttentionImpl::fused);
  const auto composed = multi_head_attention(x, x, p, 2, pad);
  const auto causal_fused = multi_head_attention(x, x, p, 2, causal_mask(t, t), AttentionImpl::fused);
  const auto causal_composed = multi_head_attention(x, x, p, 2, causal_mask(t, t));
  const auto gf = grad(sum(mul(fused, fused)), {x, p.w_q, p.w_k, p.w_v});
  const auto gc = grad(sum(mul(composed, composed)), {x, p.w_q, p.w_k, p.w_v});
  const auto gcf = grad(sum(mul(causal_fused, causal_fused)), {x, p.w_k});
  const auto gcc = grad(sum(mul(causal_composed, causal_composed)), {x, p.w_k});
  for (int round = 0; round < 2; ++round) {
    BOOST_TEST(xt::amax(xt::abs(fused.value() - composed.value()))() <= 1e-13);
    BOOST_TEST(xt::amax(xt::abs(causal_fused.value() - causal_composed.value()))() <= 1e-13);
    for (std::size_t i = 0; i < gf.size(); ++i) BOOST_TEST(xt::amax(xt::abs(gf[i].value() - gc[i].value()))() <= 1e-12);
    for (std::size_t i = 0; i < gcf.size(); ++i) BOOST_TEST(xt::amax(xt::abs(gcf[i].value() - gcc[i].value()))() <= 1e-12);
    g.set_value(pad, key_padding_mask({1, 5, 6}, t));
    g.replay();
  }
  // Any other mask with fused: what it takes, named.
  const auto full = g.mask("full", xt::xarray<bool>(xt::ones<bool>(Shape{b, 1, t, t})));
  check_error([&] { multi_head_attention(x, x, p, 2, full, AttentionImpl::fused); },
              {"multi_head_attention: fused attention: the mask (3, 1, 6, 6) is no key-padding mask for the scores (3, 2, 6, 6)",
               "(B..., 1, T_k)", "AttentionImpl::composed"});
}

BOOST_AUTO_TEST_CASE(key_padding_mask_shape_and_values) {
  const xt::xarray<bool> m = key_padding_mask({2, 0, 3}, 3);
  BOOST_TEST((shape_of(m) == Shape{3, 1, 1, 3}));
  const xt::xarray<bool> expected = {{{{true, true, false}}}, {{{false, false, false}}}, {{{true, true, true}}}};
  BOOST_TEST((m == expected));
  check_error([] { key_padding_mask({4}, 3); }, {"padding_mask: sequence 0 has length 4, more than T_k = 3"});
}

BOOST_AUTO_TEST_SUITE_END()
