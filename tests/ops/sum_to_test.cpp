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
