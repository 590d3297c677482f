// lib/variant_attention with AttentionImpl::fused: variant_attention and its block as one
// flash_attention node, against the composed graph in float64 (values and the gradients of q, k,
// v; 1e-12 relative, as tests/ops/flash_attention_variants_test.cpp): soft-cap, causal, causal
// windows, a key-padding mask leaf replayed with a new value, GQA and MQA, all of them together;
// the options causal and window of the composed graph against the explicit masks; the scores'
// element limit that fused does not need; and every variant fused refuses.
#include "../check.hpp"

#include <functional>

namespace {

// q (B, Hq, T_q, d_k), k (B, Hkv, T_k, d_k), v (B, Hkv, T_k, d_v), entries N(0, stddev^2) in q, k.
struct Problem {
  std::size_t b, hq, hkv, t_q, t_k, d_k, d_v;
  double stddev = 1;
};

std::string str(const Problem& p) {
  return "B " + std::to_string(p.b) + ", Hq " + std::to_string(p.hq) + ", Hkv " + std::to_string(p.hkv) + ", T_q " +
         std::to_string(p.t_q) + ", T_k " + std::to_string(p.t_k) + ", d_k " + std::to_string(p.d_k) + ", d_v " +
         std::to_string(p.d_v);
}

struct Inputs {
  Var<double> q, k, v;
  xt::xarray<double> u;  // the gradient of the output: grad(out, {q, k, v}, u)
};

Inputs inputs(Graph<double>& g, const Problem& p, std::uint64_t seed) {
  return {g.input("q", random_array<double>({p.b, p.hq, p.t_q, p.d_k}, seed, p.stddev)),
          g.input("k", random_array<double>({p.b, p.hkv, p.t_k, p.d_k}, seed + 1, p.stddev)),
          g.input("v", random_array<double>({p.b, p.hkv, p.t_k, p.d_v}, seed + 2)),
          random_array<double>({p.b, p.hq, p.t_q, p.d_v}, seed + 3)};
}

// What a case sets in the options, given the graph (for a mask leaf) and the problem.
using SetOptions = std::function<void(Graph<double>&, const Problem&, VariantOptions<double>&)>;

// out and the gradients of sum(u * out) w.r.t. q, k, v, in a graph of their own. With impl
// fused, also checks that the nodes are flash_attention's out and no scores, logits or weights.
std::vector<xt::xarray<double>> results(const Problem& p, const SetOptions& set, AttentionImpl impl, std::uint64_t seed) {
  Graph<double> g;
  const Inputs in = inputs(g, p, seed);
  VariantOptions<double> o;
  set(g, p, o);
  o.impl = impl;
  const auto nodes = variant_attention_nodes(in.q, in.k, in.v, o);
  if (impl == AttentionImpl::fused) {
    BOOST_TEST(!nodes.scores.valid());
    BOOST_TEST(!nodes.logits.valid());
    BOOST_TEST(!nodes.weights.valid());
    BOOST_TEST(nodes.output.node().op_name() == "flash_attention");
  }
  std::vector<xt::xarray<double>> values{nodes.output.value()};
  for (const auto& gr : grad(nodes.output, {in.q, in.k, in.v}, in.u)) values.push_back(gr.value());
  return values;
}

void check_all_close(const std::vector<xt::xarray<double>>& actual, const std::vector<xt::xarray<double>>& expected) {
  const char* names[] = {"out", "grad_q", "grad_k", "grad_v"};
  for (std::size_t i = 0; i < 4; ++i) {
    BOOST_TEST_CONTEXT(names[i]) { check_close(actual[i], expected[i], 1e-12); }
  }
}

// The fused results equal the composed ones within 1e-12 (relative, absolute near 0).
void check_fused_equals_composed(const Problem& p, const SetOptions& set, std::uint64_t seed) {
  BOOST_TEST_CONTEXT(str(p)) {
    check_all_close(results(p, set, AttentionImpl::fused, seed), results(p, set, AttentionImpl::composed, seed));
  }
}

// The key-padding mask leaf "pad" (B, 1, 1, T_k) of these lengths.
Var<double> padding(Graph<double>& g, const std::vector<std::size_t>& lengths, std::size_t t_k) {
  return g.mask("pad", key_padding_mask(lengths, t_k));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(variant_fused)

BOOST_AUTO_TEST_CASE(without_variants_it_is_the_fused_attention_to_the_bit) {
  Graph<double> g;
  const Inputs in = inputs(g, {2, 3, 3, 4, 6, 5, 2}, 1);
  VariantOptions<double> o;
  o.impl = AttentionImpl::fused;
  BOOST_TEST(variant_attention(in.q, in.k, in.v, o).value() == attention(in.q, in.k, in.v, AttentionImpl::fused).value());
}

BOOST_AUTO_TEST_CASE(soft_cap_fused_equals_composed) {
  for (const double cap : {0.5, 2.0, 30.0}) {
    BOOST_TEST_CONTEXT("softcap " << cap) {
      check_fused_equals_composed({2, 2, 2, 5, 7, 4, 3, 3.0}, [&](auto&, auto&, auto& o) { o.softcap = cap; }, 10);
      check_fused_equals_composed({1, 3, 3, 6, 4, 2, 3}, [&](auto&, auto&, auto& o) {
        o.softcap = cap;
        o.scale = 0.4;
      }, 20);
    }
  }
}

BOOST_AUTO_TEST_CASE(causal_fused_equals_composed) {
  const SetOptions causal = [](auto&, auto&, auto& o) { o.causal = true; };
  check_fused_equals_composed({2, 2, 2, 6, 6, 4, 3}, causal, 30);
  check_fused_equals_composed({1, 3, 3, 4, 7, 3, 2}, causal, 40);  // queries aligned to the last keys
  check_fused_equals_composed({2, 1, 1, 7, 4, 3, 2}, causal, 50);  // T_q > T_k: rows of no key, 0 in both
}

BOOST_AUTO_TEST_CASE(windows_of_1_3_and_at_least_t_fused_equal_composed) {
  for (const std::size_t window : {std::size_t(1), std::size_t(3), std::size_t(6), std::size_t(7), std::size_t(100)}) {
    BOOST_TEST_CONTEXT("window " << window) {
      const SetOptions windowed = [&](auto&, auto&, auto& o) {
        o.causal = true;
        o.window = window;
      };
      check_fused_equals_composed({2, 2, 2, 6, 6, 4, 3}, windowed, 60);
      check_fused_equals_composed({1, 2, 2, 4, 7, 3, 2}, windowed, 70);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_key_padding_mask_leaf_fused_equals_composed_and_both_follow_a_new_value) {
  const Problem p{2, 2, 2, 5, 7, 4, 3};
  const auto with_lengths = [](std::vector<std::size_t> lengths) -> SetOptions {
    return [lengths](auto& graph, auto& problem, auto& o) { o.mask = padding(graph, lengths, problem.t_k); };
  };
  check_fused_equals_composed(p, with_lengths({7, 3}), 80);
  // One graph holding both impls over one mask leaf, replayed with a new value of the leaf.
  Graph<double> g;
  const Inputs in = inputs(g, p, 80);
  const auto pad = padding(g, {7, 3}, p.t_k);
  VariantOptions<double> o;
  o.mask = pad;
  const auto composed = variant_attention(in.q, in.k, in.v, o);
  o.impl = AttentionImpl::fused;
  const auto fused = variant_attention(in.q, in.k, in.v, o);
  const auto grads_composed = grad(composed, {in.q, in.k, in.v}, in.u), grads_fused = grad(fused, {in.q, in.k, in.v}, in.u);
  const xt::xarray<double> before = fused.value();
  g.set_value(pad, key_padding_mask({2, 6}, p.t_k));
  g.replay();
  BOOST_TEST(!(fused.value() == before));
  const auto expected = results(p, with_lengths({2, 6}), AttentionImpl::composed, 80);
  for (const auto& [y, grads] : {std::pair{composed, grads_composed}, std::pair{fused, grads_fused}}) {
    BOOST_TEST_CONTEXT(y.node().op_name()) {
      check_all_close({y.value(), grads[0].value(), grads[1].value(), grads[2].value()}, expected);
    }
  }
}

BOOST_AUTO_TEST_CASE(grouped_and_multi_query_heads_fused_equal_composed) {
  const SetOptions none = [](auto&, auto&, auto&) {};
  check_fused_equals_composed({2, 4, 2, 5, 6, 3, 4}, none, 90);  // GQA: 2 query heads per kv head
  check_fused_equals_composed({2, 4, 1, 5, 6, 3, 4}, none, 100);  // MQA
}

BOOST_AUTO_TEST_CASE(every_variant_together_fused_equals_composed) {
  for (const std::size_t hkv : {std::size_t(1), std::size_t(2)}) {
    for (const std::size_t window : {std::size_t(0), std::size_t(1), std::size_t(3), std::size_t(9)}) {
      BOOST_TEST_CONTEXT("Hkv " << hkv << ", window " << window) {
        check_fused_equals_composed({2, 4, hkv, 6, 9, 3, 2, 2.0}, [&](auto& graph, auto& problem, auto& o) {
          o.scale = 0.5;
          o.softcap = 1.5;
          o.causal = true;
          o.window = window;
          o.mask = padding(graph, {9, 5}, problem.t_k);
        }, 110 + 10 * window + hkv);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(composed_causal_and_window_are_the_explicit_masks) {
  Graph<double> g;
  const Inputs in = inputs(g, {2, 4, 2, 5, 7, 3, 2}, 200);
  const auto constant = [&](const xt::xarray<bool>& m) { return g.constant("m", xt::cast<double>(m)); };
  const auto same = [&](const VariantOptions<double>& a, const VariantOptions<double>& b) {
    return variant_attention(in.q, in.k, in.v, a).value() == variant_attention(in.q, in.k, in.v, b).value();
  };
  for (const auto weights : {AttentionWeights::softmax, AttentionWeights::sigmoid}) {
    BOOST_TEST_CONTEXT(attention_weights_name(weights)) {
      VariantOptions<double> options, explicit_mask;
      options.weights = explicit_mask.weights = weights;
      options.causal = true;
      explicit_mask.mask = constant(causal_mask(5, 7));
      BOOST_TEST(same(options, explicit_mask));
      for (const std::size_t window : {std::size_t(1), std::size_t(3), std::size_t(7)}) {
        options.window = window;
        explicit_mask.mask = constant(sliding_window_mask(5, 7, window));
        BOOST_TEST(same(options, explicit_mask), "window " << window);
      }
      // With a mask as well: allowed where both allow (the mask leaf and the window).
      options.window = 3;
      options.mask = padding(g, {7, 4}, 7);
      xt::xarray<bool> both = key_padding_mask({7, 4}, 7) && sliding_window_mask(5, 7, 3);
      explicit_mask.mask = constant(both);
      BOOST_TEST(same(options, explicit_mask));
    }
  }
}

BOOST_AUTO_TEST_CASE(fused_holds_no_scores_so_their_element_limit_does_not_apply) {
  // T = 16385: the scores (1, 1, T, T) would hold more than 2^28 elements. The window of one key
  // makes each output row the value row of its own position.
  const std::size_t t = 16385;
  Graph<double> g;
  const Inputs in = inputs(g, {1, 1, 1, t, t, 1, 2}, 300);
  VariantOptions<double> o;
  o.causal = true;
  o.window = 1;
  check_error([&] { variant_attention(in.q, in.k, in.v, o); },
              {"variant_attention: the scores (1, 1, 16385, 16385) (B..., Hq, T_q, T_k) makes more than 268435456 elements"});
  o.impl = AttentionImpl::fused;
  const auto y = variant_attention(in.q, in.k, in.v, o);
  BOOST_TEST(y.value() == in.v.value());
}

BOOST_AUTO_TEST_CASE(the_block_fused_equals_composed) {
  for (const std::size_t kv_heads : {std::size_t(1), std::size_t(2), std::size_t(4)}) {
    BOOST_TEST_CONTEXT("kv_heads " << kv_heads) {
      std::vector<xt::xarray<double>> values[2];
      for (const auto impl : {AttentionImpl::composed, AttentionImpl::fused}) {
        Graph<double> g;
        const auto x = g.input("x", random_array<double>({2, 6, 16}, 400));
        auto p = variant_attention_params(g, 16, 4, kv_heads, true, 401);
        g.set_value(p.q_gain, random_array<double>({4}, 402, 0.3) + 1.0);
        g.set_value(p.b_k, random_array<double>({4 * kv_heads}, 403, 0.3));
        VariantBlockOptions<double> o;
        o.rope = true;
        o.qk_norm = QkNorm::layer;
        o.attention.softcap = 3.0;
        o.attention.causal = true;
        o.attention.window = 4;
        o.attention.mask = padding(g, {6, 4}, 6);
        o.attention.impl = impl;
        const auto nodes = variant_multi_head_attention_nodes(x, p, 4, kv_heads, o);
        BOOST_TEST(nodes.attention.weights.valid() == (impl == AttentionImpl::composed));
        const std::vector<Var<double>> xs{x, p.w_q, p.b_q, p.w_k, p.b_k, p.w_v, p.b_v, p.w_o, p.b_o, p.q_gain, p.k_gain};
        auto& out = values[impl == AttentionImpl::fused];
        out.push_back(nodes.output.value());
        for (const auto& gr : grad(nodes.output, xs, random_array<double>({2, 6, 16}, 404))) out.push_back(gr.value());
      }
      for (std::size_t i = 0; i < values[0].size(); ++i) {
        BOOST_TEST_CONTEXT("value " << i << " (0 out, 1 grad_x, then the parameters)") {
          check_close(values[1][i], values[0][i], 1e-12);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(fused_refuses_the_variants_flash_attention_has_not_and_adds_no_node) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 4, 3, 5}));
  const auto k = g.input("k", xt::zeros<double>({2, 2, 6, 5}));
  const auto v = g.input("v", xt::zeros<double>({2, 2, 6, 4}));
  const auto bias = alibi_bias(g, 4, 3, 6);
  const auto causal = g.constant("causal", xt::cast<double>(causal_mask(3, 6)));
  const auto rows = g.mask("rows", padding_mask({6, 2}, 3, 6, true));  // (2, 1, 3, 6): per query, no key mask
  const auto x = g.input("x", xt::zeros<double>({2, 3, 8}));
  const auto p = variant_attention_params(g, 8, 2, 1, false, 1);
  const auto block_causal = g.constant("block_causal", xt::cast<double>(causal_mask(3, 3)));
  const auto fused = [](auto set) {
    VariantOptions<double> o;
    o.impl = AttentionImpl::fused;
    set(o);
    return o;
  };
  const std::size_t nodes = g.size();
  check_error([&] { variant_attention(q, k, v, fused([&](auto& o) { o.bias = bias; })); },
              {"variant_attention: impl fused has no additive bias (ALiBi), got a bias (4, 3, 6): use AttentionImpl::composed"});
  check_error([&] { variant_attention(q, k, v, fused([](auto& o) { o.weights = AttentionWeights::sigmoid; })); },
              {"variant_attention: impl fused has softmax weights only (its online softmax normalises each row), got "
               "sigmoid weights: use AttentionImpl::composed"});
  check_error([&] {
    variant_attention(q, k, v, fused([](auto& o) {
      o.weights = AttentionWeights::sigmoid;
      o.sigmoid_bias = 0.5;
    }));
  }, {"variant_attention: impl fused has softmax weights only", "got sigmoid weights"});
  check_error([&] { variant_attention(q, k, v, fused([](auto& o) { o.sigmoid_bias = 0.5; })); },
              {"variant_attention: sigmoid_bias is for sigmoid weights; these are softmax"});
  check_error([&] { variant_attention(q, k, v, fused([&](auto& o) { o.mask = causal; })); },
              {"variant_attention: impl fused takes a key-padding mask (B..., 1, T_k) broadcasting to (2, 4, 1, 6) "
               "(key_padding_mask), not the mask (3, 6) for the scores (2, 4, 3, 6): for a causal mask or a sliding "
               "window set causal = true and window instead; other masks: use AttentionImpl::composed"});
  check_error([&] { variant_attention(q, k, v, fused([&](auto& o) { o.mask = rows; })); },
              {"not the mask (2, 1, 3, 6) for the scores (2, 4, 3, 6)"});
  for (const auto impl : {AttentionImpl::composed, AttentionImpl::fused}) {
    VariantOptions<double> o;
    o.impl = impl;
    o.window = 2;
    check_error([&] { variant_attention(q, k, v, o); },
                {"variant_attention: window = 2 is a causal sliding window (query i sees the keys j with i' - window < j "
                 "<= i', i' = i + T_k - T_q): set causal = true too; a bidirectional window is not supported"});
  }
  VariantBlockOptions<double> o;
  o.alibi = true;
  o.attention.impl = AttentionImpl::fused;
  check_error([&] { variant_multi_head_attention(x, p, 2, 1, o); },
              {"variant_multi_head_attention: impl fused has no additive bias (ALiBi), got alibi = true: use AttentionImpl::composed"});
  o.alibi = false;
  o.attention.weights = AttentionWeights::sigmoid;
  check_error([&] { variant_multi_head_attention(x, p, 2, 1, o); },
              {"variant_multi_head_attention: impl fused has softmax weights only"});
  o.attention.weights = AttentionWeights::softmax;
  o.attention.mask = block_causal;
  check_error([&] { variant_multi_head_attention(x, p, 2, 1, o); },
              {"variant_multi_head_attention: impl fused takes a key-padding mask (B..., 1, T_k) broadcasting to (2, 2, 1, 3)",
               "not the mask (3, 3) for the scores (2, 2, 3, 3)"});
  BOOST_TEST(g.size() == nodes);
}

BOOST_AUTO_TEST_SUITE_END()
