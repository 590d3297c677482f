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

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  check_gradients(xgrad::sum_to(x, {3, 1}), {x});
  check_gradients(xgrad::sum_to(x, {1, 1, 4}), {x});
}

// The row loop against xtensor's reducer, which it replaced: the same bits, float and double,
// for every kind of target (leading axes dropped, axes kept as 1, the last axis summed, all).
using sum_to_types = boost::mpl::list<float, double>;
BOOST_AUTO_TEST_CASE_TEMPLATE(row_loop_gives_the_reducers_bits, T, sum_to_types) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{16, 64, 128}, {128}},      {{16, 64, 128}, {1, 128}},   {{16, 64, 128}, {16, 1, 128}},
      {{16, 64, 128}, {64, 1}},    {{16, 64, 128}, {}},         {{5, 7}, {5, 1}},
      {{3, 1, 4, 5}, {1, 4, 1}},   {{2, 3, 4}, {2, 3, 4}},      {{9}, {1}},
      {{4, 0, 3}, {1, 3}},         {{4, 0, 3}, {4, 1, 3}},      {{3, 2}, {2}},
  };
  for (const auto& [xs, ys] : cases) {
    BOOST_TEST_CONTEXT("x " << shape_str(xs) << " to " << shape_str(ys)) {
      Graph<T> g;
      xt::xarray<T> value = random_array<T>(xs, 7, 10.0);
      if (value.size() > 3) value.data()[0] = value.data()[1] = value.data()[2] = T(-0.0);
      const Var<T> y = xgrad::sum_to(g.input("x", value), ys);
      // xtensor's reducer over the summed axes (0 for no element), reshaped to the target.
      const std::size_t lead = xs.size() - ys.size();
      std::vector<std::size_t> axes;
      for (std::size_t i = 0; i < xs.size(); ++i) {
        if (i < lead || (ys[i - lead] == 1 && xs[i] != 1)) axes.push_back(i);
      }
      xt::xarray<T> expected = xt::zeros<T>(ys);
      if (value.size() > 0) {
        const xt::xarray<T> reduced = axes.empty() ? value : xt::xarray<T>(xt::sum(value, axes, xt::evaluation_strategy::immediate));
        std::copy(reduced.begin(), reduced.end(), expected.begin());
      }
      BOOST_TEST(same_bits(y.value(), expected));
    }
  }
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
