// The vectorisable exp of the row kernels, and the row kernels themselves.
#include "../../check.hpp"

#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/kernels/vexp.hpp>

using xgrad::detail::vexp;

namespace {

// |a - b| in units of the last place of b.
template <class T>
double ulps(T a, T b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b) || std::isinf(a) || std::isinf(b)) return 1e30;
  const T ulp = std::nextafter(std::abs(b), std::numeric_limits<T>::infinity()) - std::abs(b);
  return std::abs(static_cast<double>(a) - static_cast<double>(b)) / static_cast<double>(ulp);
}

// The worst error against std::exp on an even grid of [lo, hi] (covering underflow to subnormals
// and to 0, and overflow to inf at the ends).
template <class T>
double worst_ulps(double lo, double hi, int steps) {
  double worst = 0;
  for (int i = 0; i <= steps; ++i) {
    const T x = static_cast<T>(lo + (hi - lo) * i / steps);
    worst = std::max(worst, ulps(vexp(x), std::exp(x)));
  }
  return worst;
}

// row_exp, or portable_row_exp (what CPUs without AVX-512F run).
template <class T>
auto row_exp_of(bool portable) {
  using Pass = T (*)(const T*, T, T*, std::size_t, std::size_t);
  return portable ? Pass(xgrad::detail::portable_row_exp) : Pass(xgrad::detail::row_exp);
}

// The same through row_exp (shift 0), the pass softmax runs: the AVX-512 form on CPUs that have
// it, else vexp. Every `stride`-th element of a row of `steps` grid points.
template <class T>
double worst_row_ulps(double lo, double hi, std::size_t steps, std::size_t stride, bool portable = false) {
  std::vector<T> x(steps * stride), y(steps * stride);
  for (std::size_t i = 0; i < steps; ++i) x[i * stride] = static_cast<T>(lo + (hi - lo) * double(i) / double(steps - 1));
  row_exp_of<T>(portable)(x.data(), T(0), y.data(), steps, stride);
  double worst = 0;
  for (std::size_t i = 0; i < steps; ++i) worst = std::max(worst, ulps(y[i * stride], std::exp(x[i * stride])));
  return worst;
}

// row_exp (or portable_row_exp) of the special values and near the ends of the range, contiguous
// and at a stride of 2.
template <class T>
void check_row_exp_special_values(bool portable) {
  const T inf = std::numeric_limits<T>::infinity();
  const bool f = sizeof(T) == sizeof(float);
  const std::vector<T> x = {-inf, inf, std::numeric_limits<T>::quiet_NaN(), 0, T(-0.0), T(f ? 89 : 710),
                            T(f ? -105 : -746), T(f ? -103.5 : -740), T(f ? 88.7 : 709.7), T(f ? -87.5 : -707.5),
                            T(f ? -103.9 : -745.1)};
  for (std::size_t stride : {1, 2}) {
    std::vector<T> xs(x.size() * stride), ys(x.size() * stride);
    for (std::size_t i = 0; i < x.size(); ++i) xs[i * stride] = x[i];
    row_exp_of<T>(portable)(xs.data(), T(0), ys.data(), x.size(), stride);
    for (std::size_t i = 0; i < x.size(); ++i) {
      const T y = ys[i * stride], want = std::exp(x[i]);
      if (std::isnan(want)) {
        BOOST_TEST(std::isnan(y), "exp(" << x[i] << ") at stride " << stride);
      } else if (std::isnormal(want)) {  // near the ends of the range: the bounds above
        BOOST_TEST(ulps(y, want) <= (f ? 1.0 : 2.0), "exp(" << x[i] << ") at stride " << stride);
      } else {  // 0, +inf, and subnormal results rounded once: exact
        BOOST_TEST(y == want, "exp(" << x[i] << ") at stride " << stride << " = " << y << ", std::exp " << want);
      }
    }
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(row_kernels)

BOOST_AUTO_TEST_CASE(float_is_within_one_ulp_of_std_exp_over_its_whole_range) {
  BOOST_TEST(worst_ulps<float>(-110, 90, 2000000) <= 1.0);
  BOOST_TEST(worst_ulps<float>(-1, 1, 200000) <= 1.0);
}

BOOST_AUTO_TEST_CASE(double_is_within_two_ulp_of_std_exp_over_its_whole_range) {
  BOOST_TEST(worst_ulps<double>(-750, 712, 2000000) <= 2.0);
  BOOST_TEST(worst_ulps<double>(-1, 1, 200000) <= 2.0);
}

BOOST_AUTO_TEST_CASE(special_values_are_exact) {
  const float fi = std::numeric_limits<float>::infinity();
  const double di = std::numeric_limits<double>::infinity();
  BOOST_TEST(vexp(-fi) == 0.0f);
  BOOST_TEST(vexp(fi) == fi);
  BOOST_TEST(std::isnan(vexp(std::nanf(""))));
  BOOST_TEST(vexp(0.0f) == 1.0f);
  BOOST_TEST(vexp(-0.0f) == 1.0f);
  BOOST_TEST(vexp(-di) == 0.0);
  BOOST_TEST(vexp(di) == di);
  BOOST_TEST(std::isnan(vexp(std::nan(""))));
  BOOST_TEST(vexp(0.0) == 1.0);
  BOOST_TEST(vexp(89.0f) == fi);    // overflow
  BOOST_TEST(vexp(710.0) == di);
  BOOST_TEST(vexp(-105.0f) == 0.0f);  // underflow past the least subnormal
  BOOST_TEST(vexp(-746.0) == 0.0);
  BOOST_TEST(vexp(-103.5f) == std::exp(-103.5f));  // subnormal results round once, as std::exp
  BOOST_TEST(vexp(-740.0) == std::exp(-740.0));
}

BOOST_AUTO_TEST_CASE(row_exp_keeps_the_bounds_of_vexp_over_the_whole_range) {
  for (bool portable : {false, true}) {
    BOOST_TEST_CONTEXT((portable ? "portable_row_exp" : "row_exp")) {
      BOOST_TEST(worst_row_ulps<float>(-110, 90, 2000001, 1, portable) <= 1.0);
      BOOST_TEST(worst_row_ulps<float>(-1, 1, 200001, 1, portable) <= 1.0);
      BOOST_TEST(worst_row_ulps<float>(-110, 90, 200003, 3, portable) <= 1.0);
      BOOST_TEST(worst_row_ulps<double>(-750, 712, 2000001, 1, portable) <= 2.0);
      BOOST_TEST(worst_row_ulps<double>(-1, 1, 200001, 1, portable) <= 2.0);
      BOOST_TEST(worst_row_ulps<double>(-750, 712, 200003, 3, portable) <= 2.0);
      check_row_exp_special_values<float>(portable);
      check_row_exp_special_values<double>(portable);
    }
  }
}

BOOST_AUTO_TEST_CASE(row_exp_agrees_with_the_portable_form_on_every_tail_and_in_place) {
  // Rows of 0 to 40 elements (every tail of 8 and 16 lanes), random shifts, out of place and
  // with y = x: elements within the exp bounds of each other, sums within rounding.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  if (!__builtin_cpu_supports("avx512f")) BOOST_TEST_MESSAGE("no AVX-512F here: row_exp runs the portable form");
#endif
  const auto check = [](auto zero) {
    using T = decltype(zero);
    const double bound = sizeof(T) == sizeof(float) ? 2.0 : 4.0, sum_tolerance = sizeof(T) == sizeof(float) ? 1e-6 : 1e-14;
    for (std::size_t n = 0; n <= 40; ++n) {
      const xt::xarray<double> x = random_array<double>({n + 1}, 100 + n, 8.0);
      const T shift = static_cast<T>(x(n));
      std::vector<T> in(n), y(n), z(n), inplace(n);
      for (std::size_t i = 0; i < n; ++i) in[i] = inplace[i] = static_cast<T>(x(i));
      const T sum = xgrad::detail::row_exp(in.data(), shift, y.data(), n, 1);
      const T sum_portable = xgrad::detail::portable_row_exp(in.data(), shift, z.data(), n, 1);
      const T sum_inplace = xgrad::detail::row_exp(inplace.data(), shift, inplace.data(), n, 1);
      BOOST_TEST(sum_inplace == sum, "n = " << n);
      BOOST_TEST(double(sum) == double(sum_portable), boost::test_tools::tolerance(sum_tolerance));
      for (std::size_t i = 0; i < n; ++i) {
        BOOST_TEST(inplace[i] == y[i], "n = " << n << ", element " << i);
        BOOST_TEST(ulps(y[i], z[i]) <= bound, "n = " << n << ", element " << i << ": " << y[i] << " vs " << z[i]);
      }
      if (n == 0) BOOST_TEST(sum == T(0));
    }
  };
  check(0.0f);
  check(0.0);
}

BOOST_AUTO_TEST_CASE(contiguous_and_strided_rows_agree) {
  // The same row read contiguously and at a stride of 3 (plain loops, except row_exp on AVX-512,
  // which runs strided rows through its vector code).
  const std::size_t n = 37;
  const xt::xarray<double> x = random_array<double>({n}, 1, 5.0);
  std::vector<double> strided(3 * n), y(n), ys(3 * n);
  for (std::size_t i = 0; i < n; ++i) strided[3 * i] = x(i);
  namespace d = xgrad::detail;
  BOOST_TEST(d::row_max(x.data(), n, 1) == d::row_max(strided.data(), n, 3));
  double reference_max = -INFINITY, reference_sum = 0;
  for (double e : x) reference_max = std::max(reference_max, e);
  for (double e : x) reference_sum += std::exp(e - reference_max);
  BOOST_TEST(d::row_max(x.data(), n, 1) == reference_max);
  const double sum = d::row_exp(x.data(), reference_max, y.data(), n, 1);
  const double sum_s = d::row_exp(strided.data(), reference_max, ys.data(), n, 3);
  BOOST_TEST(sum == reference_sum, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(sum_s == reference_sum, boost::test_tools::tolerance(1e-14));
  for (std::size_t i = 0; i < n; ++i) {
    BOOST_TEST(y[i] == std::exp(x(i) - reference_max), boost::test_tools::tolerance(1e-15));
    BOOST_TEST(ys[3 * i] == y[i]);
  }
  double dot = 0;
  for (std::size_t i = 0; i < n; ++i) dot += x(i) * y[i];
  BOOST_TEST(d::row_dot(x.data(), y.data(), n, 1) == dot, boost::test_tools::tolerance(1e-14));
  BOOST_TEST(d::row_dot(strided.data(), ys.data(), n, 3) == dot, boost::test_tools::tolerance(1e-14));
}

BOOST_AUTO_TEST_CASE(rows_split_over_threads_give_the_same_bits) {
  // 256 x 512 = 131072 elements: above the size at which the passes are split over threads.
  test::BlasThreads threads_set(1);
  std::vector<xt::xarray<float>> values[2];
  for (int threads : {1, 2}) {
    threads_set.set(threads);
    BOOST_TEST_REQUIRE(xgrad::detail::parallel_threads() == std::size_t(threads));
    Graph<float> g;
    const auto x = g.input("x", random_array<float>({256, 512}, 1, 3.0));
    const auto u = g.input("u", random_array<float>({256, 512}, 2));
    const auto y = xgrad::softmax(xgrad::scale(x, 0.7));
    const auto l = xgrad::log_softmax(x, 0);  // strided rows
    const auto gx = grad(y, {x}, u)[0];
    for (const auto& v : {y, l, gx}) values[threads - 1].push_back(v.value());
  }
  for (std::size_t i = 0; i < values[0].size(); ++i) {
    BOOST_TEST(same_bits(values[0][i], values[1][i]), "value " << i);
  }
}

BOOST_AUTO_TEST_CASE(adam_update_has_the_bits_of_the_scalar_formula) {
  // The vectorised pass against the formula one element at a time (as Adam ran before it was
  // vectorised), every length up to 70 (whole vectors and tails), with and without weight decay.
  const auto check = [](auto zero) {
    using T = decltype(zero);
    for (const double decay : {1.0, 1 - 1e-3 * 0.1}) {
      xgrad::detail::AdamCoefficients<T> c;
      c.decay = T(decay);
      c.beta1 = T(0.9);
      c.one_minus_beta1 = T(1 - 0.9);
      c.beta2 = T(0.99);
      c.one_minus_beta2 = T(1 - 0.99);
      c.bias_correction2_sqrt = T(std::sqrt(1 - 0.99 * 0.99));
      c.eps = T(1e-8);
      c.step_size = T(-1e-3 / (1 - 0.9 * 0.9));
      for (std::size_t n = 0; n <= 70; ++n) {
        const xt::xarray<double> r = random_array<double>({n + 1, 4}, n + 1);
        std::vector<T> p(n), g(n), m(n), v(n);
        for (std::size_t j = 0; j < n; ++j) {
          p[j] = T(r(j, 0));
          g[j] = T(r(j, 1));
          m[j] = T(r(j, 2) * 0.1);
          v[j] = T(std::abs(r(j, 3)) * 0.01);
        }
        std::vector<T> ep = p, em = m, ev = v;
        for (std::size_t j = 0; j < n; ++j) {
          ep[j] *= c.decay;
          em[j] = em[j] * c.beta1 + c.one_minus_beta1 * g[j];
          ev[j] = ev[j] * c.beta2 + c.one_minus_beta2 * g[j] * g[j];
          const T denom = std::sqrt(ev[j]) / c.bias_correction2_sqrt + c.eps;
          ep[j] = ep[j] + c.step_size * em[j] / denom;
        }
        xgrad::detail::row_adam(p.data(), g.data(), m.data(), v.data(), n, c);
        for (std::size_t j = 0; j < n; ++j) {
          BOOST_TEST((same_bits(p[j], ep[j]) && same_bits(m[j], em[j]) && same_bits(v[j], ev[j])),
                     "element " << j << " of " << n << ", decay " << decay);
        }
      }
    }
  };
  check(0.0f);
  check(0.0);
}

BOOST_AUTO_TEST_SUITE_END()
