// The fused attention (flash_attention, flash_attention_vjp) against the composed graph, the
// documented example, finite differences, export and replay, and its errors.
#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

#include <xgrad/ops/kernels/parallel.hpp>

namespace {

struct Case {
  Shape batch;
  std::size_t t_q, t_k, d_k, d_v;
  double stddev;  // of q and k: 1 gives moderate scores, 3 saturated rows
};

Shape with(Shape batch, std::size_t rows, std::size_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}

std::string str(const Case& c) {
  return "batch " + shape_str(c.batch) + ", T_q " + std::to_string(c.t_q) + ", T_k " + std::to_string(c.t_k) + ", d_k " +
         std::to_string(c.d_k) + ", d_v " + std::to_string(c.d_v) + ", stddev " + std::to_string(c.stddev);
}

// max |a - b| / max |b|, or max |a - b| when b is all zero.
template <class T>
double relative_error(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  BOOST_TEST_REQUIRE(shapes_equal(a.shape(), b.shape()));
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a.data()[i]) - static_cast<double>(b.data()[i])));
    scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// out and the gradients of sum(r * out) of both implementations, in one graph each.
template <class T>
void check_agreement(const Case& c, std::uint64_t seed, double tol) {
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

const Case cases[] = {
    {{}, 2, 2, 1, 2, 1},          // the documented example's shapes
    {{}, 1, 1, 1, 1, 1},          // size-1 axes everywhere
    {{}, 5, 9, 3, 7, 1},          // T_q != T_k, d_k != d_v
    {{}, 9, 5, 7, 3, 3},          // T_q > T_k, saturated rows
    {{3}, 4, 6, 8, 2, 1},         // a batch axis
    {{2, 1, 3}, 3, 1, 2, 5, 1},   // three batch axes, one of size 1, T_k = 1
    {{1}, 300, 700, 16, 24, 1},   // several query and key tiles, partial last tiles
    {{2}, 513, 257, 9, 1, 2},     // a query tile boundary + 1, d_v = 1
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
  const auto q = g.input("q", random_array<double>({3, 4}, 1));
  const auto k = g.input("k", random_array<double>({5, 4}, 2));
  const auto v = g.input("v", random_array<double>({5, 2}, 3));
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
  for (const Case& c : cases) {
    check_agreement<double>(c, seed += 10, 1e-12);
  }
}

// In float32, q and k are standard normal: in saturated rows the gradients are small differences
// of large terms (dP - D), and both implementations lose digits there (up to ~1e-3 relative in
// grad_q against float64 at stddev 2.5, the fused one 2-7x more, as it takes D from the rounded
// output as FlashAttention-2 does). float64 checks the saturated rows.
BOOST_AUTO_TEST_CASE(agrees_with_the_composed_graph_in_float32) {
  std::uint64_t seed = 20;
  for (Case c : cases) {
    c.stddev = 1;
    check_agreement<float>(c, seed += 10, 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(agrees_on_random_shapes) {
  std::mt19937_64 rng(7);
  const auto pick = [&](std::size_t lo, std::size_t hi) { return std::uniform_int_distribution<std::size_t>(lo, hi)(rng); };
  for (int i = 0; i < 40; ++i) {
    Shape batch(pick(0, 2));
    for (auto& b : batch) b = pick(1, 3);
    const Case c{batch, pick(1, 40), pick(1, 40), pick(1, 9), pick(1, 9), pick(0, 1) ? 1.0 : 2.5};
    check_agreement<double>(c, 100 + static_cast<std::uint64_t>(i), 1e-12);
    check_agreement<float>(Case{c.batch, c.t_q, c.t_k, c.d_k, c.d_v, 1.0}, 200 + static_cast<std::uint64_t>(i), 1e-5);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_in_float64) {
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({2, 3, 4}, 5));
  const auto k = g.input("k", random_array<double>({2, 6, 4}, 6));
  const auto v = g.input("v", random_array<double>({2, 6, 5}, 7));
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
  const auto q = g.input("q", random_array<double>({3, 2}, 11));
  const auto k = g.input("k", random_array<double>({4, 2}, 12));
  const auto v = g.input("v", random_array<double>({4, 3}, 13));
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
                                             "lse to be the outputs of flash_attention of the same q, k, v and scale; "
                                             "out is node 3 (input)"});
  const auto at_another_scale = xgrad::flash_attention(q, k, v, 0.5);
  const auto& [out, lse] = at_another_scale;
  check_error([&] { grad(xgrad::flash_attention_vjp(q, k, v, out, lse, out, lse, 1.0).grad_k, {q}); },
              {"out is node " + std::to_string(out.id()) + " (flash_attention)"});
}

BOOST_AUTO_TEST_CASE(empty_axes) {
  // T_q = 0, d_v = 0, a batch axis of 0: empty outputs and gradients, nothing read out of bounds.
  for (const Case& c : {Case{{}, 0, 3, 2, 2, 1}, Case{{}, 2, 3, 2, 0, 1}, Case{{0}, 2, 3, 2, 2, 1}}) {
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
  const std::string text = to_json(g, ExportValues::all).dump();
  BOOST_TEST(text.find("\"op\":\"flash_attention\"") != std::string::npos);
  BOOST_TEST(text.find("\"op\":\"flash_attention_vjp\"") != std::string::npos);
  const auto imported = graph_from_json<float>(text);
  imported->replay();
  BOOST_TEST(to_json(*imported, ExportValues::all).dump() == text);

  // New inputs replayed through the imported graph match a fresh build.
  const xt::xarray<float> q2 = random_array<float>({2, 3, 4}, 19);
  imported->set_value(imported->var(q.id()), q2);
  imported->replay();
  Graph<float> fresh;
  const auto fq = fresh.input("q", q2), fk = fresh.input("k", k.value()), fv = fresh.input("v", v.value());
  const auto fout = attention(fq, fk, fv, AttentionImpl::fused);
  const auto fgrads = grad(fout, {fq, fk, fv});
  BOOST_TEST(imported->node(out.id()).value() == fout.value());
  for (std::size_t i = 0; i < 3; ++i) BOOST_TEST(imported->var(grads[i].slot()).value() == fgrads[i].value());
}

BOOST_AUTO_TEST_CASE(two_threads_split_the_tiles) {
  // Forward, threads split (batch index, query tile) items; backward, 3 batch indices are split
  // by batch index, 1 by key tile (3 tiles), each thread summing its own grad_q. The output,
  // grad_k and grad_v repeat their bits, and grad_q does when split by batch index.
  test::BlasThreads threads_set(1);
  for (const std::size_t batch : {3, 1}) {
    std::vector<xt::xarray<double>> values[2];
    for (int threads : {1, 2}) {
      threads_set.set(threads);
      BOOST_TEST_REQUIRE(xgrad::detail::parallel_threads() == std::size_t(threads));
      Graph<double> g;
      const auto q = g.input("q", random_array<double>({batch, 300, 8}, 30));
      const auto k = g.input("k", random_array<double>({batch, 1100, 8}, 31));
      const auto v = g.input("v", random_array<double>({batch, 1100, 4}, 32));
      const auto out = attention(q, k, v, AttentionImpl::fused);
      values[threads - 1].push_back(out.value());
      for (const auto& gr : grad(out, {q, k, v}, random_array<double>({batch, 300, 4}, 33))) {
        values[threads - 1].push_back(gr.value());
      }
      BOOST_TEST(openblas_get_num_threads() == threads);  // restored after the fused nodes
    }
    BOOST_TEST_CONTEXT("batch " << batch) {
      for (std::size_t i : {0, 2, 3}) BOOST_TEST(values[0][i] == values[1][i], "value " << i);
      if (batch == 3) BOOST_TEST(values[0][1] == values[1][1]);
      BOOST_TEST(relative_error(values[1][1], values[0][1]) <= 1e-14);
    }
  }
}

BOOST_AUTO_TEST_CASE(an_import_counts_the_weights_it_would_compute) {
  // The fused op holds no 64 x 64 weights, but an import charges their work (Op::work): each
  // weight written and read (2 visits) and its 1 + 1 multiply-adds (1/4 visit), beside the
  // 3 x 64 + 128 elements of q, k, v and the outputs out and lse.
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({64, 1}, 60));
  const auto k = g.input("k", random_array<double>({64, 1}, 61));
  const auto v = g.input("v", random_array<double>({64, 1}, 62));
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

BOOST_AUTO_TEST_SUITE_END()
