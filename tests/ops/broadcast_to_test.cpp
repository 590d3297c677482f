#include "../check.hpp"

BOOST_AUTO_TEST_SUITE(broadcast_to)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1}, {2}});
  const xt::xarray<double> expected = {{{1, 1, 1}, {2, 2, 2}}, {{1, 1, 1}, {2, 2, 2}}};
  BOOST_TEST(xgrad::broadcast_to(x, {2, 2, 3}).value() == expected);
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 1}, 1));
  check_gradients(xgrad::broadcast_to(x, {2, 3, 4}), {x});
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  check_error([&] { xgrad::broadcast_to(x, {3, 3}); }, {"broadcast_to (node 1)", "x (2, 3)", "(3, 3)"});
  check_error([&] { xgrad::broadcast_to(x, {3}); }, {"x (2, 3)", "(3,)"});
}

BOOST_AUTO_TEST_CASE(attrs_hold_the_shape) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({1}));
  BOOST_TEST(xgrad::broadcast_to(x, {2, 3}).node().op->attrs().dump() == R"({"shape":[2,3]})");
}

// Issue 15: broadcast_to(x, {2^32, 2^32}) gave a node of size 0 (the count wrapped) on which a
// softmax crashed, and 8 TiB threw std::bad_alloc. infer_shape refuses before allocating.
BOOST_AUTO_TEST_CASE(refuses_a_target_of_too_many_elements) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({1}));
  const std::size_t big = std::size_t(1) << 32;
  check_error([&] { xgrad::broadcast_to(x, {big, big}); },
              {"broadcast_to (node 1): broadcasting x (1,) to (4294967296, 4294967296) makes more than 268435456 elements"});
  check_error([&] { xgrad::broadcast_to(x, {std::size_t(1) << 20, std::size_t(1) << 20, 8}); },  // 8 TiB of float64
              {"broadcast_to (node 1)", "(1048576, 1048576, 8)", "more than 268435456 elements"});
  BOOST_TEST(g.size() == 1u);
  // The bound itself is allowed.
  const auto z = g.input("z", xt::zeros<double>({0}));
  BOOST_TEST(xgrad::broadcast_to(z, {std::size_t(1) << 28, 0}).value().size() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
