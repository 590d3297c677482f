// The fused attention (flash_attention, flash_attention_vjp) against the composed graph, the
// documented example, finite differences, export and replay, and its errors.
#include "flash_reference.hpp"

namespace {

// out and the gradients of sum(r * out) of both implementations, in one graph each.
template <class T>
void check_agreement(const FlashCase& c, std::uint64_t seed, double tol) {
  const Shape qs = with(c.batch, c.t_q, c.d_k), ks = with(c.batch, c.t_k, c.d_k), vs = with(c.batch, c.t_k, c.d_v);
  const xt::xarray<T> qv = random_array<T>(qs, seed, c.stddev), kv = random_array<T>(ks, seed + 1, c.stddev),
                      vv = random_array<T>(vs, seed + 2), r = random_array<T>(with(c.batch, c.t_q, c.d_v), seed + 3);
  std::vector<xt::xarray<T>> results[2];
  for (const AttentionImpl impl : {AttentionImpl::composed, AttentionImpl::fused}) {
    Graph<T> g;
    const auto q = g.input("q", qv), k = g.input("k", kv), v = g.input("v", vv);
    const auto out = attention(q, k, v, impl);
    auto& res = results[impl == AttentionImpl::fused];
    res.push_back(out.value());
    for (const auto& gr : grad(out, {q, k, v}, r)) res.push_back(gr.value());
  }
  const char* names[] = {"out", "grad_q", "grad_k", "grad_v"};
  for (std::size_t i = 0; i < 4; ++i) {
    const double e = relative_error(results[1][i], results[0][i]);
    BOOST_TEST(e <= tol, str(c) << ": " << names[i] << " differs by " << e << " (relative), more than " << tol);
  }
}

const FlashCase cases[] = {
    {{}, 2, 2, 1, 2, false, 0, 0, {}, false, 1},         // the documented example's shapes
    {{}, 1, 1, 1, 1, false, 0, 0, {}, false, 1},         // size-1 axes everywhere
    {{}, 5, 9, 3, 7, false, 0, 0, {}, false, 1},         // T_q != T_k, d_k != d_v
    {{}, 9, 5, 7, 3, false, 0, 0, {}, false, 3},         // T_q > T_k, saturated rows
    {{3}, 4, 6, 8, 2, false, 0, 0, {}, false, 1},        // a batch axis
    {{2, 1, 3}, 3, 1, 2, 5, false, 0, 0, {}, false, 1},  // three batch axes, one of size 1, T_k = 1
    {{1}, 300, 700, 16, 24, false, 0, 0, {}, false, 1},  // several query and key tiles, partial last tiles
    {{2}, 513, 257, 9, 1, false, 0, 0, {}, false, 2},    // a query tile boundary + 1, d_v = 1
};

// Masked cases (window and soft-cap: flash_attention_variants_test.cpp).
const std::vector<FlashCase> masked_cases = {
    {{}, 7, 7, 3, 2, true, 0, 0, {}, false},                   // causal, T_q = T_k
    {{2}, 5, 9, 4, 3, true, 0, 0, {}, false},                  // causal, T_q < T_k
    {{2}, 9, 5, 4, 3, true, 0, 0, {}, false},                  // causal, T_q > T_k: the first 4 rows see no key
    {{3}, 4, 6, 5, 2, false, 0, 0, {3, 1, 6}, true},           // key mask (B, 1, T_k), one empty sequence
    {{3, 2}, 5, 7, 3, 4, false, 0, 0, {3, 1, 1, 7}, true},     // (B, 1, 1, T_k) over heads
    {{2, 2}, 6, 6, 2, 2, false, 0, 0, {2, 1, 6}, false},       // (H, 1, T_k) against (B, H, ...): the first axis 1
    {{2}, 6, 8, 3, 3, true, 0, 0, {1, 8}, false},              // both, the key mask (1, T_k) for every batch index
    {{3}, 8, 5, 3, 3, true, 0, 0, {3, 1, 5}, true},            // both, T_q > T_k
    {{1}, 600, 1100, 8, 5, true, 0, 0, {}, false},             // causal over 3 query and 3 key tiles, T_q < T_k
    {{2}, 700, 530, 6, 4, true, 0, 0, {2, 1, 530}, true},      // both over tiles, T_q > T_k: 170 rows see no key
    {{3}, 300, 1300, 5, 3, false, 0, 0, {3, 1, 1300}, false},  // padding that skips key tiles (row 1: 651 keys)
};

}  // namespace

BOOST_AUTO_TEST_SUITE(flash_attention)

BOOST_AUTO_TEST_CASE(documented_example_hand_values) {
  const DocumentedExample e = documented_example();
  Graph<double> g;
  const auto q = g.input("q", e.q);
  const auto k = g.input("k", e.k);
  const auto v = g.input("v", e.v);
  const auto [flash_out, lse] = xgrad::flash_attention(q, k, v, 1.0);
  // Scores [[ln 2, 0], [0, 0]]: weights [[2/3, 1/3], [1/2, 1/2]], lse [ln 3, ln 2].
  check_ulps(flash_out.value(), matrix<double>({{2, 2}, {1.5, 3}}), 4);
  check_ulps(lse.value(), xt::xarray<double>{std::log(3.0), std::log(2.0)}, 4);
  BOOST_TEST(flash_out.id() == lse.id());  // one node, two outputs
  BOOST_TEST(lse.output() == 1u);
  const auto out = attention(q, k, v, AttentionImpl::fused);
  check_ulps(out.value(), e.output.value, 4);
  const auto grads = grad(out, {q, k, v});
  check_ulps(grads[0].value(), e.grad_q.value, 4);
  check_ulps(grads[1].value(), e.grad_k.value, 4);
  check_ulps(grads[2].value(), e.grad_v.value, 4);
}

BOOST_AUTO_TEST_CASE(the_logsumexp_output_and_its_gradient) {
  // d lse_i / d s_ij = w_ij. The gradients of lse alone, of out alone (the other output gets
  // none: zeros stand in), and of both at once.
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {3, 4}, {5, 4}, {5, 2}, 1);
  const auto f = xgrad::flash_attention(q, k, v, 0.5);
  const auto scores = matmul(scale(q, 0.5), k, false, true);
  for (std::size_t i = 0; i < 3; ++i) {
    double sum = 0;
    for (std::size_t j = 0; j < 5; ++j) sum += std::exp(scores.value()(i, j));
    BOOST_TEST(f.lse.value()(i) == std::log(sum), boost::test_tools::tolerance(1e-14));
  }
  check_gradients(f.lse, {q, k, v});
  check_gradients(f.out, {q, k, v});
  check_gradients(add(sum(f.out, {-1}), f.lse), {q, k, v});
}

BOOST_AUTO_TEST_CASE(agrees_with_the_composed_graph_in_float64) {
  std::uint64_t seed = 10;
  for (const FlashCase& c : cases) {
    check_agreement<double>(c, seed += 10, 1e-12);
  }
}

// In float32, q and k are standard normal: in saturated rows the gradients are small differences
// of large terms (dP - D), and both implementations lose digits there (up to ~1e-3 relative in
// grad_q against float64 at stddev 2.5, the fused one 2-7x more, as it takes D from the rounded
// output as FlashAttention-2 does). float64 checks the saturated rows.
BOOST_AUTO_TEST_CASE(agrees_with_the_composed_graph_in_float32) {
  std::uint64_t seed = 20;
  for (FlashCase c : cases) {
    c.stddev = 1;
    check_agreement<float>(c, seed += 10, 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(agrees_on_random_shapes) {
  RandomCases r(7);
  for (int i = 0; i < 40; ++i) {
    FlashCase c{r.batch(), r.pick(1, 40), r.pick(1, 40), r.pick(1, 9), r.pick(1, 9)};
    c.stddev = r.pick(0, 1) ? 1.0 : 2.5;
    check_agreement<double>(c, 100 + static_cast<std::uint64_t>(i), 1e-12);
    check_agreement<float>(FlashCase{c.batch, c.t_q, c.t_k, c.d_k, c.d_v}, 200 + static_cast<std::uint64_t>(i), 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_in_float64) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3, 4}, {2, 6, 4}, {2, 6, 5}, 5);
  check_gradients(attention(q, k, v, AttentionImpl::fused), {q, k, v});
  check_gradients(attention(q, k, v, 0.25, AttentionImpl::fused), {q, k, v});
}

BOOST_AUTO_TEST_CASE(gradcheck_in_float32_over_tiles) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({260, 3}, 8));
  const auto k = g.input("k", random_array<float>({530, 3}, 9));
  const auto v = g.input("v", random_array<float>({530, 2}, 10));
  check_gradients(attention(q, k, v, AttentionImpl::fused), {q, k, v});
}

BOOST_AUTO_TEST_CASE(second_order_is_the_composed_graphs) {
  // A gradient penalty: y = sum(r * grad_q), where grad_q is the gradient of sum(s * out).
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {3, 2}, {4, 2}, {4, 3}, 11);
  const auto s = g.input("s", random_array<double>({3, 3}, 14));
  const auto out = attention(q, k, v, AttentionImpl::fused);
  const auto first = grad(out, {q, k, v}, s);
  for (std::size_t i = 0; i < 3; ++i) check_gradients(first[i], {q, k, v, s});

  Graph<double> h;  // the same with the composed graph: equal second-order gradients
  const auto q2 = h.input("q", q.value()), k2 = h.input("k", k.value()), v2 = h.input("v", v.value());
  const auto s2 = h.input("s", s.value());
  const auto first2 = grad(attention(q2, k2, v2), {q2, k2, v2}, s2);
  const xt::xarray<double> r = random_array<double>({3, 2}, 15);
  const auto second = grad(first[0], {q, k, v, s}, r);
  const auto second2 = grad(first2[0], {q2, k2, v2, s2}, r);
  for (std::size_t i = 0; i < 4; ++i) BOOST_TEST(relative_error(second[i].value(), second2[i].value()) <= 1e-12);
}

BOOST_AUTO_TEST_CASE(second_order_with_inputs_that_are_one_another) {
  // k = q, and grad_out = out, grad_lse = lse: computed from q, k, v themselves.
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({3, 2}, 40));
  const auto v = g.input("v", random_array<double>({3, 2}, 41));
  const auto f = xgrad::flash_attention(q, q, v, 0.8);
  const auto own = xgrad::flash_attention_vjp(q, q, v, f.out, f.lse, f.out, f.lse, 0.8);
  for (const auto& grad : {own.grad_q, own.grad_k, own.grad_v}) check_gradients(grad, {q, v});
  const auto g2 = g.input("g2", random_array<double>({3, 2}, 42));
  const auto l2 = g.input("l2", random_array<double>({3}, 43));
  const auto given = xgrad::flash_attention_vjp(q, q, v, f.out, f.lse, g2, l2, 0.8);
  check_gradients(add(given.grad_q, scale(given.grad_v, 0.5)), {q, v, g2, l2});
}

BOOST_AUTO_TEST_CASE(second_order_needs_out_and_lse_of_the_same_inputs) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({2, 2}, 43));
  const auto k = g.input("k", random_array<double>({3, 2}, 44));
  const auto v = g.input("v", random_array<double>({3, 2}, 45));
  const auto other = g.input("other", random_array<double>({2, 2}, 46));
  const auto other_lse = g.input("other_lse", random_array<double>({2}, 47));
  const auto y = xgrad::flash_attention_vjp(q, k, v, other, other_lse, other, other_lse, 1.0);
  check_error([&] { grad(y.grad_q, {q}); }, {"flash_attention_vjp (node 5): its second-order rule needs out and "
                                             "lse to be the outputs of flash_attention of the same q, k, v, scale, mask "
                                             "and soft-cap; out is node 3 (input)"});
  const auto at_another_scale = xgrad::flash_attention(q, k, v, 0.5);
  const auto& [out, lse] = at_another_scale;
  check_error([&] { grad(xgrad::flash_attention_vjp(q, k, v, out, lse, out, lse, 1.0).grad_k, {q}); },
              {"out is node " + std::to_string(out.id()) + " (flash_attention)"});
}

BOOST_AUTO_TEST_CASE(empty_axes) {
  // T_q = 0, d_v = 0, a batch axis of 0: empty outputs and gradients, nothing read out of bounds.
  for (const FlashCase& c : {FlashCase{{}, 0, 3, 2, 2}, FlashCase{{}, 2, 3, 2, 0}, FlashCase{{0}, 2, 3, 2, 2}}) {
    BOOST_TEST_CONTEXT(str(c)) {
      Graph<double> g;
      const auto q = g.input("q", random_array<double>(with(c.batch, c.t_q, c.d_k), 50));
      const auto k = g.input("k", random_array<double>(with(c.batch, c.t_k, c.d_k), 51));
      const auto v = g.input("v", random_array<double>(with(c.batch, c.t_k, c.d_v), 52));
      const auto composed = attention(q, k, v);
      const auto fused = attention(q, k, v, AttentionImpl::fused);
      BOOST_TEST(fused.value() == composed.value());
      const auto a = grad(composed, {q, k, v});
      const auto b = grad(fused, {q, k, v});
      for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(b[i].value() == a[i].value());
    }
  }
  // d_k = 0 (with a given scale): every weight 1 / T_k, gradients w.r.t. v only.
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 0}));
  const auto k = g.input("k", xt::zeros<double>({4, 0}));
  const auto v = g.input("v", random_array<double>({4, 3}, 53));
  const auto out = xgrad::flash_attention(q, k, v, 1.0).out;
  const auto grads = grad(out, {q, k, v});
  BOOST_TEST(grads[0].value().size() == 0u);
  check_ulps(grads[2].value(), xt::xarray<double>(xt::ones<double>({4, 3}) * 0.5), 4);
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({2, 3, 4}, 16));
  const auto k = g.input("k", random_array<float>({2, 5, 4}, 17));
  const auto v = g.input("v", random_array<float>({2, 5, 3}, 18));
  const auto out = attention(q, k, v, AttentionImpl::fused);
  g.set_output("out", out);
  const auto grads = grad(out, {q, k, v});
  g.set_grad("q", grads[0]);
  g.set_grad("k", grads[1]);
  g.set_grad("v", grads[2]);
  const std::string text = check_json_replays(g, q, {random_array<float>({2, 3, 4}, 19)});
  BOOST_TEST(text.find("\"op\":\"flash_attention\"") != std::string::npos);
  BOOST_TEST(text.find("\"op\":\"flash_attention_vjp\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(two_threads_split_the_tiles) {
  // Forward, threads split (batch index, query tile) items; backward, by batch index or key tile.
  check_tiles_split_by_threads(300, 1100, [](const auto& q, const auto& k, const auto& v) {
    return attention(q, k, v, AttentionImpl::fused);
  });
}

BOOST_AUTO_TEST_CASE(an_import_counts_the_weights_it_would_compute) {
  // The fused op holds no 64 x 64 weights, but an import charges their work (Op::work): each
  // weight written and read (2 visits) and its 1 + 1 multiply-adds (1/4 visit), beside the
  // 3 x 64 + 128 elements of q, k, v and the outputs out and lse.
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {64, 1}, {64, 1}, {64, 1}, 60);
  const auto f = xgrad::flash_attention(q, k, v, 1.0);
  const auto grads = xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0);
  std::vector<Shape> in(3, Shape{64, 1});
  const std::vector<Shape> out{{64, 1}, {64}};
  BOOST_TEST(f.out.node().op->work(in, out) == 3 * 64 + 128 + 4096 * 2.25);
  const std::string text = to_json(g, ExportValues::inputs).dump();
  check_error([&] { graph_from_json<double>(text, max_array_elements, 9000); },
              {"graph JSON: nodes[3]: computing the graph takes more than 9000 element visits"});
  // The VJP: 4 visits a weight and 3 + 2 multiply-adds.
  in.insert(in.end(), {{64, 1}, {64}, {64, 1}, {64}});
  BOOST_TEST(grads.grad_q.node().op->work(in, {{64, 1}, {64, 1}, {64, 1}}) == 3 * 64 + 2 * 128 + 192 + 4096 * (4 + 5 / 8.0));
  BOOST_TEST(graph_from_json<double>(text)->size() == g.size());
}

BOOST_AUTO_TEST_CASE(rows_of_minus_infinity_and_nan) {
  // A query of -inf against keys of +1: every score -inf; the composed softmax gives weights 0.
  const double inf = std::numeric_limits<double>::infinity();
  Graph<double> g;
  const auto q = g.input("q", {{-inf}, {1.0}, {std::nan("")}});
  const auto k = g.input("k", {{1.0}, {2.0}});
  const auto v = g.input("v", {{3.0, 0.0}, {0.0, 6.0}});
  const auto [out, lse] = xgrad::flash_attention(q, k, v, 1.0);
  const auto fused = out.value();
  const auto composed = attention(q, k, v, 1.0).value();
  BOOST_TEST(fused(0, 0) == 0.0);
  BOOST_TEST(fused(0, 1) == 0.0);
  BOOST_TEST(lse.value()(0) == -inf);
  BOOST_TEST(composed(0, 0) == 0.0);
  BOOST_TEST(fused(1, 0) == composed(1, 0), boost::test_tools::tolerance(1e-15));
  BOOST_TEST(std::isnan(fused(2, 0)));
  BOOST_TEST(std::isnan(composed(2, 0)));
  // Backward: the row of -inf scores passes no gradient to q or v, in both.
  Graph<double> h;
  const auto q2 = h.input("q", {{-inf}, {1.0}});
  const auto k2 = h.input("k", {{1.0}, {2.0}});
  const auto v2 = h.input("v", {{3.0, 0.0}, {0.0, 6.0}});
  const auto f = grad(attention(q2, k2, v2, 1.0, AttentionImpl::fused), {q2, v2});
  const auto c = grad(attention(q2, k2, v2, 1.0), {q2, v2});
  BOOST_TEST(f[0].value()(0, 0) == 0.0);
  BOOST_TEST(c[0].value()(0, 0) == 0.0);
  BOOST_TEST(f[0].value()(1, 0) == c[0].value()(1, 0), boost::test_tools::tolerance(1e-14));
  BOOST_TEST(relative_error(f[1].value(), c[1].value()) <= 1e-15);
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes_and_scales) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 3, 4}));
  const auto k = g.input("k", xt::zeros<double>({2, 5, 4}));
  const auto v = g.input("v", xt::zeros<double>({2, 5, 3}));
  const auto k3 = g.input("k3", xt::zeros<double>({2, 5, 3}));
  const auto v4 = g.input("v4", xt::zeros<double>({2, 4, 3}));
  const auto vb = g.input("vb", xt::zeros<double>({3, 5, 3}));
  const auto v1 = g.input("v1", xt::zeros<double>({5}));
  const auto k0 = g.input("k0", xt::zeros<double>({2, 0, 4}));
  const auto v0 = g.input("v0", xt::zeros<double>({2, 0, 3}));
  check_error([&] { xgrad::flash_attention(q, k3, v, 1.0); },
              {"flash_attention (node", "d_k differs: q has d_k = 4, k has d_k = 3", "q is (2, 3, 4), k is (2, 5, 3)"});
  check_error([&] { xgrad::flash_attention(q, k, v4, 1.0); }, {"T_k differs: k has T_k = 5, v has T_k = 4"});
  check_error([&] { xgrad::flash_attention(q, k, vb, 1.0); }, {"batch axes differ", "v is (3, 5, 3)"});
  check_error([&] { xgrad::flash_attention(q, k, v1, 1.0); }, {"rank >= 2", "v is (5,)"});
  check_error([&] { xgrad::flash_attention(q, k0, v0, 1.0); }, {"T_k = 0", "k is (2, 0, 4)"});
  check_error([&] { xgrad::flash_attention(q, k, v, std::nan("")); }, {"flash_attention (node", "the scale must be finite, got nan"});
  // Through attention(): the composed graph's checks and messages.
  check_error([&] { attention(q, k3, v, AttentionImpl::fused); }, {"attention: d_k differs"});
  check_error([&] { attention(q, k, v, std::numeric_limits<double>::infinity(), AttentionImpl::fused); }, {"attention: the scale must be finite, got inf"});
  const auto f = xgrad::flash_attention(q, k, v, 1.0);
  check_error([&] { xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, k, f.lse, 1.0); },
              {"flash_attention_vjp (node", "grad_out (2, 5, 4)", "out and grad_out must be (2, 3, 3) (B..., T_q, d_v)",
               "lse and grad_lse (2, 3) (B..., T_q)"});
  const std::size_t before = g.size();
  check_error([&] { attention(q, k0, v0, AttentionImpl::fused); }, {"attention: T_k = 0"});
  BOOST_TEST(g.size() == before);  // nothing added by a failed call
}

BOOST_AUTO_TEST_CASE(d_k_zero_with_an_explicit_scale_is_a_uniform_average) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 0}));
  const auto k = g.input("k", xt::zeros<double>({3, 0}));
  const auto v = g.input("v", {{3.0}, {6.0}, {9.0}});
  const auto [out, lse] = xgrad::flash_attention(q, k, v, 1.0);
  check_ulps(out.value(), matrix<double>({{6}, {6}}), 4);
  check_ulps(lse.value(), xt::xarray<double>{std::log(3.0), std::log(3.0)}, 4);
}

// Masks (issue 36): the fused node against softmax(apply_mask(scores, mask, -inf)) v.

BOOST_AUTO_TEST_CASE(masked_agrees_with_the_composed_graph_in_float64) {
  check_flash_agreement<double>(masked_cases, 300, 1e-12, "masked");
  std::vector<FlashCase> saturated;  // the smaller cases, q and k at stddev 3
  for (FlashCase c : masked_cases) {
    c.stddev = 3;
    if (c.t_q * c.t_k < 1000) saturated.push_back(c);
  }
  check_flash_agreement<double>(saturated, 300 + 10 * masked_cases.size(), 1e-12, "masked, saturated");
}

BOOST_AUTO_TEST_CASE(masked_agrees_with_the_composed_graph_in_float32) {
  check_flash_agreement<float>(masked_cases, 400, 1e-5, "masked");
}

BOOST_AUTO_TEST_CASE(masked_agrees_on_random_shapes) {
  RandomCases r(17);
  for (int i = 0; i < 40; ++i) {
    FlashCase c{r.batch(), r.pick(1, 20), r.pick(1, 20), r.pick(1, 6), r.pick(1, 6), r.pick(0, 1) == 1};
    if (r.pick(0, 2) != 0) {  // a key mask of the batch axes or some of the last of them
      c.key_shape = r.key_shape(Shape(c.batch.begin() + static_cast<long>(r.pick(0, c.batch.size())), c.batch.end()), c.t_k);
      c.empty_row = r.pick(0, 3) == 0;
    }
    check_flash_agreement<double>(c, 500 + static_cast<std::uint64_t>(i), 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(masked_gradcheck_in_float64) {
  // The causal mask and a key mask with holes; then T_q > T_k, whose first rows see no key (lse
  // -inf there: finite differences only of out).
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 4, 3}, {2, 4, 3}, {2, 4, 2}, 70);
  const auto key_mask = g.mask("key_mask", xt::xarray<bool>{{{true, false, true, true}}, {{true, true, false, true}}});
  for (const bool causal : {false, true}) {
    const auto f = xgrad::flash_attention(q, k, v, 0.6, FlashMask<double>{causal, key_mask});
    check_gradients(f.out, {q, k, v});
    check_gradients(f.lse, {q, k, v});
  }
  const auto q6 = g.input("q6", random_array<double>({2, 6, 3}, 73));
  const auto f = xgrad::flash_attention(q6, k, v, 0.6, FlashMask<double>{true, key_mask});
  BOOST_TEST(f.lse.value()(0, 0) == -std::numeric_limits<double>::infinity());
  check_gradients(f.out, {q6, k, v});
}

BOOST_AUTO_TEST_CASE(rows_of_no_allowed_key_pass_exact_zeros) {
  // Sequence 0 has every key masked, and with the causal mask the first rows of T_q > T_k see
  // none: out 0, lse -inf, and every gradient through those rows exactly 0 (k and v get the
  // whole gradient from the other rows only, so of sequence 0 exactly 0).
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 5, 3}, {2, 3, 3}, {2, 3, 2}, 80);
  const auto key_mask = g.mask("key_mask", xt::xarray<bool>{{{false, false, false}}, {{true, true, true}}});
  const auto f = xgrad::flash_attention(q, k, v, 1.0, FlashMask<double>{true, key_mask});
  const double inf = std::numeric_limits<double>::infinity();
  const auto grads = grads_of<double>({f.out, f.lse}, {q, k, v},
                                     {g.constant("r", random_array<double>({2, 5, 2}, 83)), g.constant("h", random_array<double>({2, 5}, 84))});
  for (std::size_t i = 0; i < 5; ++i) {
    const bool none = i < 2;  // row i sees keys j <= i - 2 in sequence 1, none in sequence 0
    BOOST_TEST(f.lse.value()(0, i) == -inf);
    BOOST_TEST((f.lse.value()(1, i) == -inf) == none);
    for (std::size_t c = 0; c < 2; ++c) BOOST_TEST(f.out.value()(0, i, c) == 0.0);
    for (std::size_t c = 0; c < 3; ++c) {
      BOOST_TEST(grads[0].value()(0, i, c) == 0.0);
      if (none) BOOST_TEST(grads[0].value()(1, i, c) == 0.0);
    }
  }
  BOOST_TEST(xt::all(xt::equal(xt::view(grads[1].value(), 0), 0.0)));
  BOOST_TEST(xt::all(xt::equal(xt::view(grads[2].value(), 0), 0.0)));
  for (const auto& gr : grads) BOOST_TEST(!xt::any(xt::isnan(gr.value())));
}

BOOST_AUTO_TEST_CASE(skipped_tiles_are_not_read) {
  // NaN in v where whole key tiles are masked: the fused node never reads them, so the rows that
  // only see earlier tiles stay finite, forward and backward (the composed graph's 0 * NaN would
  // be NaN). Causal, T = 1100: query rows below 512 see key tile 0 only.
  const std::size_t t = 1100;
  xt::xarray<double> vv = random_array<double>({t, 2}, 90);
  for (std::size_t j = 512; j < t; ++j) vv(j, 0) = std::nan("");
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({t, 3}, 91));
  const auto k = g.input("k", random_array<double>({t, 3}, 92));
  const auto v = g.input("v", vv);
  const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}});
  const auto grads = grad(f.out, {q, k, v});
  BOOST_TEST(!xt::any(xt::isnan(xt::view(f.out.value(), xt::range(0, 512)))));
  BOOST_TEST(xt::any(xt::isnan(xt::view(f.out.value(), xt::range(512, t)))));
  BOOST_TEST(!xt::any(xt::isnan(xt::view(grads[0].value(), xt::range(0, 512)))));
  // A padding mask of 100 keys: no row reads key tiles 1 and 2.
  Graph<double> h;
  const auto q2 = h.input("q", random_array<double>({2, 40, 3}, 93));
  const auto k2 = h.input("k", random_array<double>({2, t, 3}, 94));
  xt::xarray<double> v2 = random_array<double>({2, t, 2}, 95);
  for (std::size_t j = 512; j < t; ++j) v2(1, j, 1) = std::nan("");
  xt::xarray<bool> pad = xt::zeros<bool>(Shape{2, 1, t});
  for (std::size_t j = 0; j < 100; ++j) pad(0, 0, j) = pad(1, 0, j) = true;
  const auto vv2 = h.input("v", v2);
  const auto masked = xgrad::flash_attention(q2, k2, vv2, 0.5, FlashMask<double>{false, h.mask("pad", pad)});
  BOOST_TEST(!xt::any(xt::isnan(masked.out.value())));
  for (const auto& gr : grad(masked.out, {q2, k2, vv2})) BOOST_TEST(!xt::any(xt::isnan(gr.value())));
}

BOOST_AUTO_TEST_CASE(masked_second_order_is_the_composed_graphs) {
  // Causal, T_q > T_k (a row of no key) and a key mask with an empty sequence.
  check_flash_second_order(FlashCase{{2}, 5, 4, 2, 3, true, 0, 0, {2, 1, 4}, true});
}

BOOST_AUTO_TEST_CASE(masked_second_order_through_grad_lse) {
  // The VJP node's own gradients, w.r.t. grad_out and grad_lse too, by finite differences; the
  // key mask is a node of 1 and 0 here (not a leaf), which gets zeros.
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3, 2}, {2, 4, 2}, {2, 4, 2}, 110);
  const auto go = g.input("go", random_array<double>({2, 3, 2}, 113));
  const auto gl = g.input("gl", random_array<double>({2, 3}, 114));
  const auto key_mask = g.input("key_mask", xt::xarray<double>{{{1, 0, 1, 1}}, {{0, 1, 1, 0}}});
  const FlashMask<double> mask{true, key_mask};
  const auto f = xgrad::flash_attention(q, k, v, 0.9, mask);
  const auto own = xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, go, gl, 0.9, mask);
  for (const auto& y : {own.grad_q, own.grad_k, own.grad_v}) check_gradients(y, {q, k, v, go, gl});
  const auto through_mask = grad(own.grad_q, {key_mask, q});
  BOOST_TEST(xt::all(xt::equal(through_mask[0].value(), 0.0)));
  BOOST_TEST(xt::all(xt::equal(grad(f.out, {key_mask})[0].value(), 0.0)));
}

BOOST_AUTO_TEST_CASE(replays_a_new_key_mask) {
  // A mask leaf replaced per batch: the replayed graph (out and gradients) is a fresh build's.
  const xt::xarray<double> qv = random_array<double>({2, 2, 6, 3}, 120), kv = random_array<double>({2, 2, 9, 3}, 121),
                           vv = random_array<double>({2, 2, 9, 4}, 122);
  xt::xarray<bool> first = xt::ones<bool>({2, 1, 1, 9}), second = xt::ones<bool>({2, 1, 1, 9});
  for (std::size_t j = 4; j < 9; ++j) first(1, 0, 0, j) = false;
  for (std::size_t j = 0; j < 9; ++j) second(0, 0, 0, j) = j % 3 == 0;
  const auto build = [&](Graph<double>& g, const xt::xarray<bool>& pad) {
    const auto q = g.input("q", qv), k = g.input("k", kv), v = g.input("v", vv);
    const auto key_mask = g.mask("pad", pad);
    const auto out = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, key_mask}).out;
    std::vector<Var<double>> all = {out};
    for (const auto& gr : grad(out, {q, k, v})) all.push_back(gr);
    return std::make_pair(key_mask, all);
  };
  Graph<double> g, fresh;
  const auto [pad, vars] = build(g, first);
  const auto before = vars[0].value();
  g.set_value(pad, second);
  g.replay();
  const auto [unused, expected] = build(fresh, second);
  for (std::size_t i = 0; i < vars.size(); ++i) BOOST_TEST(vars[i].value() == expected[i].value(), "value " << i);
  BOOST_TEST(!(before == vars[0].value()));
}

BOOST_AUTO_TEST_CASE(mask_attrs_round_trip) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3, 2}, {2, 4, 2}, {2, 4, 2}, 130);
  const auto pad = g.mask("pad", xt::xarray<bool>{{{true, true, false, true}}, {{false, true, true, true}}});
  const auto both = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, pad});
  const auto causal = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}});
  const auto keys = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{false, pad});
  const auto plain = xgrad::flash_attention(q, k, v, 0.5);
  check_attrs_round_trip(both.out, "flash_attention", R"({"scale":0.5,"causal":true,"key_mask":true})");
  check_attrs_round_trip(causal.out, "flash_attention", R"({"scale":0.5,"causal":true})");
  check_attrs_round_trip(keys.out, "flash_attention", R"({"scale":0.5,"key_mask":true})");
  check_attrs_round_trip(plain.out, "flash_attention", R"({"scale":0.5})");
  const auto vjp = xgrad::flash_attention_vjp(q, k, v, both.out, both.lse, both.out, both.lse, 0.5, FlashMask<double>{true, pad});
  check_attrs_round_trip(vjp.grad_q, "flash_attention_vjp", R"({"scale":0.5,"causal":true,"key_mask":true})");
  BOOST_TEST(both.out.node().op->arity() == 4u);
  BOOST_TEST(vjp.grad_q.node().op->arity() == 8u);
  // Old files (attrs {"scale"} alone) read as unmasked, "false" as absent; other keys or values are refused.
  BOOST_TEST(make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}}, "attrs"))->arity() == 3u);
  BOOST_TEST(make_op("flash_attention_vjp", JsonCursor(Json{{"scale", 1.0}}, "attrs"))->arity() == 7u);
  const auto off = make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}, {"causal", false}, {"key_mask", false}}, "attrs"));
  BOOST_TEST(off->attrs().dump() == R"({"scale":1.0})");
  check_error([] { make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}, {"causal", 1}}, "attrs")); }, {"attrs.causal"});
  check_error([] { make_op("flash_attention_vjp", JsonCursor(Json{{"scale", 1.0}, {"mask", true}}, "attrs")); }, {"mask"});
  // A file whose flash_attention says key_mask but gives three inputs.
  Json exported = to_json(g, ExportValues::all);
  exported["nodes"][keys.out.id()]["attrs"].erase("key_mask");
  check_error([&] { graph_from_json<double>(exported.dump()); }, {"flash_attention", "takes 3 inputs, got 4"});
}

BOOST_AUTO_TEST_CASE(masked_exports_imports_and_replays) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({2, 3, 4}, 140));
  const auto k = g.input("k", random_array<float>({2, 5, 4}, 141));
  const auto v = g.input("v", random_array<float>({2, 5, 3}, 142));
  const auto pad = g.mask("pad", xt::xarray<bool>{{{true, true, true, false, false}}, {{true, false, true, true, true}}});
  const auto out = xgrad::flash_attention(q, k, v, 0.5f, FlashMask<float>{true, pad}).out;
  g.set_output("out", out);
  const auto grads = grad(out, {q, k, v});
  for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
  xt::xarray<bool> next = xt::ones<bool>({2, 1, 5});
  next(0, 0, 0) = false;
  const std::string text = check_json_replays(g, pad, {next});
  BOOST_TEST(text.find(R"("attrs":{"scale":0.5,"causal":true,"key_mask":true})") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(work_counts_the_tiles_computed) {
  // Causal, T_q = T_k = 1024: query tile i0 computes keys [0, i0 + 256), 256 x (256 + 512 + 768
  // + 1024) = 655360 weights of 2^20, and writes -inf over the 130560 forbidden ones among them
  // (256 x 255 / 2 per tile); a key mask costs one visit a weight more. d_k = d_v = 1.
  const std::vector<Shape> x = {{1024, 1}, {1024, 1}, {1024, 1}}, y = {{1024, 1}, {1024}};
  const double io = 3 * 1024 + 2 * 1024;
  const auto op = [](const char* name, Json attrs) { return make_op(name, JsonCursor(attrs, "attrs")); };
  const double computed = 256.0 * (256 + 512 + 768 + 1024), filled = 4 * 256.0 * 255 / 2;
  BOOST_TEST(op("flash_attention", {{"scale", 1.0}})->work(x, y) == io + 1024.0 * 1024 * 2.25);
  BOOST_TEST(op("flash_attention", {{"scale", 1.0}, {"causal", true}})->work(x, y) == io + computed * 2.25 + filled);
  std::vector<Shape> xm = x;
  xm.push_back({1, 1024});
  BOOST_TEST(op("flash_attention", {{"scale", 1.0}, {"causal", true}, {"key_mask", true}})->work(xm, y) ==
             io + 1024 + computed * 3.25 + filled);
  // T_q = 300 > T_k = 100, causal: rows i < 200 see no key. Tile 0 (256 rows) computes keys
  // [0, 56), tile 1 (44 rows) all 100; allowed: sum over i of clamp(i - 199, 0, 100).
  const std::vector<Shape> x2 = {{300, 1}, {100, 1}, {100, 1}}, y2 = {{300, 1}, {300}};
  const double computed2 = 256.0 * 56 + 44.0 * 100, allowed2 = 56.0 * 57 / 2 + (57 + 100) * 44.0 / 2;
  BOOST_TEST(op("flash_attention", {{"scale", 1.0}, {"causal", true}})->work(x2, y2) ==
             300 + 100 + 100 + 300 + 300 + computed2 * 2.25 + (computed2 - allowed2));
  std::vector<Shape> xv = {{1024, 1}, {1024, 1}, {1024, 1}, {1024, 1}, {1024}, {1024, 1}, {1024}};
  BOOST_TEST(op("flash_attention_vjp", {{"scale", 1.0}, {"causal", true}})->work(xv, {{1024, 1}, {1024, 1}, {1024, 1}}) ==
             7 * 1024 + 3 * 1024 + computed * (4 + 5 / 8.0) + filled);
}

BOOST_AUTO_TEST_CASE(masked_onnx_round_trip) {
  // to_onnx and back (import_onnx): the masks as Where on the scores, the causal one from two
  // int64 ranges; the key mask a mask leaf (its bool input the condition) or a constant node
  // of 1 and 0 (Cast to bool). Sequence 1 allows no key: lse -inf there.
  const xt::xarray<bool> pad{{{true, true, false, true}}, {{false, false, false, false}}};
  for (const bool leaf : {true, false}) {
    for (const bool causal : {false, true}) {
      BOOST_TEST_CONTEXT((leaf ? "a mask leaf" : "a constant mask") << (causal ? ", causal" : "")) {
        Graph<double> g;
        const auto [q, k, v] = random_qkv(g, {2, 6, 3}, {2, 4, 3}, {2, 4, 2}, 150);
        const auto key_mask = leaf ? g.mask("pad", pad) : g.constant("pad", xt::cast<double>(pad));
        const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{causal, key_mask});
        g.set_output("out", f.out);
        g.set_output("lse", f.lse);
        const auto grads = grad(f.out, {q, k, v});
        for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
        check_onnx_round_trip(g, {q, k, v}, leaf ? "pad" : "", pad);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_key_masks) {
  Graph<double> g, other;
  const auto q = g.input("q", xt::zeros<double>({2, 3, 4}));
  const auto k = g.input("k", xt::zeros<double>({2, 5, 4}));
  const auto v = g.input("v", xt::zeros<double>({2, 5, 3}));
  const auto fits = "fused attention supports (B..., 1, T_k): a key-padding mask broadcasting to (2, 1, 5) (each batch axis "
                    "1 or equal); other masks need the composed attention";
  for (const Shape& bad : {Shape{2, 3, 5}, Shape{5}, Shape{3, 1, 5}, Shape{2, 1, 4}, Shape{1, 2, 1, 5}}) {
    const auto mask = g.input("mask", xt::ones<double>(bad));
    check_error([&] { xgrad::flash_attention(q, k, v, 1.0, FlashMask<double>{false, mask}); },
                {"flash_attention (node", "the key mask " + shape_str(bad) + " does not fit q (2, 3, 4) and k (2, 5, 4)", fits});
  }
  const auto full = g.mask("full", xt::ones<bool>({2, 3, 5}));
  const auto f = xgrad::flash_attention(q, k, v, 1.0);
  check_error([&] { xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, FlashMask<double>{true, full}); },
              {"flash_attention_vjp (node", "the key mask (2, 3, 5) does not fit", fits});
  const auto elsewhere = other.mask("pad", xt::ones<bool>({2, 1, 5}));
  check_error([&] { xgrad::flash_attention(q, k, v, 1.0, FlashMask<double>{false, elsewhere}); },
              {"flash_attention: the key mask (node 0) belongs to another graph than q"});
  check_error([&] { xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, FlashMask<double>{false, elsewhere}); },
              {"flash_attention_vjp: the key mask (node 0) belongs to another graph than q"});
  // The second-order rule: out and lse of an attention with other masks.
  const auto pad = g.mask("pad", xt::ones<bool>({2, 1, 5}));
  const auto y = xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, FlashMask<double>{true, pad});
  check_error([&] { grad(y.grad_q, {q}); }, {"needs out and lse to be the outputs of flash_attention of the same q, k, v, "
                                             "scale, mask and soft-cap; out is node " + std::to_string(f.out.id()) + " (flash_attention)"});
}

BOOST_AUTO_TEST_SUITE_END()
