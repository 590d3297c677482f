#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(sum_to)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const xt::xarray<double> rows = matrix<double>({{6}, {15}});
  const xt::xarray<double> cols = {5, 7, 9};
  const xt::xarray<double> same = {{1, 2, 3}, {4, 5, 6}};
  BOOST_TEST(xgrad::sum_to(x, {2, 1}).value() == rows);
  BOOST_TEST(xgrad::sum_to(x, {3}).value() == cols);
  BOOST_TEST(xgrad::sum_to(x, {2, 3}).value() == same);
  BOOST_TEST(xgrad::sum_to(x, {1, 1}).value() == matrix<double>({{21}}));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(sums_each_element_in_memory_order, T, test::dtypes) {
  // Against a naive loop (each element of x added to y at its multi-index, summed axes dropped,
  // in x's memory order, from -0.0), bit for bit, and against xtensor's reducer (what sum_to ran
  // before) within a rounding: shapes that sum the leading axes (a bias's gradient), the last
  // axis, middle axes, several at once, with axes of 1 and empty ones; inputs with -0.0 (a sum
  // of only -0.0 is -0.0, of nothing +0).
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{16, 64, 128}, {128}},  {{16, 64, 128}, {64, 1}}, {{16, 64, 128}, {1, 1, 1}}, {{4, 5, 6, 7}, {5, 1, 7}},
      {{4, 5, 6, 7}, {4, 1, 6, 1}}, {{3, 1, 5}, {1, 1}}, {{3, 0, 5}, {5}},           {{7}, {1}},
      {{2, 3}, {2, 3}},        {{}, {}},                 {{9, 1}, {9, 1}},         {{300, 33}, {33}}};
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  std::uint64_t seed = 1;
  for (const auto& [from, to] : cases) {
    BOOST_TEST_CONTEXT(shape_str(from) << " -> " << shape_str(to)) {
      Graph<T> g;
      xt::xarray<T> value = random_array<T>(from, seed++);
      for (std::size_t i = 0; i < value.size(); i += 3) value.data()[i] = T(-0.0);
      if (value.size() == 7) value.fill(T(-0.0));
      const auto y = xgrad::sum_to(g.input("x", value), to).value();
      const std::size_t lead = from.size() - to.size();
      xt::xarray<T> naive = xt::xarray<T>::from_shape(to);
      naive.fill(value.size() ? T(-0.0) : T(0));
      for (std::size_t f = 0; f < value.size(); ++f) {
        std::size_t rest = f, at = 0, stride = 1;
        for (std::size_t i = from.size(); i-- > 0;) {
          const std::size_t index = rest % from[i];
          rest /= from[i];
          if (i >= lead) {
            if (to[i - lead] != 1) at += index * stride;
            stride *= to[i - lead];
          }
        }
        naive.data()[at] += value.data()[f];
      }
      BOOST_TEST(same_bits(y, naive));
      std::vector<std::size_t> axes;
      for (std::size_t i = 0; i < from.size(); ++i) {
        if (i < lead || (to[i - lead] == 1 && from[i] != 1)) axes.push_back(i);
      }
      if (!axes.empty() && value.size() > 0) {
        const xt::xarray<T> before = xt::sum(value, axes, xt::evaluation_strategy::immediate);
        for (std::size_t i = 0; i < y.size(); ++i) {
          BOOST_TEST(std::abs(y.data()[i] - before.data()[i]) <= tolerance * (1 + std::abs(before.data()[i])));
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  check_gradients(xgrad::sum_to(x, {3, 1}), {x});
  check_gradients(xgrad::sum_to(x, {1, 1, 4}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::sum_to(x, {2}); }, {"sum_to (node 1)", "x (2, 3)", "(2,)"});
  check_error([&] { xgrad::sum_to(x, {1, 2, 3}); }, {"x (2, 3)", "(1, 2, 3)"});
}

// Issue 15 (class 7): summing an empty x (0, 2^15, 2^15) to (1, 2^15, 2^15) would make 2^30
// zeros; refused in infer_shape.
BOOST_AUTO_TEST_CASE(refuses_a_target_of_too_many_elements) {
  Graph<double> g;
  const std::size_t n = std::size_t(1) << 15;
  const auto x = g.input("x", xt::xarray<double>::from_shape({0, n, n}));
  check_error([&] { xgrad::sum_to(x, {1, n, n}); },
              {"sum_to (node 1): summing x (0, 32768, 32768) to (1, 32768, 32768) makes more than 268435456 elements"});
  BOOST_TEST(g.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
