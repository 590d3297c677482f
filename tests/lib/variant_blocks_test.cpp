// lib/variant_attention: variant_attention and the variant self-attention block, against PyTorch
// float64 (tests/data/make_torch_fixtures.py, part variant_attention), finite differences, the
// attention without variants, and the diagnostics that read their weights.
#include "../check.hpp"

#include <xtensor/xview.hpp>

namespace {

// A constant of causal_mask(t_q, t_k) as 1 and 0.
Var<double> causal(Graph<double>& g, std::size_t t_q, std::size_t t_k) {
  return g.constant("causal", xt::cast<double>(causal_mask(t_q, t_k)));
}

// The options of the fixtures' case `name` (make_torch_fixtures.py, variant_attention's cases).
VariantOptions<double> fixture_options(Graph<double>& g, const std::string& name) {
  VariantOptions<double> o;
  if (name == "softmax") {
    o.softcap = 2.0;
    o.bias = alibi_bias(g, 4, 3, 5);
    o.mask = causal(g, 3, 5);
  } else if (name == "sigmoid") {
    o.weights = AttentionWeights::sigmoid;
    o.mask = causal(g, 3, 5);
  } else {
    o.scale = 0.3;
    o.softcap = 3.0;
    o.weights = AttentionWeights::sigmoid;
    o.sigmoid_bias = 0.5;
    o.mask = g.mask("padding", key_padding_mask({5, 3}, 5));
  }
  return o;
}

const char* const block_params[] = {"w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o", "q_gain", "k_gain"};

// The parameter of the block named `name`.
Var<double>& param(VariantAttentionParams<double>& p, const std::string& name) {
  if (name == "w_q") return p.w_q;
  if (name == "b_q") return p.b_q;
  if (name == "w_k") return p.w_k;
  if (name == "b_k") return p.b_k;
  if (name == "w_v") return p.w_v;
  if (name == "b_v") return p.b_v;
  if (name == "w_o") return p.w_o;
  if (name == "b_o") return p.b_o;
  return name == "q_gain" ? p.q_gain : p.k_gain;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(variant_blocks)

BOOST_AUTO_TEST_CASE(variant_attention_matches_pytorch_in_values_and_gradients) {
  for (const std::string name : {"softmax", "sigmoid", "sigmoid_padded"}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto fixture = [&](const std::string& what) { return torch_fixture("variant_attention_" + name + "_" + what); };
      const auto q = g.input("q", fixture("q")), k = g.input("k", fixture("k")), v = g.input("v", fixture("v"));
      const auto y = variant_attention(q, k, v, fixture_options(g, name));
      check_close(y.value(), fixture("y"));
      const auto grads = grad(y, {q, k, v}, fixture("u"));
      check_close(grads[0].value(), fixture("grad_q"));
      check_close(grads[1].value(), fixture("grad_k"));
      check_close(grads[2].value(), fixture("grad_v"));
    }
  }
}

BOOST_AUTO_TEST_CASE(without_variants_it_is_attention_and_grouped_heads_are_repeated_heads) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({2, 4, 3, 5}, 1)), k = g.input("k", random_array<double>({2, 4, 6, 5}, 2));
  const auto v = g.input("v", random_array<double>({2, 4, 6, 3}, 3));
  BOOST_TEST(variant_attention(q, k, v).value() == attention(q, k, v).value());  // the same nodes: the same bits
  VariantOptions<double> masked;
  masked.mask = causal(g, 3, 6);
  BOOST_TEST(variant_attention(q, k, v, masked).value() == masked_attention(q, k, v, causal_mask(3, 6)).value());
  const auto k1 = g.input("k1", random_array<double>({2, 1, 6, 5}, 4)), v1 = g.input("v1", random_array<double>({2, 1, 6, 3}, 5));
  BOOST_TEST(variant_attention(q, k1, v1).value() == attention(q, repeat_kv(k1, 4), repeat_kv(v1, 4)).value());
}

BOOST_AUTO_TEST_CASE(sigmoid_weights_hand_values_with_the_default_and_a_given_bias) {
  Graph<double> g;
  // q = 0: every score is 0, so every weight is sigmoid(b): 1 / (1 + T_k) for b = -log T_k.
  const auto q = g.input("q", xt::zeros<double>({1, 1, 2, 3}));
  const auto k = g.input("k", random_array<double>({1, 1, 4, 3}, 6));
  const auto v = g.input("v", xt::xarray<double>{{{{1, 0}, {2, 0}, {3, 0}, {4, 10}}}});
  VariantOptions<double> o;
  o.weights = AttentionWeights::sigmoid;
  const auto a = variant_attention_nodes(q, k, v, o);
  check_close(a.weights.value(), xt::xarray<double>(xt::ones<double>({1, 1, 2, 4}) * 0.2), 1e-15);
  check_close(a.output.value(), xt::xarray<double>{{{{2, 2}, {2, 2}}}}, 1e-15);  // 0.2 (1 + 2 + 3 + 4), 0.2 10
  o.sigmoid_bias = 0.0;
  check_close(variant_attention(q, k, v, o).value(), xt::xarray<double>{{{{5, 5}, {5, 5}}}}, 1e-15);
  BOOST_TEST(std::string(attention_weights_name(AttentionWeights::sigmoid)) == "sigmoid");
}

BOOST_AUTO_TEST_CASE(masked_weights_and_every_gradient_through_them_are_exactly_zero) {
  for (const auto& [weights, name] : attention_weights_names) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto [q, k, v] = random_qkv(g, {1, 2, 3, 4}, {1, 1, 4, 4}, {1, 1, 4, 2}, 7, 3.0);
      xt::xarray<bool> keep = causal_mask(3, 4);
      xt::view(keep, 0, xt::all()) = false;  // query 0 may attend to no key
      VariantOptions<double> o;
      o.weights = weights;
      o.softcap = 5.0;
      o.bias = alibi_bias(g, 2, 3, 4);
      o.mask = g.mask("keep", keep);
      const auto a = variant_attention_nodes(q, k, v, o);
      const auto u = random_array<double>({1, 2, 3, 2}, 10);
      const auto grads = grad(a.output, {q, k, v, a.scores, a.weights}, u);
      for (std::size_t h = 0; h < 2; ++h) {
        for (std::size_t i = 0; i < 3; ++i) {
          for (std::size_t j = 0; j < 4; ++j) {
            if (keep(i, j)) continue;
            BOOST_TEST(a.weights.value()(0, h, i, j) == 0.0);
            BOOST_TEST(grads[3].value()(0, h, i, j) == 0.0);  // the scores' gradient
          }
        }
        for (std::size_t c = 0; c < 4; ++c) BOOST_TEST(grads[0].value()(0, h, 0, c) == 0.0);  // grad_q of query 0
        for (std::size_t c = 0; c < 2; ++c) BOOST_TEST(a.output.value()(0, h, 0, c) == 0.0);
      }
      for (std::size_t i = 0; i < 5; ++i) BOOST_TEST(xt::all(xt::isfinite(grads[i].value())));
      BOOST_TEST(xt::all(xt::isfinite(a.output.value())));
    }
  }
}

BOOST_AUTO_TEST_CASE(variant_attention_finite_differences_to_second_order) {
  for (const auto& [weights, name] : attention_weights_names) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto [q, k, v] = random_qkv(g, {1, 2, 2, 3}, {1, 1, 3, 3}, {1, 1, 3, 2}, 11, 2.0);
      const auto u = g.input("u", random_array<double>({1, 2, 2, 2}, 14));
      VariantOptions<double> o;
      o.weights = weights;
      o.softcap = 1.5;
      o.bias = alibi_bias(g, 2, 2, 3);
      o.mask = causal(g, 2, 3);
      const auto y = variant_attention(q, k, v, o);
      check_gradients(y, {q, k, v});
      const auto grads = grad(y, {q, k, v}, u);
      check_gradients(grads[0], {q, k, v, u});
      check_gradients(grads[1], {q, k, v, u});
    }
  }
}

BOOST_AUTO_TEST_CASE(the_diagnostics_see_the_attention_weights_of_either_kind) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {1, 2, 3, 4}, {1, 1, 3, 4}, {1, 1, 3, 2}, 15, 2.0);
  const auto u = random_array<double>({1, 2, 3, 2}, 18);
  VariantOptions<double> o;
  o.softcap = 3.0;
  o.mask = causal(g, 3, 3);
  const auto soft = variant_attention_nodes(q, k, v, o);
  o.weights = AttentionWeights::sigmoid;
  const auto sig = variant_attention_nodes(q, k, v, o);
  grad(soft.output, {q}, u);
  grad(sig.output, {q}, u);
  // softmax: a softmax node (as char_gpt finds it), in softmax_diagnostics; the row-normalised
  // statistics agree with it.
  BOOST_TEST(softmax_axis(*soft.weights.node().op).has_value());
  BOOST_TEST(!softmax_axis(*sig.weights.node().op).has_value());
  const auto all = softmax_diagnostics(g);
  BOOST_TEST_REQUIRE(all.size() == 1u);
  BOOST_TEST(all[0].node == soft.weights.id());
  const auto same = attention_weights_diagnostics(soft.weights, soft.logits);
  BOOST_TEST_REQUIRE(same.rows.size() == all[0].rows.size());
  BOOST_TEST_REQUIRE(same.gradient_gain.has_value());
  BOOST_TEST(*same.vjp_node == *all[0].vjp_node);
  for (std::size_t r = 0; r < same.rows.size(); ++r) {
    BOOST_TEST(same.rows[r].normalized_entropy == all[0].rows[r].normalized_entropy, boost::test_tools::tolerance(1e-12));
    BOOST_TEST(same.rows[r].max_weight == all[0].rows[r].max_weight, boost::test_tools::tolerance(1e-12));
    BOOST_TEST(*same.rows[r].gradient_gain == *all[0].rows[r].gradient_gain, boost::test_tools::tolerance(1e-12));
  }
  // sigmoid: each row normalised, p = w / sum w; the gain ||grad logits|| / ||grad weights||.
  const auto d = attention_weights_diagnostics(sig.weights, sig.logits);
  BOOST_TEST(d.node == sig.weights.id());
  BOOST_TEST_REQUIRE(d.rows.size() == 6u);
  BOOST_TEST_REQUIRE(d.gradient_gain.has_value());
  const auto expected = grad(sig.output, {sig.weights, sig.logits}, u);  // the same gradients, again
  const xt::xarray<double>& w = sig.weights.value();
  for (std::size_t r = 0; r < 6; ++r) {
    const std::size_t h = r / 3, i = r % 3;
    double sum = 0, entropy = 0, gw = 0, gl = 0;
    for (std::size_t j = 0; j < 3; ++j) sum += w(0, h, i, j);
    for (std::size_t j = 0; j < 3; ++j) {
      const double p = w(0, h, i, j) / sum;
      if (p > 0) entropy -= p * std::log(p);
      gw += std::pow(expected[0].value()(0, h, i, j), 2);
      gl += std::pow(expected[1].value()(0, h, i, j), 2);
    }
    BOOST_TEST(d.rows[r].entropy == entropy, boost::test_tools::tolerance(1e-12));
    BOOST_TEST(d.rows[r].normalized_entropy == entropy / std::log(3.0), boost::test_tools::tolerance(1e-12));
    BOOST_TEST(*d.rows[r].gradient_gain == std::sqrt(gl / gw), boost::test_tools::tolerance(1e-12));
  }
  BOOST_TEST(d.rows[0].entropy == 0.0);  // query 0 sees key 0 only
}

BOOST_AUTO_TEST_CASE(attention_weights_diagnostics_of_equal_weights_and_its_errors) {
  Graph<double> g, other;
  // q = 0: equal weights over the allowed keys, so the normalised entropy of query i is
  // log(i + 1) / log T_k; no backward pass yet, so no gain.
  const auto q = g.input("q", xt::zeros<double>({1, 1, 4, 2}));
  const auto k = g.input("k", random_array<double>({1, 1, 4, 2}, 19));
  VariantOptions<double> o;
  o.weights = AttentionWeights::sigmoid;
  o.mask = causal(g, 4, 4);
  const auto a = variant_attention_nodes(q, k, k, o);
  const auto d = attention_weights_diagnostics(a.weights, a.logits, 0.6);
  BOOST_TEST(!d.gradient_gain.has_value());
  BOOST_TEST(!d.vjp_node.has_value());
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST(d.rows[i].normalized_entropy == std::log(i + 1.0) / std::log(4.0), boost::test_tools::tolerance(1e-14));
    BOOST_TEST(d.rows[i].max_weight == 1.0 / static_cast<double>(i + 1), boost::test_tools::tolerance(1e-14));
    BOOST_TEST(d.rows[i].saturated == (i == 0));
  }
  BOOST_TEST(d.saturated_fraction == 0.25);
  BOOST_TEST(attention_weights_diagnostics(a.weights, a.logits, 0.6, false).rows.empty());
  const auto alien = other.input("alien", xt::zeros<double>({1, 1, 4, 4}));
  check_error([&] { attention_weights_diagnostics(a.weights, a.logits, 0.0); },
              {"attention_weights_diagnostics: the threshold must be in (0, 1], got 0"});
  check_error([&] { attention_weights_diagnostics(a.weights, q); },
              {"attention_weights_diagnostics: weights must be (..., T_k) with T_k > 0 and logits of their shape: "
               "weights are (1, 1, 4, 4), logits (1, 1, 4, 2)"});
  check_error([&] { attention_weights_diagnostics(a.weights, alien); },
              {"attention_weights_diagnostics: logits (node 0) belongs to another graph than weights"});
  check_error([&] { attention_weights_diagnostics(Var<double>(), a.logits); },
              {"attention_weights_diagnostics: weights is an empty Var"});
}

BOOST_AUTO_TEST_CASE(variant_attention_rejects_bad_input_naming_it_and_adds_no_node) {
  Graph<double> g, other;
  const auto q = g.input("q", xt::zeros<double>({2, 4, 3, 5}));
  const auto k3 = g.input("k3", xt::zeros<double>({2, 3, 6, 5}));
  const auto k = g.input("k", xt::zeros<double>({2, 2, 6, 5}));
  const auto v = g.input("v", xt::zeros<double>({2, 2, 6, 4}));
  const auto flat = g.input("flat", xt::zeros<double>({3, 5}));
  const auto kd = g.input("kd", xt::zeros<double>({2, 2, 6, 7}));
  const auto bad = g.input("bad", xt::zeros<double>({4, 3, 5}));
  const auto alien = other.input("alien", xt::zeros<double>({3, 6}));
  const std::size_t nodes = g.size();
  const auto with = [&](auto set) {
    VariantOptions<double> o;
    set(o);
    return o;
  };
  check_error([&] { variant_attention(q, k3, k3); },
              {"variant_attention: the 3 key/value heads do not divide the 4 query heads", "q is (2, 4, 3, 5), k is (2, 3, 6, 5)"});
  check_error([&] { variant_attention(flat, flat, flat); },
              {"variant_attention: q, k and v must be (B..., H, T, d) of one rank >= 3", "q is (3, 5)"});
  check_error([&] { variant_attention(q, k, k3); }, {"the heads of k and v must be equal", "v is (2, 3, 6, 5)"});
  check_error([&] { variant_attention(q, kd, v); }, {"variant_attention: d_k differs: q has d_k = 5, k has d_k = 7"});
  check_error([&] { variant_attention(q, k, v, with([&](auto& o) { o.bias = bad; })); },
              {"variant_attention: the bias (4, 3, 5) does not broadcast to the scores (2, 4, 3, 6)"});
  check_error([&] { variant_attention(q, k, v, with([&](auto& o) { o.mask = bad; })); },
              {"variant_attention: the mask (4, 3, 5) does not broadcast to the scores (2, 4, 3, 6)"});
  check_error([&] { variant_attention(q, k, v, with([&](auto& o) { o.mask = alien; })); },
              {"variant_attention: mask (node 0) belongs to another graph than q"});
  check_error([&] { variant_attention(q, k, v, with([](auto& o) { o.softcap = -1; })); },
              {"variant_attention: softcap must be finite and > 0 (0 for none), got -1"});
  check_error([&] { variant_attention(q, k, v, with([](auto& o) { o.softcap = std::nan(""); })); }, {"got nan"});
  check_error([&] { variant_attention(q, k, v, with([](auto& o) { o.scale = std::numeric_limits<double>::infinity(); })); },
              {"variant_attention: the scale must be finite, got inf"});
  check_error([&] { variant_attention(q, k, v, with([](auto& o) { o.sigmoid_bias = 1.0; })); },
              {"variant_attention: sigmoid_bias is for sigmoid weights; these are softmax"});
  check_error([&] {
    variant_attention(q, k, v, with([](auto& o) {
      o.weights = AttentionWeights::sigmoid;
      o.sigmoid_bias = std::nan("");
    }));
  }, {"variant_attention: sigmoid_bias must be finite, got nan"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_CASE(the_block_matches_pytorch_for_x_and_every_parameter) {
  for (const std::string name : {"softmax", "sigmoid"}) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto fixture = [&](const std::string& what) { return torch_fixture("variant_attention_block_" + name + "_" + what); };
      const bool soft = name == "softmax";
      const auto x = g.input("x", fixture("x"));  // (2, 5, 16)
      VariantAttentionParams<double> p;
      std::vector<std::string> names(std::begin(block_params), std::end(block_params) - (soft ? 0 : 2));
      for (const auto& n : names) param(p, n) = g.parameter(n, fixture(n));
      VariantBlockOptions<double> o;
      o.rope = true;
      o.attention.mask = causal(g, 5, 5);
      if (soft) {
        o.qk_norm = QkNorm::layer;
        o.alibi = true;
        o.attention.softcap = 4.0;
      } else {
        o.attention.weights = AttentionWeights::sigmoid;
      }
      const auto y = variant_multi_head_attention(x, p, 4, soft ? 2 : 1, o);
      check_close(y.value(), fixture("y"));
      std::vector<Var<double>> xs{x};
      for (const auto& n : names) xs.push_back(param(p, n));
      const auto grads = grad(y, xs, fixture("u"));
      check_close(grads[0].value(), fixture("grad_x"));
      for (std::size_t i = 0; i < names.size(); ++i) {
        BOOST_TEST_CONTEXT(names[i]) { check_close(grads[i + 1].value(), fixture("grad_" + names[i])); }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_block_without_variants_is_multi_head_attention) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 5, 8}, 20));
  const VariantAttentionParams<double> p(attention_params(g, 8, 3));
  BOOST_TEST(variant_multi_head_attention(x, p, 2, 2).value() == multi_head_attention(x, x, p, 2).value());
  VariantBlockOptions<double> o;
  o.attention.mask = causal(g, 5, 5);
  BOOST_TEST(variant_multi_head_attention(x, p, 2, 2, o).value() == multi_head_attention(x, x, p, 2, causal_mask(5, 5)).value());
}

BOOST_AUTO_TEST_CASE(the_block_finite_differences_with_every_variant) {
  for (const auto weights : {AttentionWeights::softmax, AttentionWeights::sigmoid}) {
    BOOST_TEST_CONTEXT(attention_weights_name(weights)) {
      Graph<double> g;
      const auto x = g.input("x", random_array<double>({1, 3, 8}, 21));
      auto p = variant_attention_params(g, 8, 4, 2, true, 22);
      g.set_value(p.q_gain, random_array<double>({2}, 23, 0.3) + 1.0);
      g.set_value(p.b_k, random_array<double>({4}, 24, 0.3));
      VariantBlockOptions<double> o;
      o.rope = true;
      o.qk_norm = QkNorm::layer;
      o.alibi = true;
      o.attention.softcap = 2.0;
      o.attention.mask = causal(g, 3, 3);
      o.attention.weights = weights;
      const auto y = variant_multi_head_attention(x, p, 4, 2, o);
      check_gradients(y, {x, p.w_q, p.b_k, p.w_v, p.w_o, p.q_gain, p.k_gain});
    }
  }
}

BOOST_AUTO_TEST_CASE(the_block_exposes_its_attention_weights_as_char_gpt_finds_them) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 4, 8}, 25));
  const auto p = variant_attention_params(g, 8, 4, 1, false, 26);
  VariantBlockOptions<double> o;
  o.rope = true;
  const std::size_t first_new = g.size();
  const auto nodes = variant_multi_head_attention_nodes(x, p, 4, 1, o);
  std::vector<std::size_t> found;  // examples/char_gpt.hpp's search for the layer's softmax
  for (std::size_t id = first_new; id < g.size(); ++id) {
    if (!g.node(id).is_leaf() && softmax_axis(*g.node(id).op)) found.push_back(id);
  }
  BOOST_TEST(found == std::vector<std::size_t>{nodes.attention.weights.id()}, boost::test_tools::per_element());
  BOOST_TEST(nodes.attention.weights.shape() == (Shape{2, 4, 4, 4}));
  BOOST_TEST(nodes.output.shape() == (Shape{2, 4, 8}));
}

BOOST_AUTO_TEST_CASE(variant_attention_params_have_the_grouped_shapes) {
  Graph<double> g;
  const auto p = variant_attention_params(g, 16, 4, 2, true, 7, "h0.attn");
  BOOST_TEST(p.w_q.shape() == (Shape{16, 16}));
  BOOST_TEST(p.w_k.shape() == (Shape{16, 8}));
  BOOST_TEST(p.b_v.shape() == (Shape{8}));
  BOOST_TEST(p.w_o.shape() == (Shape{16, 16}));
  BOOST_TEST(p.q_gain.value() == xt::xarray<double>(xt::ones<double>({4})));
  BOOST_TEST(p.k_gain.node().name == "h0.attn.k_gain");
  BOOST_TEST(p.w_q.value() == glorot_uniform<double>({16, 16}, 7));
  BOOST_TEST(g.parameters().size() == 10u);
  BOOST_TEST(!variant_attention_params(g, 16, 4, 4, false, 7).q_gain.valid());
  check_error([&] { variant_attention_params(g, 16, 4, 3, false, 7); },
              {"variant_attention_params: needs heads dividing d_model and kv_heads dividing heads, got d_model = 16, heads = 4, kv_heads = 3"});
}

BOOST_AUTO_TEST_CASE(the_block_rejects_bad_input_naming_it_and_adds_no_node) {
  Graph<double> g, other;
  const auto x = g.input("x", xt::zeros<double>({2, 3, 12}));
  const auto flat = g.input("flat", xt::zeros<double>({3, 12}));
  const auto p = variant_attention_params(g, 12, 4, 2, false, 1);  // d_head 3
  const auto p6 = variant_attention_params(g, 12, 2, 2, false, 1);  // d_head 6, kv 2: w_k (12, 12)
  const auto bad_mask = g.input("bad_mask", xt::zeros<double>({3, 2}));
  const std::size_t nodes = g.size();
  check_error([&] { variant_multi_head_attention(x, p, 4, 3); },
              {"variant_multi_head_attention: 3 kv_heads do not divide the 4 heads"});
  check_error([&] { variant_multi_head_attention(x, p, 5, 1); }, {"variant_multi_head_attention: 5 heads do not divide d_model = 12"});
  check_error([&] { variant_multi_head_attention(flat, p, 4, 2); },
              {"variant_multi_head_attention: x must be (B, T, d_model) with T > 0 and d_model > 0: x is (3, 12)"});
  VariantBlockOptions<double> o;
  o.rope = true;
  check_error([&] { variant_multi_head_attention(x, p, 4, 2, o); },
              {"variant_multi_head_attention: rope needs an even head dimension", "got d_head = 3 (d_model = 12, 4 heads)"});
  check_error([&] { variant_multi_head_attention(x, p6, 2, 1); },
              {"variant_multi_head_attention: w_k is (12, 12), expected (12, 6) for d_model = 12, 2 heads and 1 kv_heads (d_head = 6)"});
  VariantBlockOptions<double> normed;
  normed.qk_norm = QkNorm::layer;
  check_error([&] { variant_multi_head_attention(x, p6, 2, 2, normed); }, {"variant_multi_head_attention: q_gain is an empty Var"});
  VariantBlockOptions<double> masked;
  masked.attention.mask = bad_mask;
  check_error([&] { variant_multi_head_attention(x, p6, 2, 2, masked); },
              {"variant_multi_head_attention: the mask (3, 2) does not broadcast to the scores (2, 2, 3, 3)"});
  VariantBlockOptions<double> capped;
  capped.attention.softcap = -2;
  check_error([&] { variant_multi_head_attention(x, p6, 2, 2, capped); },
              {"variant_multi_head_attention: softcap must be finite and > 0 (0 for none), got -2"});
  const auto alien = other.input("alien", xt::zeros<double>({2, 3, 12}));
  check_error([&] { variant_multi_head_attention(alien, p6, 2, 2); },
              {"variant_multi_head_attention: w_q (node", "belongs to another graph than x"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_CASE(float32_variant_attention_agrees_with_pytorch_float64_to_its_precision) {
  Graph<float> g;
  const auto fixture = [&](const std::string& what) { return torch_fixture("variant_attention_softmax_" + what); };
  const auto q = g.input("q", xt::cast<float>(fixture("q"))), k = g.input("k", xt::cast<float>(fixture("k")));
  const auto v = g.input("v", xt::cast<float>(fixture("v")));
  VariantOptions<float> o;
  o.softcap = 2.0;
  o.bias = alibi_bias(g, 4, 3, 5);
  o.mask = g.constant("causal", xt::cast<float>(causal_mask(3, 5)));
  const auto y = variant_attention(q, k, v, o);
  check_close(y.value(), fixture("y"), 1e-5);
  check_close(grad(y, {q}, xt::xarray<float>(xt::cast<float>(fixture("u"))))[0].value(), fixture("grad_q"), 1e-5);
}

BOOST_AUTO_TEST_CASE(the_block_exports_to_json_and_replays_the_same_bits) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 4, 8}, 27));
  const auto p = variant_attention_params(g, 8, 4, 2, true, 28);
  VariantBlockOptions<double> o;
  o.rope = true;
  o.qk_norm = QkNorm::layer;
  o.alibi = true;
  o.attention.softcap = 3.0;
  o.attention.weights = AttentionWeights::sigmoid;
  o.attention.mask = g.mask("keep", causal_mask(4, 4));
  const auto y = variant_multi_head_attention(x, p, 4, 2, o);
  grad(y, {x, p.q_gain});
  check_json_replays(g, x, {random_array<double>({2, 4, 8}, 29)});
}

BOOST_AUTO_TEST_SUITE_END()
