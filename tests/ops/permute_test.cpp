#include "../check.hpp"

#include <xtensor/xmanipulation.hpp>

BOOST_AUTO_TEST_SUITE(permute)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  BOOST_TEST(xgrad::permute(x, {1, 0}).value() == (xt::xarray<double>{{1, 4}, {2, 5}, {3, 6}}));
  // (B, T, H, d) -> (B, H, T, d), as numpy.transpose does it.
  const auto y = g.input("y", random_array<double>({2, 3, 4, 5}, 1));
  const xt::xarray<double> expected = xt::transpose(y.value(), {0, 2, 1, 3});
  BOOST_TEST(xgrad::permute(y, {0, 2, 1, 3}).value() == expected);
  const xt::xarray<double> cyclic = xt::transpose(y.value(), {3, 0, 1, 2});
  BOOST_TEST(xgrad::permute(y, {3, 0, 1, 2}).value() == cyclic);
}

BOOST_AUTO_TEST_CASE(every_permutation_matches_xtensor) {
  // All 24 permutations of 4 axes (runs of the trailing axes that stay, and none), an axis of 0
  // and a scalar, on 2 threads with an array large enough to be split between them.
  const test::BlasThreads two(2);
  Graph<double> g;
  const auto small = g.input("small", random_array<double>({2, 3, 4, 5}, 1));
  const auto large = g.input("large", random_array<double>({9, 70, 4, 64}, 2));
  std::vector<std::size_t> axes = {0, 1, 2, 3};
  std::size_t count = 0;
  do {
    for (const auto& x : {small, large}) {
      const xt::xarray<double> expected = xt::transpose(x.value(), axes);
      BOOST_TEST(same_bits(xgrad::permute(x, axes).value(), expected), "axes " << axes[0] << axes[1] << axes[2] << axes[3]);
    }
    ++count;
  } while (std::next_permutation(axes.begin(), axes.end()));
  BOOST_TEST(count == 24u);
  const auto empty = g.input("empty", xt::zeros<double>({3, 0, 2}));
  BOOST_TEST(xgrad::permute(empty, {2, 1, 0}).shape() == (Shape{2, 0, 3}));
  const auto scalar = g.input("scalar", xt::xarray<double>(2.5));
  BOOST_TEST(xgrad::permute(scalar, {}).value()() == 2.5);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 2));
  check_gradients(xgrad::permute(x, {2, 0, 1}), {x});
  check_gradients(xgrad::permute(x, {0, 2, 1}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::permute(x, {0, 0}); }, {"permute (node 1)", "axes [0, 0] are not a permutation", "(2, 3)"});
  check_error([&] { xgrad::permute(x, {0, 1, 2}); }, {"axes [0, 1, 2]", "(2, 3)"});
  check_error([&] { xgrad::permute(x, {2, 0}); }, {"axes [2, 0]"});
}

BOOST_AUTO_TEST_SUITE_END()
