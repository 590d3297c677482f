// Extremal values and determinism: NaN and infinities propagate as in a float64 reference,
// saturated and underflowing softmax rows stay exact, and repeated backward passes are
// bit-identical (with one OpenBLAS thread, as ctest runs them).
#include "../check.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include <xtensor/xmath.hpp>

namespace {

constexpr double inf = std::numeric_limits<double>::infinity();

// softmax(q k^T / sqrt(d_k)) v in plain float64 loops, rows stable as in the spec; a row of only
// -inf scores gives weights of 0, as xgrad defines it.
xt::xarray<double> reference_attention(const xt::xarray<double>& q, const xt::xarray<double>& k,
                                       const xt::xarray<double>& v) {
  const std::size_t tq = q.shape()[0], tk = k.shape()[0], dk = q.shape()[1], dv = v.shape()[1];
  xt::xarray<double> out = xt::zeros<double>({tq, dv});
  for (std::size_t i = 0; i < tq; ++i) {
    std::vector<double> s(tk);
    double m = -inf, sum = 0;
    for (std::size_t j = 0; j < tk; ++j) {
      for (std::size_t l = 0; l < dk; ++l) s[j] += q(i, l) * k(j, l);
      s[j] /= std::sqrt(static_cast<double>(dk));
      m = std::max(m, s[j]);
    }
    if (m == -inf && std::none_of(s.begin(), s.end(), [](double x) { return std::isnan(x); })) continue;  // zeros
    for (auto& x : s) sum += (x = std::exp(x - m));
    for (std::size_t j = 0; j < tk; ++j) {
      for (std::size_t c = 0; c < dv; ++c) out(i, c) += s[j] / sum * v(j, c);
    }
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(extremal)

BOOST_AUTO_TEST_CASE(nan_and_infinities_give_the_reference_nan_pattern) {
  const double specials[] = {std::nan(""), inf, -inf};
  int cases = 0, nans = 0;
  for (int c = 0; c < 60; ++c) {
    xt::xarray<double> q = random_array<double>({3, 4}, 100 + c), k = random_array<double>({5, 4}, 200 + c),
                       v = random_array<double>({5, 2}, 300 + c);
    xt::xarray<double>* arrays[] = {&q, &k, &v};
    std::mt19937_64 rng(static_cast<std::uint64_t>(c));
    for (int n = 0; n < 1 + c % 3; ++n) {  // one to three special values at random places
      xt::xarray<double>& a = *arrays[rng() % 3];
      a.data()[rng() % a.size()] = specials[rng() % 3];
    }
    const xt::xarray<double> expected = reference_attention(q, k, v);
    for (int dtype = 0; dtype < 2; ++dtype) {
      xt::xarray<double> got;
      if (dtype == 0) {
        Graph<double> g;
        got = attention(g.input("q", q), g.input("k", k), g.input("v", v)).value();
      } else {
        Graph<float> g;
        got = xt::cast<double>(attention(g.input("q", xt::cast<float>(q)), g.input("k", xt::cast<float>(k)),
                                         g.input("v", xt::cast<float>(v))).value());
      }
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double e = expected.data()[i], x = got.data()[i];
        BOOST_TEST(std::isnan(x) == std::isnan(e), "case " << c << " dtype " << dtype << " element " << i << ": " << x << " vs " << e);
        if (!std::isnan(e) && std::isfinite(e)) BOOST_TEST(x == e, boost::test_tools::tolerance(dtype ? 1e-4 : 1e-12));
        if (std::isinf(e)) BOOST_TEST(x == e);
        nans += std::isnan(e);
      }
    }
    ++cases;
  }
  BOOST_TEST(nans > 50);  // the cases do exercise NaN
}

BOOST_AUTO_TEST_CASE(scores_of_1e30_in_float32_give_weights_summing_to_one) {
  for (float magnitude : {1e20f, 1e30f, 3e38f}) {
    Graph<float> g;
    // Finite scores up to `magnitude`; near FLT_MAX, x - max(x) itself overflows to -inf.
    xt::xarray<float> s = random_array<float>({6, 9}, 7);
    s = s / xt::amax(xt::abs(s))() * magnitude;
    BOOST_TEST_REQUIRE(xt::all(xt::isfinite(s)));
    const auto w = softmax(g.input("scores", s));
    BOOST_TEST(!xt::any(xt::isnan(w.value())), "magnitude " << magnitude);
    const xt::xarray<float> sums = xt::sum(w.value(), {1}, xt::evaluation_strategy::immediate);
    for (float x : sums) BOOST_TEST(x == 1.0f, boost::test_tools::tolerance(1e-6f));
    const auto gs = grad(w, {g.var(0)}, xt::xarray<float>(random_array<float>({6, 9}, 8)))[0];
    BOOST_TEST(!xt::any(xt::isnan(gs.value())));
  }
}

BOOST_AUTO_TEST_CASE(underflowing_exponents_in_float32) {
  // exp(-100) is a float32 subnormal; exp(-200) underflows to 0. Neither gives NaN, and an
  // underflowed weight has a gradient of exactly 0.
  Graph<float> g;
  const auto x = g.input("x", {{0.0f, -100.0f, -200.0f}});
  const auto y = softmax(x);
  const auto& w = y.value();
  BOOST_TEST(w(0, 0) == 1.0f);
  BOOST_TEST(w(0, 1) > 0.0f);
  BOOST_TEST(std::fpclassify(w(0, 1)) == FP_SUBNORMAL);
  BOOST_TEST(std::abs(w(0, 1) - static_cast<float>(std::exp(-100.0))) <= std::numeric_limits<float>::denorm_min());
  BOOST_TEST(w(0, 2) == 0.0f);
  const auto gx = grad(y, {x}, xt::xarray<float>{{1.0f, 2.0f, 3.0f}})[0];
  BOOST_TEST(gx.value()(0, 2) == 0.0f);
  BOOST_TEST(!xt::any(xt::isnan(gx.value())));
}

BOOST_AUTO_TEST_CASE(subnormal_inputs_are_handled) {
  const float tiny = std::numeric_limits<float>::denorm_min() * 7;
  Graph<float> g;
  const auto q = g.input("q", {{tiny, -tiny}, {0.0f, tiny}});
  const auto k = g.input("k", {{tiny, tiny}, {1.0f, -1.0f}});
  const auto v = g.input("v", {{1.0f, 2.0f}, {3.0f, 4.0f}});
  const auto out = attention(q, k, v);
  // Scores of ~1e-45 leave the weights at 1/2: the average of the values.
  BOOST_TEST(out.value() == (xt::xarray<float>{{2.0f, 3.0f}, {2.0f, 3.0f}}), boost::test_tools::per_element());
  for (const auto& gr : grad(out, {q, k, v})) BOOST_TEST(xt::all(xt::isfinite(gr.value())));
}

BOOST_AUTO_TEST_CASE(two_equal_scores_split_exactly_in_half_at_every_scale) {
  for (double s = 1e-30; s <= 1e30; s *= 1000) {
    Graph<float> g;
    // q k^T gives the same score s for both keys.
    const auto q = g.input("q", {{static_cast<float>(s)}});
    const auto k = g.input("k", {{1.0f}, {1.0f}});
    const auto v = g.input("v", {{2.0f}, {6.0f}});
    const auto a = attention_nodes(q, k, v);
    BOOST_TEST(a.weights.value()(0, 0) == 0.5f, "scale " << s);
    BOOST_TEST(a.weights.value()(0, 1) == 0.5f, "scale " << s);
    BOOST_TEST(a.output.value()(0, 0) == 4.0f);
  }
}

BOOST_AUTO_TEST_CASE(backward_passes_are_bit_identical) {
  // One OpenBLAS thread (the test environment's OPENBLAS_NUM_THREADS=1): two backward passes of
  // one graph, and a replay, give the same bits. With more threads OpenBLAS may split GEMMs
  // differently, which can change the last bits (see docs/testing.md, Determinism).
  for (int dtype = 0; dtype < 2; ++dtype) {
    const auto run = [&](auto tag) {
      using T = decltype(tag);
      Graph<T> g;
      const auto q = g.input("q", random_array<T>({2, 96, 64}, 1));
      const auto k = g.input("k", random_array<T>({2, 128, 64}, 2));
      const auto v = g.input("v", random_array<T>({2, 128, 32}, 3));
      const auto out = attention(q, k, v);
      const auto first = grad(out, {q, k, v});
      const auto second = grad(out, {q, k, v});
      std::vector<xt::xarray<T>> before;
      for (int i = 0; i < 3; ++i) {
        BOOST_TEST(same_bits(first[i].value(), second[i].value()), "grad " << i);
        before.push_back(first[i].value());
      }
      g.replay();
      for (int i = 0; i < 3; ++i) BOOST_TEST(same_bits(first[i].value(), before[i]), "replayed grad " << i);
    };
    if (dtype == 0) run(float{});
    else run(double{});
  }
}

BOOST_AUTO_TEST_SUITE_END()
