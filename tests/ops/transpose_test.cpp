#include "../check.hpp"

#include <xtensor/xmanipulation.hpp>

BOOST_AUTO_TEST_SUITE(transpose)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<float> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const xt::xarray<float> expected = {{1, 4}, {2, 5}, {3, 6}};
  BOOST_TEST(xgrad::transpose(x).value() == expected);
}

BOOST_AUTO_TEST_CASE(swaps_the_last_two_axes_of_each_batch) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4, 5}, 1));
  const xt::xarray<double> expected = xt::transpose(x.value(), {0, 1, 3, 2});
  BOOST_TEST(xgrad::transpose(x).value() == expected);
}

// The kernel works in blocks of 8 x 8 and handles the rest apart: every mix of whole blocks and
// remainders on both axes, single rows and columns, empty matrices and a batch.
BOOST_AUTO_TEST_CASE(matches_xtensor_on_whole_blocks_and_remainders) {
  const std::vector<Shape> shapes = {{1, 1},  {1, 9},  {9, 1},  {8, 8},   {8, 16}, {16, 8},    {7, 7},
                                     {9, 17}, {17, 9}, {23, 8}, {8, 23},   {64, 40}, {3, 61},  {2, 24, 9},
                                     {2, 17, 10}, {3, 0, 5}, {0, 4}};
  int seed = 10;
  for (const Shape& shape : shapes) {
    Graph<float> g;
    const auto x = g.input("x", random_array<float>(shape, ++seed));
    std::vector<std::size_t> axes(shape.size());
    for (std::size_t i = 0; i < axes.size(); ++i) axes[i] = i;
    std::swap(axes[axes.size() - 1], axes[axes.size() - 2]);
    const xt::xarray<float> expected = xt::transpose(x.value(), axes);
    BOOST_TEST(xgrad::transpose(x).value() == expected, "shape " << shape_str(shape));
  }
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  check_gradients(xgrad::transpose(x), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({4}));
  check_error([&] { xgrad::transpose(x); }, {"transpose (node 1)", "rank >= 2", "(4,)"});
}

BOOST_AUTO_TEST_SUITE_END()
