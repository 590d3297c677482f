// erf, tanh, sin and cos over arrays (ops/kernels/vector_math.hpp): accuracy, IEEE edges, and
// bits that do not depend on an element's place in the array.
#include "../../check.hpp"

#include <xgrad/ops/kernels/vector_math.hpp>

using xgrad::detail::vector_cos;
using xgrad::detail::vector_erf;
using xgrad::detail::vector_sin;
using xgrad::detail::vector_tanh;

namespace {

// |a - b| in units of the last place of b.
template <class T>
double ulps(T a, T b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b)) return 1e30;
  const T ulp = std::nextafter(std::abs(b), std::numeric_limits<T>::infinity()) - std::abs(b);
  return std::abs(static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(ulp);
}

// An even grid of n points over [lo, hi].
template <class T>
std::vector<T> grid(double lo, double hi, std::size_t n) {
  std::vector<T> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<T>(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(n - 1));
  return x;
}

// The worst ulps of vector_f over x against f in the wider type W, rounded to T (tanh unless said).
template <class T, class W>
double worst_ulps(const std::vector<T>& x, void (*vector_f)(const T*, T*, std::size_t) = vector_tanh,
                  W (*f)(W) = std::tanh) {
  std::vector<T> y(x.size());
  vector_f(x.data(), y.data(), x.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, ulps(y[i], static_cast<T>(f(W(x[i])))));
  return worst;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(vector_math_kernel)

BOOST_AUTO_TEST_CASE(float_is_within_two_ulp_of_the_correctly_rounded_erf) {
  // float's erf rounded from double's, which is far more accurate than a float ulp. The grid
  // covers the polynomial ranges and the saturation to +-1 (|x| > 3.9); then tiny values
  // (erf(x) = 2 x / sqrt(pi) to float precision) and subnormals.
  const double worst = worst_ulps<float, double>(grid<float>(-7, 7, 2000001), vector_erf, std::erf);
  BOOST_TEST_MESSAGE("vector_erf, float: " << worst << " ulp");
  BOOST_TEST(worst <= 2.0);
  const double tiny =
      worst_ulps<float, double>({1e-30f, -3e-20f, 1e-40f, std::numeric_limits<float>::denorm_min()}, vector_erf, std::erf);
  BOOST_TEST(tiny <= 2.0);
}

BOOST_AUTO_TEST_CASE(double_erf_is_within_5e_16_relative_of_std_erf) {
  const std::vector<double> x = grid<double>(-7, 7, 2000001);
  std::vector<double> y(x.size());
  vector_erf(x.data(), y.data(), x.size());
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] != 0) worst = std::max(worst, std::abs(y[i] - std::erf(x[i])) / std::abs(std::erf(x[i])));
  }
  BOOST_TEST(worst <= 5e-16);
}

BOOST_AUTO_TEST_CASE(float_is_within_two_ulp_of_the_correctly_rounded_tanh) {
  // float's tanh rounded from double's. The grid covers the small arguments (tanh x ~ x), the
  // middle and the saturation to +-1 (|x| > 9); then tiny values and subnormals.
  const double worst = worst_ulps<float, double>(grid<float>(-12, 12, 2000001));
  BOOST_TEST_MESSAGE("vector_tanh, float: " << worst << " ulp");
  BOOST_TEST(worst <= 2.0);
  const double small = worst_ulps<float, double>(grid<float>(-1e-3, 1e-3, 100001));
  BOOST_TEST(small <= 2.0);
  const double tiny = worst_ulps<float, double>({1e-30f, -3e-20f, 1e-40f, std::numeric_limits<float>::denorm_min()});
  BOOST_TEST(tiny <= 2.0);
}

BOOST_AUTO_TEST_CASE(double_is_within_four_ulp_of_tanh_in_long_double) {
  const double worst = worst_ulps<double, long double>(grid<double>(-25, 25, 2000001));
  BOOST_TEST_MESSAGE("vector_tanh, double: " << worst << " ulp");
  BOOST_TEST(worst <= 4.0);
  const double small = worst_ulps<double, long double>(grid<double>(-1e-3, 1e-3, 100001));
  BOOST_TEST(small <= 4.0);
  const double tiny = worst_ulps<double, long double>({1e-300, -3e-200, 1e-310, std::numeric_limits<double>::denorm_min()});
  BOOST_TEST(tiny <= 4.0);
}

// The worst ulps of sin or cos over rope's angles: positions up to thousands times frequencies
// up to 1, and the small angles of its low frequencies (sin near its zeros counts too).
template <class T, class W>
double worst_trig_ulps(void (*vector_f)(const T*, T*, std::size_t), W (*f)(W)) {
  return std::max(worst_ulps<T, W>(grid<T>(-1e4, 1e4, 1000001), vector_f, f),
                  worst_ulps<T, W>(grid<T>(-1, 1, 100001), vector_f, f));
}

BOOST_AUTO_TEST_CASE(sin_and_cos_are_within_two_ulp_in_float_and_four_in_double) {
  const double sin_f = worst_trig_ulps<float, double>(vector_sin, std::sin);
  const double cos_f = worst_trig_ulps<float, double>(vector_cos, std::cos);
  const double sin_d = worst_trig_ulps<double, long double>(vector_sin, std::sin);
  const double cos_d = worst_trig_ulps<double, long double>(vector_cos, std::cos);
  BOOST_TEST_MESSAGE("sin: float " << sin_f << ", double " << sin_d << " ulp; cos: float " << cos_f << ", double "
                                   << cos_d << " ulp");
  BOOST_TEST(sin_f <= 2.0);
  BOOST_TEST(cos_f <= 2.0);
  BOOST_TEST(sin_d <= 4.0);
  BOOST_TEST(cos_d <= 4.0);
}

BOOST_AUTO_TEST_CASE(ieee_edges) {
  const auto check = [](auto zero) {
    using T = decltype(zero);
    const T inf = std::numeric_limits<T>::infinity();
    const std::vector<T> x = {inf, -inf, std::numeric_limits<T>::quiet_NaN(), T(0), -T(0), T(100), T(-100)};
    using F = void (*)(const T*, T*, std::size_t);
    for (const F f : std::initializer_list<F>{vector_erf, vector_tanh}) {  // both odd, saturating to +-1
      std::vector<T> y(x.size());
      f(x.data(), y.data(), x.size());
      BOOST_TEST(y[0] == T(1));
      BOOST_TEST(y[1] == T(-1));
      BOOST_TEST(std::isnan(y[2]));
      BOOST_TEST((y[3] == T(0) && !std::signbit(y[3])));
      BOOST_TEST((y[4] == T(0) && std::signbit(y[4])));
      BOOST_TEST(y[5] == T(1));
      BOOST_TEST(y[6] == T(-1));
    }
    std::vector<T> s(x.size()), c(x.size());
    vector_sin(x.data(), s.data(), x.size());
    vector_cos(x.data(), c.data(), x.size());
    for (std::size_t i = 0; i < 3; ++i) BOOST_TEST((std::isnan(s[i]) && std::isnan(c[i])), "at " << x[i]);
    BOOST_TEST((s[3] == T(0) && !std::signbit(s[3]) && c[3] == T(1)));
    BOOST_TEST((s[4] == T(0) && std::signbit(s[4]) && c[4] == T(1)));
  };
  check(0.0f);
  check(0.0);
}

BOOST_AUTO_TEST_CASE(an_elements_bits_do_not_depend_on_its_place) {
  // Every length up to 20 and every offset (the padded tail, and a chunk of another thread),
  // in place or not, against the same elements of one long call.
  const auto check = [](auto zero) {
    using T = decltype(zero);
    const std::vector<T> x = grid<T>(-3, 3, 64);
    using F = void (*)(const T*, T*, std::size_t);
    for (const F f : std::initializer_list<F>{vector_erf, vector_tanh, vector_sin, vector_cos}) {
      std::vector<T> whole(x.size());
      f(x.data(), whole.data(), x.size());
      for (std::size_t offset = 0; offset < 9; ++offset) {
        for (std::size_t n = 0; n <= 20; ++n) {
          std::vector<T> part(x.begin() + static_cast<long>(offset), x.begin() + static_cast<long>(offset + n));
          f(part.data(), part.data(), n);
          for (std::size_t i = 0; i < n; ++i) BOOST_TEST(same_bits(part[i], whole[offset + i]), "offset " << offset << ", n " << n);
        }
      }
    }
  };
  check(0.0f);
  check(0.0);
}

BOOST_AUTO_TEST_CASE(runs_libmvec_at_the_widest_width_the_cpu_has) {
#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)
  BOOST_TEST(std::string(xgrad::detail::vector_math_kind()) == (__builtin_cpu_supports("avx2") ? "avx2" : "sse2"));
#else
  BOOST_TEST(std::string(xgrad::detail::vector_math_kind()) == "scalar");
#endif
}

BOOST_AUTO_TEST_SUITE_END()
