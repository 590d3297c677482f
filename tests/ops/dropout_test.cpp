#include "../check.hpp"

#include <cmath>
#include <limits>

#include <xgrad/ops/kernels/philox.hpp>

namespace {

// The mask of a dropout node: true where x's element was kept (x all ones: y = 1 / (1 - p)).
template <class T>
std::vector<bool> mask_of(const xt::xarray<T>& y) {
  std::vector<bool> kept;
  for (T v : y) kept.push_back(v != T(0));
  return kept;
}

template <class T>
xt::xarray<T> ones(std::size_t n) {
  return xt::ones<T>({n});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dropout)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // p = 0.5, seed 7, step 0: element i is kept where its Philox bits are below 2^31, and then
  // 2 x; computed here from the generator directly.
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{1, -2, 3, -4, 5, -6, 7, -8, 9});
  const auto y = xgrad::dropout(x, 0.5, 7);
  for (std::size_t i = 0; i < 9; ++i) {
    const bool kept = detail::philox_bits(7, 0, i) < (std::uint64_t(1) << 31);
    BOOST_TEST(y.value()(i) == (kept ? 2 * x.value()(i) : 0.0), "element " << i);
  }
  // p = 0.25: kept elements are x / 0.75, rounded in T.
  Graph<float> f;
  const auto xf = f.input("x", xt::xarray<float>{3, 3, 3, 3, 3, 3, 3, 3});
  const auto yf = xgrad::dropout(xf, 0.25, 1);
  for (std::size_t i = 0; i < 8; ++i) {
    const bool kept = detail::philox_bits(1, 0, i) < 3221225472u;  // 0.75 x 2^32
    BOOST_TEST(yf.value()(i) == (kept ? 3.0f * (1.0f / 0.75f) : 0.0f), "element " << i);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(p_0_is_the_identity_and_p_1_zeros, T, test::dtypes) {
  Graph<T> g;
  xt::xarray<T> v = random_array<T>({3, 4}, 1);
  v(0, 0) = std::numeric_limits<T>::quiet_NaN();
  v(0, 1) = T(-0.0);
  v(0, 2) = std::numeric_limits<T>::infinity();
  const auto x = g.input("x", v);
  BOOST_TEST(same_bits(xgrad::dropout(x, 0.0, 3).value(), v));
  const xt::xarray<T> zeros = xgrad::dropout(x, 1.0, 3).value();
  // x * 0: zeros (of x's sign), and NaN where x is NaN or infinite, as torch's x * 0.
  BOOST_TEST(std::isnan(zeros(0, 0)));
  BOOST_TEST(std::isnan(zeros(0, 2)));
  for (std::size_t i = 3; i < zeros.size(); ++i) BOOST_TEST(zeros.data()[i] == T(0));
}

BOOST_AUTO_TEST_CASE(a_fixed_seeds_mask_keeps_1_minus_p) {
  // 10^5 elements: the kept fraction within 5 standard deviations of 1 - p.
  for (double p : {0.1, 0.5, 0.9}) {
    Graph<double> g;
    const std::size_t n = 100000;
    const auto y = xgrad::dropout(g.input("x", ones<double>(n)), p, 12345);
    std::size_t kept = 0;
    for (double e : y.value()) {
      BOOST_TEST_REQUIRE((e == 0.0 || e == 1 / (1 - p)));
      kept += e != 0.0;
    }
    const double sd = std::sqrt(p * (1 - p) / n);
    BOOST_TEST(std::abs(kept / double(n) - (1 - p)) < 5 * sd, "p " << p << ": kept " << kept);
  }
}

BOOST_AUTO_TEST_CASE(the_mask_is_a_function_of_seed_step_and_index) {
  const std::size_t n = 1000;
  Graph<double> a, b;
  const auto ya = xgrad::dropout(a.input("x", ones<double>(n)), 0.5, 99);
  const auto yb = xgrad::dropout(b.input("other", ones<double>(n)), 0.5, 99);
  BOOST_TEST(same_bits(ya.value(), yb.value()));  // same seed, two graphs: one mask
  const auto other_seed = xgrad::dropout(b.input("x2", ones<double>(n)), 0.5, 100);
  BOOST_TEST((mask_of(other_seed.value()) != mask_of(ya.value())));
  // Another step, another mask; back at step 0, the first again.
  const xt::xarray<double> step0 = ya.value();
  a.set_step(1);
  BOOST_TEST(a.step() == 1u);
  a.replay();
  BOOST_TEST((mask_of(ya.value()) != mask_of(step0)));
  a.set_step(0);
  a.replay();
  BOOST_TEST(same_bits(ya.value(), step0));
  // A 64-bit step and seed use all their bits.
  Graph<double> c;
  c.set_step(std::uint64_t(1) << 40);
  const auto yc = xgrad::dropout(c.input("x", ones<double>(n)), 0.5, std::uint64_t(99) | (std::uint64_t(1) << 50));
  BOOST_TEST((mask_of(yc.value()) != mask_of(step0)));
  // The thread count does not change it.
  Graph<double> big;
  const auto xbig = big.input("x", ones<double>(200001));
  std::vector<xt::xarray<double>> masks;
  for (int threads : {1, 2}) {
    const test::BlasThreads set(threads);
    masks.push_back(xgrad::dropout(xbig, 0.3, 5).value());
  }
  BOOST_TEST(same_bits(masks[0], masks[1]));
}

BOOST_AUTO_TEST_CASE(float32_and_float64_draw_one_mask) {
  const std::size_t n = 4099;
  Graph<float> f;
  Graph<double> d;
  f.set_step(3);
  d.set_step(3);
  const auto yf = xgrad::dropout(f.input("x", ones<float>(n)), 0.37, 8);
  const auto yd = xgrad::dropout(d.input("x", ones<double>(n)), 0.37, 8);
  BOOST_TEST((mask_of(yf.value()) == mask_of(yd.value())));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(evaluation_mode_copies_x_bit_for_bit, T, test::dtypes) {
  Graph<T> g;
  xt::xarray<T> v = random_array<T>({5, 7}, 2);
  v(1, 1) = std::numeric_limits<T>::quiet_NaN();
  const auto x = g.input("x", v);
  const auto y = xgrad::dropout(x, 0.6, 4);
  const auto gx = grad(y, {x})[0];
  BOOST_TEST(!same_bits(y.value(), v));
  g.set_training(false);
  BOOST_TEST(!g.training());
  g.replay();
  BOOST_TEST(same_bits(y.value(), v));
  BOOST_TEST(same_bits(gx.value(), xt::xarray<T>(xt::ones<T>({5, 7}))));  // the identity's gradient
  g.set_training(true);
  g.replay();
  BOOST_TEST(!same_bits(y.value(), v));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_is_dropout_of_grad_out_with_the_same_mask, T, test::dtypes) {
  Graph<T> g;
  g.set_step(11);
  const auto x = g.input("x", random_array<T>({4, 6}, 3));
  const auto y = xgrad::dropout(x, 0.4, 21);
  const auto u = g.input("u", random_array<T>({4, 6}, 4));
  const auto gx = grad(y, {x}, u)[0];
  BOOST_TEST(gx.node().op_name() == "dropout");
  BOOST_TEST(gx.node().op->attrs() == y.node().op->attrs());
  BOOST_TEST((mask_of(gx.value()) == mask_of(y.value())));
  // A new step redraws both together.
  g.set_step(12);
  g.replay();
  BOOST_TEST((mask_of(gx.value()) == mask_of(y.value())));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_matches_finite_differences, T, test::dtypes) {
  // gradcheck replays a float32 graph in float64: one mask, drawn from the same bits.
  Graph<T> g;
  g.set_step(5);
  const auto x = g.input("x", random_array<T>({3, 5}, 5));
  const auto y = xgrad::dropout(x, 0.3, 17);
  check_gradients(y, {x});
  check_gradients(mul(y, y), {x});
  // Second order.
  const auto u = g.input("u", random_array<T>({3, 5}, 6));
  const auto gx = grad(mul(y, y), {x}, u)[0];
  check_gradients(gx, {x, u});
}

BOOST_AUTO_TEST_CASE(rejects_p_outside_0_1) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::dropout(x, 1.5, 0); }, {"dropout (node 1): p must be in [0, 1], got 1.5"});
  check_error([&] { xgrad::dropout(x, -0.1, 0); }, {"dropout (node 1): p must be in [0, 1], got -0.1"});
  check_error([&] { xgrad::dropout(x, std::nan(""), 0); }, {"dropout (node 1): p must be in [0, 1], got nan"});
  check_error([&] { xgrad::dropout(x, INFINITY, 0); }, {"got inf"});
  BOOST_TEST(g.size() == 1u);
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4}, 7));
  const auto y = xgrad::dropout(x, 0.25, 18446744073709551615u);
  grad(y, {x});
  check_attrs_round_trip(y, "dropout", R"({"p":0.25,"seed":18446744073709551615})");
  Json j = to_json(g, ExportValues::all);
  j["nodes"][1]["attrs"]["seed"] = -1;
  check_error([&] { graph_from_json<double>(j.dump()); },
              {"nodes[1].attrs.seed: expected an integer from 0 to 18446744073709551615, got -1"});
  j["nodes"][1]["attrs"]["seed"] = 1.5;
  check_error([&] { graph_from_json<double>(j.dump()); }, {"nodes[1].attrs.seed: expected an integer from 0 to 18446744073709551615, got 1.5"});
  j["nodes"][1]["attrs"]["seed"] = 3;
  j["nodes"][1]["attrs"]["p"] = 2.0;
  check_error([&] { graph_from_json<double>(j.dump()); }, {"nodes[1]: dropout: p must be in [0, 1], got 2"});
}

BOOST_AUTO_TEST_CASE(export_import_replay_keeps_the_step_and_the_mode) {
  // The step and the mode are in the export; an import draws the same masks, bit for bit, and
  // a replay after set_step redraws forward and backward together, as in the original.
  for (bool training : {true, false}) {
    Graph<float> g;
    g.set_step(41);
    g.set_training(training);
    const auto x = g.input("x", random_array<float>({6, 5}, 8));
    const auto y = xgrad::dropout(x, 0.5, 3);
    const auto gx = grad(mul(y, y), {x})[0];
    g.set_output("y", y);
    g.set_grad("x", gx);
    const std::string text = to_json(g, ExportValues::all).dump();
    BOOST_TEST(text.find(training ? R"("dtype":"float32","step":41,"nodes")" : R"("step":41,"training":false,"nodes")") !=
               std::string::npos);
    const auto back = graph_from_json<float>(text);
    BOOST_TEST(back->step() == 41u);
    BOOST_TEST(back->training() == training);
    BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
    for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(same_bits(back->node(i).value(), g.node(i).value()), "node " << i);
    g.set_step(42);
    back->set_step(42);
    g.replay();
    back->replay();
    for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(same_bits(back->node(i).value(), g.node(i).value()), "node " << i);
  }
  // A graph in the default state writes neither key.
  Graph<double> plain;
  xgrad::dropout(plain.input("x", ones<double>(3)), 0.5, 1);
  const std::string text = to_json(plain, ExportValues::all).dump();
  BOOST_TEST(text.find("\"step\"") == std::string::npos);
  BOOST_TEST(text.find("\"training\"") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(import_refuses_a_bad_step_or_mode) {
  Graph<double> g;
  xgrad::dropout(g.input("x", ones<double>(3)), 0.5, 1);
  const Json j = to_json(g, ExportValues::all);
  const auto refuses = [&](const char* key, Json value, const std::string& message) {
    Json bad = j;
    bad[key] = std::move(value);
    check_error([&] { graph_from_json<double>(bad.dump()); }, {message});
  };
  refuses("step", -1, "graph JSON: step: expected an integer from 0 to 18446744073709551615, got -1");
  refuses("step", "1", "graph JSON: step: expected an integer from 0 to 18446744073709551615, got string");
  refuses("training", 1, "graph JSON: training: expected true or false, got number");
  const std::string edited = "{\"step\":18446744073709551616," + j.dump().substr(1);
  check_error([&] { graph_from_json<double>(edited); }, {"graph JSON: step: expected an integer from 0 to 18446744073709551615, got 1.8446744073709552e+19"});
  const Json max = [&] {
    Json k = j;
    k["step"] = std::numeric_limits<std::uint64_t>::max();
    return k;
  }();
  BOOST_TEST(graph_from_json<double>(max.dump())->step() == std::numeric_limits<std::uint64_t>::max());
}

BOOST_AUTO_TEST_SUITE_END()
