// sum and mean, one op class (ops/sum.cpp): hand values of each, and what they share (the VJP
// by finite differences, the attributes, the errors) checked for both.
#include "../check.hpp"

namespace {

using Reduction = Var<double> (*)(const Var<double>&, const std::vector<long>&, bool);
const std::pair<std::string, Reduction> reductions[] = {{"sum", &xgrad::sum<double>}, {"mean", &xgrad::mean<double>}};

}  // namespace

BOOST_AUTO_TEST_SUITE(sum)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  BOOST_TEST(xgrad::sum(x, {0}).value() == (xt::xarray<double>{5, 7, 9}));
  BOOST_TEST(xgrad::sum(x, {-1}).value() == (xt::xarray<double>{6, 15}));
  BOOST_TEST(xgrad::sum(x, {1}, true).value() == matrix<double>({{6}, {15}}));
  BOOST_TEST(xgrad::sum(x, {1, 0}).value() == xt::xarray<double>(21));
  BOOST_TEST(xgrad::sum(x).value() == xt::xarray<double>(21));
  BOOST_TEST(xgrad::sum(x).value().dimension() == 0u);
  BOOST_TEST(xgrad::sum(x, {}).value() == x.value());  // numpy's axis=(): nothing summed
}

BOOST_AUTO_TEST_CASE(mean_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 9}});
  BOOST_TEST(xgrad::mean(x, {0}).value() == (xt::xarray<double>{2.5, 3.5, 6}));
  BOOST_TEST(xgrad::mean(x, {-1}, true).value() == matrix<double>({{2}, {6}}));
  BOOST_TEST(xgrad::mean(x).value() == xt::xarray<double>(4));
  BOOST_TEST(xgrad::mean(x).value().dimension() == 0u);
  BOOST_TEST(xgrad::mean(x, {}).value() == x.value());
}

BOOST_AUTO_TEST_CASE(sums_middle_axes_of_a_batch) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  const auto y = xgrad::sum(x, {1}, true);
  BOOST_TEST(y.value().shape() == (std::vector<std::size_t>{2, 1, 4}), boost::test_tools::per_element());
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t k = 0; k < 4; ++k) {
      const double s = x.value()(i, 0, k) + x.value()(i, 1, k) + x.value()(i, 2, k);
      BOOST_TEST(y.value()(i, 0, k) == s, boost::test_tools::tolerance(1e-15));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_sum_of_nothing_is_zero_and_its_mean_nan) {
  // numpy: np.zeros((0, 3)).sum(0) is [0, 0, 0], .mean(0) is [nan, nan, nan] (0/0).
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>::from_shape({0, 3}));
  BOOST_TEST(xgrad::sum(x, {0}).value() == (xt::xarray<double>{0, 0, 0}));
  BOOST_TEST(xgrad::sum_to(x, {1, 3}).value() == (xt::xarray<double>{{0, 0, 0}}));
  BOOST_TEST(xgrad::sum(x, {1}).value().shape(0) == 0u);
  const auto m = xgrad::mean(x, {0});
  BOOST_TEST(m.value().size() == 3u);
  for (double e : m.value()) BOOST_TEST(std::isnan(e));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3, 4}, 1));
  for (const auto& [name, reduce] : reductions) {
    for (bool keepdims : {false, true}) {
      BOOST_TEST_CONTEXT(name << ", keepdims " << keepdims) {
        check_gradients(reduce(x, {1}, keepdims), {x});
        check_gradients(reduce(x, {0, -1}, keepdims), {x});
        check_gradients(reduce(x, {}, keepdims), {x});
      }
    }
  }
  check_gradients(xgrad::sum(x), {x});
  check_gradients(xgrad::mean(x), {x});
  // The gradient of the mean of n elements is 1/n each: 24 here.
  for (double e : grad(xgrad::mean(x), {x})[0].value()) BOOST_TEST(e == 1.0 / 24, boost::test_tools::tolerance(1e-15));
}

BOOST_AUTO_TEST_CASE(mean_in_float32_matches_float64) {
  Graph<float> g;
  const auto x = g.input("x", random_array<float>({3, 5}, 2));
  const auto y = xgrad::mean(x, {1});
  for (std::size_t i = 0; i < 3; ++i) {
    double s = 0;
    for (std::size_t j = 0; j < 5; ++j) s += x.value()(i, j);
    BOOST_TEST(y.value()(i) == s / 5, boost::test_tools::tolerance(1e-6));
  }
}

BOOST_AUTO_TEST_CASE(attrs_hold_axes_and_keepdims) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  for (const auto& [name, reduce] : reductions) {
    const auto y = reduce(x, {-1}, true);
    BOOST_TEST(y.node().op_name() == name);
    BOOST_TEST(y.node().op->attrs().dump() == R"({"axes":[-1],"keepdims":true})");
    BOOST_TEST(reduce(x, {0, -1}, false).node().op->attrs().dump() == R"({"axes":[0,-1],"keepdims":false})");
  }
  BOOST_TEST(xgrad::sum(x).node().op->attrs().dump() == R"({"axes":[0,1],"keepdims":false})");
  BOOST_TEST(xgrad::mean(x).node().op->attrs().dump() == R"({"axes":[0,1],"keepdims":false})");
}

BOOST_AUTO_TEST_CASE(rejects_bad_axes) {
  for (const auto& [name, reduce] : reductions) {
    Graph<double> g;
    const auto x = g.input("x", xt::zeros<double>({2, 3}));
    check_error([&] { reduce(x, {2}, false); }, {name + " (node 1)", "axis 2 is out of range for a (2, 3) input"});
    check_error([&] { reduce(x, {-3}, false); }, {name + " (node 1)", "axis -3 is out of range for a (2, 3) input"});
    check_error([&] { reduce(x, {1, -1}, false); }, {name + " (node 1)", "axis -1 is repeated in the axes of x (2, 3)"});
    check_error([&] { reduce(x, {0, 0}, false); }, {name + " (node 1)", "axis 0 is repeated in the axes of x (2, 3)"});
  }
}

BOOST_AUTO_TEST_SUITE_END()
