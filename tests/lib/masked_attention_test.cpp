#include "../check.hpp"

#include <xtensor/xmath.hpp>
#include <xtensor/xview.hpp>

namespace {

template <class T>
bool all_finite(const xt::xarray<T>& a) {
  return xt::all(xt::isfinite(a));
}

}  // namespace

BOOST_AUTO_TEST_SUITE(masked_attention)

BOOST_AUTO_TEST_CASE(masks_are_as_documented) {
  const xt::xarray<bool> causal = {{true, false, false}, {true, true, false}, {true, true, true}};
  BOOST_TEST(xgrad::causal_mask(3, 3) == causal);
  // T_k > T_q: queries aligned to the last keys; T_q > T_k: the first rows allow nothing.
  BOOST_TEST(xgrad::causal_mask(2, 3) == (xt::xarray<bool>{{true, true, false}, {true, true, true}}));
  BOOST_TEST(xgrad::causal_mask(3, 2) == (xt::xarray<bool>{{false, false}, {true, false}, {true, true}}));
  const xt::xarray<bool> pad = xgrad::padding_mask({2, 0}, 1, 3);
  BOOST_TEST(pad == (xt::xarray<bool>{{{true, true, false}}, {{false, false, false}}}));
  BOOST_TEST(xgrad::padding_mask({1}, 2, 2, true).shape() == (xt::svector<std::size_t>{1, 1, 2, 2}), boost::test_tools::per_element());
  check_error([] { xgrad::padding_mask({4}, 1, 3); }, {"padding_mask: sequence 0 has length 4, more than T_k = 3"});
}

BOOST_AUTO_TEST_CASE(forbidden_keys_get_no_weight) {
  // Causal self-attention on the documented example's keys: query 0 sees only key 0.
  Graph<double> g;
  const auto q = g.input("q", {{std::log(2.0)}, {0.0}});
  const auto k = g.input("k", {{1.0}, {0.0}});
  const auto v = g.input("v", {{3.0, 0.0}, {0.0, 6.0}});
  const auto a = masked_attention_nodes(q, k, v, causal_mask(2, 2));
  BOOST_TEST(a.weights.value() == (xt::xarray<double>{{1.0, 0.0}, {0.5, 0.5}}), boost::test_tools::per_element());
  BOOST_TEST(a.output.value() == (xt::xarray<double>{{3.0, 0.0}, {1.5, 3.0}}), boost::test_tools::per_element());
  BOOST_TEST(std::isinf(a.masked.value()(0, 1)));  // -inf, never a finite sentinel
  BOOST_TEST(a.mask.node().op_name() == "constant");
  // Everything allowed: the same as attention.
  Graph<double> h;
  const auto q2 = h.input("q", random_array<double>({2, 3, 4}, 1));
  const auto k2 = h.input("k", random_array<double>({2, 5, 4}, 2));
  const auto v2 = h.input("v", random_array<double>({2, 5, 2}, 3));
  const xt::xarray<bool> all = xt::ones<bool>({3, 5});
  BOOST_TEST(xgrad::masked_attention(q2, k2, v2, all).value() == attention(q2, k2, v2).value());
}

BOOST_AUTO_TEST_CASE(a_row_with_no_allowed_key_is_zero_forward_and_backward) {
  for (int dtype = 0; dtype < 2; ++dtype) {
    const auto run = [](auto tag) {
      using T = decltype(tag);
      Graph<T> g;
      const auto q = g.input("q", random_array<T>({3, 4}, 4));
      const auto k = g.input("k", random_array<T>({5, 4}, 5));
      const auto v = g.input("v", random_array<T>({5, 2}, 6));
      xt::xarray<bool> mask = xgrad::causal_mask(3, 5);
      xt::view(mask, 1) = false;  // query 1 may attend to nothing
      const auto a = masked_attention_nodes(q, k, v, mask);
      BOOST_TEST(xt::all(xt::equal(xt::view(a.weights.value(), 1), T(0))));
      BOOST_TEST(xt::all(xt::equal(xt::view(a.output.value(), 1), T(0))));
      const auto grads = grad(a.output, {q, k, v});
      BOOST_TEST(xt::all(xt::equal(xt::view(grads[0].value(), 1), T(0))));  // grad_q of the masked row
      for (const auto& gr : grads) BOOST_TEST(all_finite(gr.value()));
      // Every node, forward and backward, is free of NaN (the -inf of masked scores aside).
      for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(!xt::any(xt::isnan(g.node(i).value())), "node " << i);
    };
    if (dtype == 0) run(float{});
    else run(double{});
  }
}

BOOST_AUTO_TEST_CASE(gradients_match_finite_differences) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 4, 3}, {2, 4, 3}, {2, 4, 2}, 7);
  BOOST_TEST_CONTEXT("causal") { check_gradients(xgrad::masked_attention(q, k, v, causal_mask(4, 4)), {q, k, v}); }
  BOOST_TEST_CONTEXT("padding") { check_gradients(xgrad::masked_attention(q, k, v, padding_mask({3, 1}, 4, 4)), {q, k, v}); }
  xt::xarray<bool> empty_row = causal_mask(4, 4);
  xt::view(empty_row, 2) = false;
  BOOST_TEST_CONTEXT("a fully masked row") { check_gradients(xgrad::masked_attention(q, k, v, empty_row), {q, k, v}); }
  // With heads: (B, H, T, d) and a (B, 1, T_q, T_k) padding mask.
  Graph<double> h;
  const auto qh = h.input("q", random_array<double>({2, 2, 3, 2}, 10));
  const auto kh = h.input("k", random_array<double>({2, 2, 3, 2}, 11));
  const auto vh = h.input("v", random_array<double>({2, 2, 3, 2}, 12));
  BOOST_TEST_CONTEXT("heads") { check_gradients(xgrad::masked_attention(qh, kh, vh, padding_mask({2, 3}, 3, 3, true)), {qh, kh, vh}); }
}

BOOST_AUTO_TEST_CASE(masked_graphs_export_and_replay) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({3, 2}, 13));
  const auto k = g.input("k", random_array<float>({3, 2}, 14));
  const auto v = g.input("v", random_array<float>({3, 2}, 15));
  const auto out = xgrad::masked_attention(q, k, v, causal_mask(3, 3));
  grad(out, {q, k, v});
  const std::string text = to_json(g, ExportValues::all).dump();
  BOOST_TEST(text.find("\"op\":\"apply_mask\"") != std::string::npos);
  BOOST_TEST(text.find("\"-inf\"") != std::string::npos);
  BOOST_TEST(to_json(*graph_from_json<float>(text), ExportValues::all).dump() == text);
  BOOST_TEST(to_dot(g).find("apply_mask") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(rejects_a_mask_that_does_not_broadcast) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 3}));
  const auto k = g.input("k", xt::zeros<double>({4, 3}));
  const auto v = g.input("v", xt::zeros<double>({4, 5}));
  check_error([&] { xgrad::masked_attention(q, k, v, causal_mask(4, 2)); },
              {"masked_attention: the mask (4, 2) does not broadcast to the scores (2, 4)"});
  BOOST_TEST(g.size() == 3u);  // nothing was added
}

// Issue 15: causal_mask(2^32, 2^32) and padding_mask({1}, 2^32, 2^32) crashed (xtensor's strides
// overflowed); both refuse before allocating.
BOOST_AUTO_TEST_CASE(masks_refuse_too_many_elements) {
  const std::size_t big = std::size_t(1) << 32;
  check_error([&] { causal_mask(big, big); },
              {"causal_mask: a (4294967296, 4294967296) mask makes more than 268435456 elements"});
  check_error([&] { padding_mask({1}, big, big); },
              {"padding_mask: a (1, 4294967296, 4294967296) mask makes more than 268435456 elements"});
  check_error([&] { padding_mask({1, 2}, std::size_t(1) << 14, std::size_t(1) << 14, true); },
              {"padding_mask: a (2, 1, 16384, 16384) mask"});
  BOOST_TEST(causal_mask(0, std::size_t(1) << 28).size() == 0u);  // at the bound
}

BOOST_AUTO_TEST_SUITE_END()
