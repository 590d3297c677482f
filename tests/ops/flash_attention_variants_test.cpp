// The fused attention's variants (issue 31): the tanh logit soft-cap (flash_attention's softcap)
// and the causal sliding window (FlashMask::window), against the composed graph
//   scores = matmul(scale(q, a), k^T); scale(tanh(scale(scores, 1/C)), C);
//   apply_mask(key mask), apply_mask(sliding_window_mask); softmax; matmul(., v)
// in values and gradients, PyTorch float64, finite differences to second order, JSON, ONNX and
// their errors. (The plain and masked fused attention: flash_attention_test.cpp.)
#include "flash_reference.hpp"

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

const std::vector<FlashCase> cases = {
    // batch, T_q, T_k, d_k, d_v, causal, window, softcap, key mask, empty row, stddev
    {{}, 7, 7, 3, 2, true, 3, 0, {}, false, 1},                 // window, T_q = T_k
    {{2}, 5, 9, 4, 3, true, 2, 0, {}, false, 1},                // window, T_q < T_k
    {{2}, 9, 5, 4, 3, true, 2, 0, {}, false, 1},                // window, T_q > T_k: rows of no key
    {{}, 6, 6, 2, 3, true, 1, 0, {}, false, 1},                 // window 1: each query its own key
    {{2}, 6, 8, 3, 2, true, 8, 0, {}, false, 1},                // window = T_k: causal
    {{3}, 4, 6, 8, 2, false, 0, 2.0, {}, false, 3},             // soft-cap alone, saturated scores
    {{2}, 5, 5, 8, 3, false, 0, 30.0, {}, false, 1},            // a cap far above the scores
    {{3, 2}, 6, 9, 5, 4, true, 0, 1.5, {3, 1, 1, 9}, true, 3},  // cap, causal and key mask
    {{3}, 8, 10, 5, 3, true, 4, 2.0, {3, 1, 10}, true, 2},      // cap, window and key mask
    {{2}, 10, 7, 3, 3, true, 3, 1.0, {1, 7}, false, 1},         // all three, T_q > T_k
    {{1}, 600, 1100, 8, 5, true, 300, 4.0, {}, false, 1},       // over 3 query and 3 key tiles
    {{2}, 700, 530, 6, 4, true, 200, 0, {2, 1, 530}, true, 1},  // window and key mask over tiles, T_q > T_k
    {{1}, 1100, 1100, 4, 2, true, 100, 3.0, {}, false, 2},      // key tiles wholly before the window skipped
};

}  // namespace

BOOST_AUTO_TEST_SUITE(flash_attention_variants)

BOOST_AUTO_TEST_CASE(sliding_window_mask_hand_values) {
  // T_q = 3 < T_k = 5, window 2: i' = i + 2 sees keys i' - 1 and i'.
  const xt::xarray<bool> a = sliding_window_mask(3, 5, 2);
  BOOST_TEST(a == (xt::xarray<bool>{{false, true, true, false, false}, {false, false, true, true, false},
                                     {false, false, false, true, true}}));
  // T_q = 4 > T_k = 2, window 1: rows 0 and 1 see no key, rows 2 and 3 keys 0 and 1.
  BOOST_TEST(sliding_window_mask(4, 2, 1) == (xt::xarray<bool>{{false, false}, {false, false}, {true, false}, {false, true}}));
  // A window of T_k or more keys is the causal mask.
  BOOST_TEST(sliding_window_mask(4, 6, 6) == causal_mask(4, 6));
  BOOST_TEST(sliding_window_mask(4, 6, 1000) == causal_mask(4, 6));
  BOOST_TEST(!(sliding_window_mask(4, 6, 5) == causal_mask(4, 6)));
  check_error([] { sliding_window_mask(3, 3, 0); }, {"sliding_window_mask: window = 0 lets no query attend to any key"});
  check_error([] { sliding_window_mask(std::size_t(1) << 32, std::size_t(1) << 32, 4); },
              {"sliding_window_mask: a (4294967296, 4294967296) mask makes more than 268435456 elements"});
}

BOOST_AUTO_TEST_CASE(window_one_attends_to_the_own_key_alone) {
  // Every row's one weight is 1: out is v at i' = i + T_k - T_q, lse that single capped score.
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {4, 3}, {6, 3}, {6, 2}, 1);
  const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}, 1}, 0.25);
  for (std::size_t i = 0; i < 4; ++i) {
    double s = 0;
    for (std::size_t l = 0; l < 3; ++l) s += 0.5 * q.value()(i, l) * k.value()(i + 2, l);
    BOOST_TEST(f.lse.value()(i) == std::tanh(s * (1 / 0.25)) * 0.25, boost::test_tools::tolerance(1e-15));
    for (std::size_t c = 0; c < 2; ++c) BOOST_TEST(f.out.value()(i, c) == v.value()(i + 2, c));
  }
  // out does not depend on q or k: their gradients through out are exactly 0.
  const auto grads = grad(f.out, {q, k});
  BOOST_TEST(xt::all(xt::equal(grads[0].value(), 0.0)));
  BOOST_TEST(xt::all(xt::equal(grads[1].value(), 0.0)));
}

BOOST_AUTO_TEST_CASE(a_window_of_t_k_keys_is_causal_to_the_bit) {
  for (const std::size_t window : {std::size_t(530), std::size_t(531), std::size_t(1) << 40}) {
    std::vector<xt::xarray<double>> values[2];
    for (const std::size_t w : {std::size_t(0), window}) {
      Graph<double> g;
      const auto [q, k, v] = random_qkv(g, {2, 600, 4}, {2, 530, 4}, {2, 530, 3}, 10);
      const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}, w});
      auto& out = values[w != 0];
      out.push_back(f.out.value());
      out.push_back(f.lse.value());
      for (const auto& gr : grad(f.out, {q, k, v}, random_array<double>({2, 600, 3}, 13))) out.push_back(gr.value());
    }
    for (std::size_t i = 0; i < values[0].size(); ++i) BOOST_TEST(values[0][i] == values[1][i], "window " << window << ", value " << i);
  }
}

BOOST_AUTO_TEST_CASE(agrees_with_the_composed_graph_in_float64) {
  check_flash_agreement<double>(cases, 20, 1e-12, "soft-cap and window");
}

BOOST_AUTO_TEST_CASE(agrees_with_the_composed_graph_in_float32) {
  std::vector<FlashCase> unsaturated = cases;  // saturated rows lose digits in float32 in both (flash_attention_test.cpp)
  for (FlashCase& c : unsaturated) c.stddev = 1;
  check_flash_agreement<float>(unsaturated, 40, 1e-5, "soft-cap and window");
}

BOOST_AUTO_TEST_CASE(agrees_on_random_shapes) {
  RandomCases r(31);
  for (int i = 0; i < 40; ++i) {
    FlashCase c{r.batch(), r.pick(1, 20), r.pick(1, 20), r.pick(1, 6), r.pick(1, 6), r.pick(0, 1) == 1};
    c.stddev = r.pick(0, 1) ? 1.0 : 3.0;
    if (c.causal && r.pick(0, 2) != 0) c.window = r.pick(1, 22);
    if (r.pick(0, 1)) c.softcap = r.uniform(0.5, 20);
    if (r.pick(0, 2) == 0) {
      c.key_shape = r.key_shape(c.batch, c.t_k);
      c.empty_row = r.pick(0, 3) == 0;
    }
    check_flash_agreement<double>(c, 500 + static_cast<std::uint64_t>(i), 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(gradcheck_in_float64) {
  // out and lse by finite differences, with the cap saturating (stddev 2); T_q > T_k: the first
  // rows see no key (lse -inf there: finite differences of out only).
  for (const FlashCase& c : {FlashCase{{2}, 5, 7, 3, 2, true, 3, 1.5, {2, 1, 7}, false, 2},
                               FlashCase{{2}, 4, 4, 3, 2, false, 0, 0.7, {}, false, 2},
                               FlashCase{{}, 6, 4, 3, 2, true, 2, 2.0, {}, false, 1}}) {
    BOOST_TEST_CONTEXT(str(c)) {
      Graph<double> g;
      const auto q = g.input("q", random_array<double>(with(c.batch, c.t_q, c.d_k), 70, c.stddev));
      const auto k = g.input("k", random_array<double>(with(c.batch, c.t_k, c.d_k), 71, c.stddev));
      const auto v = g.input("v", random_array<double>(with(c.batch, c.t_k, c.d_v), 72));
      const Var<double> key_mask = c.key_shape.empty() ? Var<double>() : g.mask("key_mask", key_mask_of(c, 73));
      const auto f = xgrad::flash_attention(q, k, v, 0.6, FlashMask<double>{c.causal, key_mask, c.window}, c.softcap);
      check_gradients(f.out, {q, k, v});
      if (c.t_q <= c.t_k) check_gradients(f.lse, {q, k, v});
    }
  }
}

BOOST_AUTO_TEST_CASE(second_order_is_the_composed_graphs) {
  // y = sum(r * grad_x), grad_x the gradient of sum(s * out): by finite differences, and equal
  // to the composed attention's; the cap saturating, a window, a key mask with an empty sequence.
  check_flash_second_order(FlashCase{{2}, 5, 6, 2, 3, true, 2, 1.2, {2, 1, 6}, true, 2});
  check_flash_second_order(FlashCase{{}, 4, 4, 3, 2, false, 0, 0.8, {}, false, 2});
  check_flash_second_order(FlashCase{{2}, 6, 4, 2, 2, true, 3, 0, {}, false, 1});
}

BOOST_AUTO_TEST_CASE(the_vjp_nodes_own_gradients) {
  // The VJP node's gradients w.r.t. q, k, v, grad_out and grad_lse too, by finite differences.
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({2, 3, 2}, 110, 2));
  const auto k = g.input("k", random_array<double>({2, 5, 2}, 111, 2));
  const auto v = g.input("v", random_array<double>({2, 5, 2}, 112));
  const auto go = g.input("go", random_array<double>({2, 3, 2}, 113));
  const auto gl = g.input("gl", random_array<double>({2, 3}, 114));
  const auto key_mask = g.input("key_mask", xt::xarray<double>{{{1, 0, 1, 1, 1}}, {{0, 1, 1, 0, 1}}});
  const FlashMask<double> mask{true, key_mask, 2};
  const auto f = xgrad::flash_attention(q, k, v, 0.9, mask, 1.1);
  const auto own = xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, go, gl, 0.9, mask, 1.1);
  for (const auto& y : {own.grad_q, own.grad_k, own.grad_v}) check_gradients(y, {q, k, v, go, gl});
  BOOST_TEST(xt::all(xt::equal(grad(own.grad_q, {key_mask})[0].value(), 0.0)));
}

BOOST_AUTO_TEST_CASE(matches_pytorch_in_float64) {
  // tests/data/make_torch_fixtures.py, part flash_attention_variants: softmax(C tanh(s / C) + M) v
  // and logsumexp with autograd, M -inf outside the causal window of 3 keys and at padded keys
  // ("windowed"), or none ("capped").
  for (const std::string name : {"capped", "windowed"}) {
    BOOST_TEST_CONTEXT(name) {
      const auto fixture = [&](const std::string& what) { return torch_fixture("flash_attention_variants_" + name + "_" + what); };
      Graph<double> g;
      const auto q = g.input("q", fixture("q"));
      const auto k = g.input("k", fixture("k"));
      const auto v = g.input("v", fixture("v"));
      const bool windowed = name == "windowed";
      const Var<double> pad = windowed ? g.mask("pad", xt::cast<bool>(fixture("key_mask"))) : Var<double>();
      const double scale = fixture("scale")(), cap = fixture("softcap")();
      const auto f = xgrad::flash_attention(q, k, v, scale, FlashMask<double>{windowed, pad, windowed ? 3u : 0u}, cap);
      check_close(f.out.value(), fixture("out"));
      check_close(f.lse.value(), fixture("lse"));
      const auto grads = grads_of<double>({f.out, f.lse}, {q, k, v}, {g.constant("u", fixture("u")), g.constant("h", fixture("h"))});
      check_close(grads[0].value(), fixture("grad_q"));
      check_close(grads[1].value(), fixture("grad_k"));
      check_close(grads[2].value(), fixture("grad_v"));
    }
  }
}

BOOST_AUTO_TEST_CASE(key_tiles_outside_the_window_are_not_read) {
  // NaN in v at keys [0, 500): with a window of 100 over T = 1100, query tile 768 (rows
  // 768-1023) starts at key 669 and tile 1024 at 925, so their rows stay finite, forward and
  // backward; the composed graph's 0 * NaN makes every row NaN.
  const std::size_t t = 1100;
  xt::xarray<double> vv = random_array<double>({t, 2}, 90);
  for (std::size_t j = 0; j < 500; ++j) vv(j, 1) = std::nan("");
  Graph<double> g;
  const auto q = g.input("q", random_array<double>({t, 3}, 91));
  const auto k = g.input("k", random_array<double>({t, 3}, 92));
  const auto v = g.input("v", vv);
  const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}, 100}, 5.0);
  const auto grads = grad(f.out, {q, k, v});
  BOOST_TEST(!xt::any(xt::isnan(xt::view(f.out.value(), xt::range(768, t)))));
  BOOST_TEST(xt::any(xt::isnan(xt::view(f.out.value(), xt::range(0, 768)))));
  BOOST_TEST(!xt::any(xt::isnan(xt::view(grads[0].value(), xt::range(768, t)))));
  // Keys from 768 on meet query tiles 768 and 1024 alone.
  BOOST_TEST(!xt::any(xt::isnan(xt::view(grads[1].value(), xt::range(768, t)))));
  BOOST_TEST(!xt::any(xt::isnan(xt::view(grads[2].value(), xt::range(768, t)))));
}

BOOST_AUTO_TEST_CASE(two_threads_split_the_tiles) {
  // A window and a cap: the window leaves each query tile one or two of the 3 key tiles.
  check_tiles_split_by_threads(1100, 1100, [](const auto& q, const auto& k, const auto& v) {
    return xgrad::flash_attention(q, k, v, 0.4, FlashMask<double>{true, {}, 300}, 3.0).out;
  });
}

BOOST_AUTO_TEST_CASE(work_counts_the_window_and_the_cap) {
  // Causal window of 128 keys, T_q = T_k = 1024: query tile i0 computes keys
  // [max(0, i0 + 1 - 128), i0 + 256): 256 for tile 0, 383 for the other 3; each row i allows
  // min(i + 1, 128) keys. d_k = d_v = 1: 2 visits and 1/4 of multiply-adds per weight forward;
  // a cap adds 12 (its tanh).
  const std::vector<Shape> x = {{1024, 1}, {1024, 1}, {1024, 1}}, y = {{1024, 1}, {1024}};
  const double io = 5 * 1024;
  const auto op = [](const char* name, Json attrs) { return make_op(name, JsonCursor(attrs, "attrs")); };
  const double computed = 256.0 * (256 + 3 * 383), allowed = 128.0 * 129 / 2 + (1024 - 128) * 128.0;
  const Json windowed = {{"scale", 1.0}, {"causal", true}, {"window", 128}};
  BOOST_TEST(op("flash_attention", windowed)->work(x, y) == io + computed * 2.25 + (computed - allowed));
  Json capped = windowed;
  capped["softcap"] = 5.0;
  BOOST_TEST(op("flash_attention", capped)->work(x, y) == io + computed * (2.25 + 12) + (computed - allowed));
  // The VJP: 4 visits and 5/8 of multiply-adds per weight; a cap 14 more (the tanh, its
  // derivative's tile written and read).
  const std::vector<Shape> xv = {{1024, 1}, {1024, 1}, {1024, 1}, {1024, 1}, {1024}, {1024, 1}, {1024}};
  const std::vector<Shape> yv = {{1024, 1}, {1024, 1}, {1024, 1}};
  BOOST_TEST(op("flash_attention_vjp", capped)->work(xv, yv) == 10 * 1024 + computed * (4 + 5 / 8.0 + 14) + (computed - allowed));
  // T_q = 300 > T_k = 100, window 30: tile 0 (rows 0-255, i' = i - 200) keys [0, 56), tile 1
  // (rows 256-299) keys [27, 100); row i allows clamp(i - 199, 0, 100) - clamp(i - 229, 0, 100).
  const std::vector<Shape> x2 = {{300, 1}, {100, 1}, {100, 1}}, y2 = {{300, 1}, {300}};
  const double computed2 = 256.0 * 56 + 44.0 * 73;
  double allowed2 = 0;
  for (long i = 0; i < 300; ++i) allowed2 += static_cast<double>(std::clamp(i - 199, 0L, 100L) - std::clamp(i - 229, 0L, 100L));
  BOOST_TEST(op("flash_attention", {{"scale", 1.0}, {"causal", true}, {"window", 30}})->work(x2, y2) ==
             1100 + computed2 * 2.25 + (computed2 - allowed2));
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3, 2}, {2, 4, 2}, {2, 4, 2}, 130);
  const auto pad = g.mask("pad", xt::xarray<bool>{{{true, true, false, true}}, {{false, true, true, true}}});
  const auto all = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, pad, 3}, 2.5);
  const auto windowed = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{true, {}, 2});
  const auto capped = xgrad::flash_attention(q, k, v, 0.5, {}, 50.0);
  check_attrs_round_trip(all.out, "flash_attention", R"({"scale":0.5,"causal":true,"key_mask":true,"window":3,"softcap":2.5})");
  check_attrs_round_trip(windowed.out, "flash_attention", R"({"scale":0.5,"causal":true,"window":2})");
  check_attrs_round_trip(capped.out, "flash_attention", R"({"scale":0.5,"softcap":50.0})");
  const auto vjp = xgrad::flash_attention_vjp(q, k, v, all.out, all.lse, all.out, all.lse, 0.5, FlashMask<double>{true, pad, 3}, 2.5);
  check_attrs_round_trip(vjp.grad_q, "flash_attention_vjp", R"({"scale":0.5,"causal":true,"key_mask":true,"window":3,"softcap":2.5})");
  // The gradients' VJP node carries them: grad() of the capped, windowed attention.
  const auto grads = grad(all.out, {q});
  BOOST_TEST(grads[0].node().op->attrs().dump() == R"({"scale":0.5,"causal":true,"key_mask":true,"window":3,"softcap":2.5})");
  // "window": 0 and "softcap": 0 read as absent; a negative window is refused by the reader.
  const auto off = make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}, {"window", 0}, {"softcap", 0.0}}, "attrs"));
  BOOST_TEST(off->attrs().dump() == R"({"scale":1.0})");
  check_error([] { make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}, {"causal", true}, {"window", 1.5}}, "attrs")); },
              {"attrs.window"});
  const Json exported = to_json(g, ExportValues::all);
  check_refuses_bad_attrs(exported, windowed.out.id(), {"window"}, false);
  // A file whose soft-cap is not allowed, or whose window lacks causal: the import names the node.
  for (const auto& [key, value, message] :
       {std::tuple<const char*, Json, std::string>{"softcap", -1.0, "the soft-cap must be finite and > 0 (0 for none), got -1"},
        {"softcap", "nan", "the soft-cap must be finite and > 0 (0 for none), got nan"},
        {"softcap", "inf", "the soft-cap must be finite and > 0 (0 for none), got inf"},
        {"causal", false, "window = 2 is a causal sliding window"}}) {
    check_refuses_attr(exported, windowed.out.id(), key, value,
                       "graph JSON: nodes[" + std::to_string(windowed.out.id()) + "]: flash_attention: " + message);
  }
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays) {
  Graph<float> g;
  const auto q = g.input("q", random_array<float>({2, 6, 4}, 140, 2));
  const auto k = g.input("k", random_array<float>({2, 7, 4}, 141, 2));
  const auto v = g.input("v", random_array<float>({2, 7, 3}, 142));
  const auto pad = g.mask("pad", xt::xarray<bool>{{{true, true, true, true, true, false, false}},
                                                  {{false, true, true, true, true, true, true}}});
  const auto out = xgrad::flash_attention(q, k, v, 0.5, FlashMask<float>{true, pad, 3}, 2.0).out;
  g.set_output("out", out);
  const auto grads = grad(out, {q, k, v});
  for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
  // New inputs replayed through both graphs agree with each other to the bit.
  const std::string text = check_json_replays(g, q, {random_array<float>({2, 6, 4}, 143, 2)});
  BOOST_TEST(text.find(R"("attrs":{"scale":0.5,"causal":true,"key_mask":true,"window":3,"softcap":2.0})") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(onnx_round_trip) {
  // to_onnx and back (import_onnx): C Tanh(s / C) on the scores, the window as And of the causal
  // LessOrEqual and a Less of two int64 ranges, the key mask a mask leaf; row 0 of T_q > T_k sees
  // no key (lse -inf). And the VJP's lowering: the gradients through the cap.
  const xt::xarray<bool> pad{{{true, true, false, true, true}}, {{true, false, true, true, true}}};
  for (const std::size_t window : {std::size_t(0), std::size_t(2), std::size_t(9)}) {
    for (const double cap : {0.0, 1.5}) {
      if (window == 0 && cap == 0) continue;
      BOOST_TEST_CONTEXT("window " << window << ", softcap " << cap) {
        Graph<double> g;
        const auto q = g.input("q", random_array<double>({2, 6, 3}, 150, 2));
        const auto k = g.input("k", random_array<double>({2, 5, 3}, 151, 2));
        const auto v = g.input("v", random_array<double>({2, 5, 2}, 152));
        const auto key_mask = g.mask("pad", pad);
        const auto f = xgrad::flash_attention(q, k, v, 0.5, FlashMask<double>{window > 0, key_mask, window}, cap);
        g.set_output("out", f.out);
        g.set_output("lse", f.lse);
        const auto grads = grads_of<double>({f.out, f.lse}, {q, k, v},
                                            {g.constant("r", random_array<double>({2, 6, 2}, 153)),
                                             g.constant("h", random_array<double>({2, 6}, 154))});
        for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
        check_onnx_round_trip(g, {q, k, v}, "pad", pad);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(rejects_bad_soft_caps_and_windows) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({2, 3, 4}));
  const auto k = g.input("k", xt::zeros<double>({2, 5, 4}));
  const auto v = g.input("v", xt::zeros<double>({2, 5, 3}));
  const auto f = xgrad::flash_attention(q, k, v, 1.0);
  const std::size_t before = g.size();
  for (const double cap : {-1.0, -0.0 - 1e-300, std::nan(""), inf, -inf}) {
    const std::string got = "the soft-cap must be finite and > 0 (0 for none), got " + number_str(cap);
    check_error([&] { xgrad::flash_attention(q, k, v, 1.0, {}, cap); }, {"flash_attention (node " + std::to_string(before) + "): " + got});
    check_error([&] { xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, {}, cap); },
                {"flash_attention_vjp (node " + std::to_string(before) + "): " + got});
  }
  const std::string window = "window = 3 is a causal sliding window (query i sees the keys j with i' - window < j <= i', "
                             "i' = i + T_k - T_q): set causal too; a bidirectional window is not supported";
  check_error([&] { xgrad::flash_attention(q, k, v, 1.0, FlashMask<double>{false, {}, 3}); }, {"flash_attention (node", window});
  check_error([&] { xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, FlashMask<double>{false, {}, 3}); },
              {"flash_attention_vjp (node", window});
  BOOST_TEST(g.size() == before);  // nothing added by a refused call
  // 0 is no cap, and -0 too.
  BOOST_TEST(xgrad::flash_attention(q, k, v, 1.0, {}, -0.0).out.node().op->attrs().dump() == R"({"scale":1.0})");
  // The second-order rule: out and lse of an attention of another cap or window.
  const auto capped = xgrad::flash_attention_vjp(q, k, v, f.out, f.lse, f.out, f.lse, 1.0, {}, 2.0);
  check_error([&] { grad(capped.grad_q, {q}); }, {"needs out and lse to be the outputs of flash_attention of the same q, k, v, "
                                                  "scale, mask and soft-cap; out is node " + std::to_string(f.out.id()) + " (flash_attention)"});
  const auto causal = xgrad::flash_attention(q, k, v, 1.0, FlashMask<double>{true, {}});
  const auto windowed = xgrad::flash_attention_vjp(q, k, v, causal.out, causal.lse, causal.out, causal.lse, 1.0,
                                                   FlashMask<double>{true, {}, 2});
  check_error([&] { grad(windowed.grad_k, {q}); }, {"out is node " + std::to_string(causal.out.id()) + " (flash_attention)"});
}

BOOST_AUTO_TEST_SUITE_END()
