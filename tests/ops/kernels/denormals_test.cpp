// set_flush_denormal (ops/kernels/blas.hpp): subnormal results become 0 and subnormal inputs read
// as 0, on the calling thread and on the pool's workers, and off again gives IEEE arithmetic back;
// collapsed attention computed with it differs from IEEE's only below float's smallest normal.
#include "../../check.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace xgrad;

namespace {

#if defined(__x86_64__)

// Turns flush-to-zero off again however a test ends.
struct FlushOff {
  ~FlushOff() { set_flush_denormal(false); }
};

// Read from the bits: with flush-to-zero on, the CPU reads a subnormal as 0 (DAZ), so
// std::fpclassify would too.
template <class T>
bool is_subnormal(T v) {
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr int mantissa = std::numeric_limits<T>::digits - 1;
  U bits;
  std::memcpy(&bits, &v, sizeof bits);
  const U exponent = (bits >> mantissa) & ((U(1) << (sizeof(T) * 8 - 1 - mantissa)) - 1);
  return exponent == 0 && (bits & ((U(1) << mantissa) - 1)) != 0;
}

// +-0 by its bits (a subnormal compares equal to 0 while flush-to-zero is on).
template <class T>
bool is_zero(T v) {
  return v == T(0) && !is_subnormal(v);
}

template <class T>
std::size_t subnormals(const T* begin, const T* end) {
  return static_cast<std::size_t>(std::count_if(begin, end, [](T v) { return is_subnormal(v); }));
}

template <class T>
std::size_t subnormals(const xt::xarray<T>& a) {
  return subnormals(a.data(), a.data() + a.size());
}

// Over every output of every node.
template <class T>
std::size_t subnormals(const Graph<T>& g) {
  std::size_t n = 0;
  for (std::size_t id = 0; id < g.size(); ++id) {
    for (std::size_t o = 0; o < g.node(id).output_count(); ++o) n += subnormals(g.node(id).value(o));
  }
  return n;
}

#endif

}  // namespace

BOOST_AUTO_TEST_SUITE(denormals)

#if defined(__x86_64__)

BOOST_AUTO_TEST_CASE(subnormal_results_and_inputs_are_zero_while_it_is_on) {
  FlushOff off;
  test::BlasThreads threads(1);
  Graph<float> g;
  // 1e-20 squared is 1e-40, a subnormal float; 1e-40 itself is a subnormal input.
  const auto x = g.input("x", xt::xarray<float>{1e-20f, -3e-20f, 1.5f});
  const auto s = g.input("s", xt::xarray<float>{1e-40f, 2.0f});
  const auto sq = mul(x, x);
  const auto twice = scale(s, 2.0);
  BOOST_TEST(sq.value()(0) == 1e-20f * 1e-20f);
  BOOST_TEST(is_subnormal(sq.value()(0)));
  BOOST_TEST(twice.value()(0) == 1e-40f * 2.0f);

  BOOST_TEST(!flush_denormal());
  BOOST_TEST(set_flush_denormal(true));
  BOOST_TEST(flush_denormal());
  g.replay();
  BOOST_TEST(is_zero(sq.value()(0)));
  BOOST_TEST(is_zero(sq.value()(1)));
  BOOST_TEST(sq.value()(2) == 2.25f);  // normal values as before
  BOOST_TEST(is_zero(twice.value()(0)));
  BOOST_TEST(twice.value()(1) == 4.0f);

  BOOST_TEST(set_flush_denormal(false));
  BOOST_TEST(!flush_denormal());
  g.replay();
  BOOST_TEST(sq.value()(0) == 1e-20f * 1e-20f);
  BOOST_TEST(twice.value()(0) == 1e-40f * 2.0f);
}

BOOST_AUTO_TEST_CASE(the_workers_flush_too) {
  // A pass long enough for the pool to split over 2 threads: the worker's half follows the mode
  // as it is switched, whichever mode the worker started in (a thread starts in its creator's).
  FlushOff off;
  test::BlasThreads threads(2);
  Graph<double> g;
  const std::size_t n = std::size_t(1) << 20;
  const auto x = g.input("x", xt::xarray<double>(xt::ones<double>({n}) * 1e-160));
  const auto sq = mul(x, x);  // 1e-320: subnormal in float64
  for (const bool on : {false, true, false, true}) {
    BOOST_TEST_CONTEXT("flush " << on) {
      set_flush_denormal(on);
      g.replay();  // the pool's worker exists from the first replay on
      const double* y = sq.value().data();
      BOOST_TEST(subnormals(y, y + n / 2) == (on ? 0 : n / 2));
      BOOST_TEST(subnormals(y + n / 2, y + n) == (on ? 0 : n / 2));
    }
  }
}

BOOST_AUTO_TEST_CASE(collapsed_attention_changes_only_below_the_smallest_normal) {
  // Scores of spread ~ 100 (q and k scaled up): most weights underflow, as in a collapsed head.
  // With flush-to-zero no value of the graph is subnormal, and every value and gradient is the
  // IEEE one or differs from it by less than T times float's smallest normal (each output sums T
  // weighted terms, of which a flushed one was below it).
  FlushOff off;
  test::BlasThreads threads(1);
  const std::size_t t = 32, d = 16;
  Graph<float> g;
  xt::xarray<float> qv = random_array<float>({2, t, d}, 1), kv = random_array<float>({2, t, d}, 2);
  qv *= 12.0f;
  kv *= 12.0f;
  const auto q = g.input("q", qv), k = g.input("k", kv), v = g.input("v", random_array<float>({2, t, d}, 3));
  const auto y = attention(q, k, v);
  const auto grads = grad(y, {q, k, v}, random_array<float>({2, t, d}, 4));
  std::vector<xt::xarray<float>> ieee{y.value()};
  for (const auto& gr : grads) ieee.push_back(gr.value());
  BOOST_TEST(subnormals(g) > 100u);  // the case exercises what it checks

  set_flush_denormal(true);
  g.replay();
  BOOST_TEST(subnormals(g) == 0u);
  std::vector<xt::xarray<float>> flushed{y.value()};
  for (const auto& gr : grads) flushed.push_back(gr.value());
  set_flush_denormal(false);  // compared in IEEE arithmetic (DAZ would read the subnormals as 0)
  const double bound = static_cast<double>(t) * std::numeric_limits<float>::min();
  for (std::size_t i = 0; i < ieee.size(); ++i) {
    BOOST_TEST_CONTEXT("result " << i) {
      const double diff = xt::amax(xt::abs(xt::cast<double>(ieee[i]) - xt::cast<double>(flushed[i])))();
      BOOST_TEST(diff <= bound);
    }
  }
}

#else

BOOST_AUTO_TEST_CASE(refused_where_the_cpu_has_no_such_mode) {
  BOOST_TEST(!set_flush_denormal(true));
  BOOST_TEST(!flush_denormal());
  BOOST_TEST(set_flush_denormal(false));
}

#endif

BOOST_AUTO_TEST_SUITE_END()
