// The rows of ops/elementwise.def added for the transformer blocks (neg, exp, log, sqrt, tanh,
// erf; sub, div): hand values at the edges of IEEE arithmetic, PyTorch's values and gradients,
// and, walking every row of the table, finite differences of first and second order and the
// export round trip. (relu, add and mul keep their own suites; the comparisons and the logic of
// masks have suite comparisons.)
#include "../check.hpp"

#include <limits>

namespace xgrad_tests {  // the suite is a namespace: `elementwise` is one of xgrad's

BOOST_AUTO_TEST_SUITE(elementwise_rows)

const double inf = std::numeric_limits<double>::infinity();

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{0.0, 1.0, -1.0, inf, -inf});
  const auto n = xgrad::neg(x).value();
  BOOST_TEST(std::signbit(n(0)));  // -0.0
  BOOST_TEST((n == xt::xarray<double>{-0.0, -1.0, 1.0, -inf, inf}));
  BOOST_TEST((xgrad::exp(x).value() == xt::xarray<double>{1.0, std::exp(1.0), std::exp(-1.0), inf, 0.0}));
  const auto l = xgrad::log(x).value();
  BOOST_TEST(l(0) == -inf);
  BOOST_TEST(l(1) == 0.0);
  BOOST_TEST(std::isnan(l(2)));  // outside the domain: NaN, as numpy and PyTorch
  BOOST_TEST(l(3) == inf);
  const auto r = xgrad::sqrt(x).value();
  BOOST_TEST(r(0) == 0.0);
  BOOST_TEST(r(1) == 1.0);
  BOOST_TEST(std::isnan(r(2)));
  BOOST_TEST(r(3) == inf);
  BOOST_TEST((xgrad::tanh(x).value() == xt::xarray<double>{0.0, std::tanh(1.0), -std::tanh(1.0), 1.0, -1.0}));
  BOOST_TEST((xgrad::erf(x).value() == xt::xarray<double>{0.0, std::erf(1.0), -std::erf(1.0), 1.0, -1.0}));
  const auto nan = g.input("nan", xt::xarray<double>{std::nan("")});
  for (const auto& y : {xgrad::neg(nan), xgrad::exp(nan), xgrad::log(nan), xgrad::sqrt(nan), xgrad::tanh(nan), xgrad::erf(nan)}) {
    BOOST_TEST(std::isnan(y.value()(0)), y.node().op_name());
  }
  const auto a = g.input("a", xt::xarray<double>{{1.0, 0.0, -2.0}, {6.0, 0.0, 3.0}});
  const auto b = g.input("b", xt::xarray<double>{2.0, 0.0, -4.0});  // broadcast over the rows
  BOOST_TEST((xgrad::sub(a, b).value() == xt::xarray<double>{{-1.0, 0.0, 2.0}, {4.0, 0.0, 7.0}}));
  BOOST_TEST((xgrad::sub(b, a).value() == xt::xarray<double>{{1.0, 0.0, -2.0}, {-4.0, 0.0, -7.0}}));
  const auto q = xgrad::div(a, b).value();
  BOOST_TEST(q(0, 0) == 0.5);
  BOOST_TEST(std::isnan(q(0, 1)));  // 0 / 0
  BOOST_TEST(q(0, 2) == 0.5);
  BOOST_TEST(q(1, 0) == 3.0);
  BOOST_TEST(q(1, 2) == -0.75);
  BOOST_TEST(xgrad::div(b, a).value()(0, 0) == 2.0);
  BOOST_TEST(xgrad::div(b, a).value()(1, 1) != xgrad::div(b, a).value()(1, 1));  // 0 / 0 again
  const auto one = g.input("one", xt::xarray<double>{1.0, -1.0});
  const auto zero = g.input("zero", xt::xarray<double>{0.0, 0.0});
  BOOST_TEST((xgrad::div(one, zero).value() == xt::xarray<double>{inf, -inf}));
  // maximum, minimum: NaN from either side; the gradient to the operand y equals, ties to b.
  const auto c = g.input("c", xt::xarray<double>{1.0, -2.0, 3.0, std::nan(""), 0.0, inf});
  const auto d = g.input("d", xt::xarray<double>{0.5, -1.0, 3.0, 1.0, std::nan(""), inf});
  const auto mx = xgrad::maximum(c, d), mn = xgrad::minimum(c, d);
  BOOST_TEST(mx.value()(0) == 1.0);
  BOOST_TEST(mx.value()(1) == -1.0);
  BOOST_TEST(mn.value()(0) == 0.5);
  BOOST_TEST(mn.value()(1) == -2.0);
  BOOST_TEST((std::isnan(mx.value()(3)) && std::isnan(mx.value()(4)) && std::isnan(mn.value()(3)) && std::isnan(mn.value()(4))));
  BOOST_TEST(mx.value()(5) == inf);
  const auto gm = grad(sum(mx), {c, d});
  for (int i = 0; i < 3; ++i) {  // the tie at 3 goes to d
    BOOST_TEST(gm[0].value()(i) == (i == 0 ? 1.0 : 0.0));
    BOOST_TEST(gm[1].value()(i) == (i == 0 ? 0.0 : 1.0));
  }
  BOOST_TEST(gm[0].value()(5) + gm[1].value()(5) == 1.0);  // inf = inf: one of them
  // float32 rows compute in float: exp(1) rounded once.
  Graph<float> f;
  const auto xf = f.input("x", xt::xarray<float>{1.0f, 4.0f});
  BOOST_TEST(xgrad::exp(xf).value()(0) == std::exp(1.0f));
  BOOST_TEST(xgrad::sqrt(xf).value()(1) == 2.0f);
}

BOOST_AUTO_TEST_CASE(rows_match_pytorch) {
  const auto xs = torch_fixture("elementwise_x"), ps = torch_fixture("elementwise_p"), us = torch_fixture("elementwise_u");
  using Unary = Var<double> (*)(const Var<double>&);
  const std::pair<const char*, Unary> unary[] = {
      {"neg", &xgrad::neg<double>},         {"exp", &xgrad::exp<double>},     {"log", &xgrad::log<double>},
      {"sqrt", &xgrad::sqrt<double>},       {"tanh", &xgrad::tanh<double>},   {"erf", &xgrad::erf<double>},
      {"sin", &xgrad::sin<double>},         {"cos", &xgrad::cos<double>},     {"sigmoid", &xgrad::sigmoid<double>},
      {"silu", &xgrad::silu<double>},       {"abs", &xgrad::abs<double>},     {"reciprocal", &xgrad::reciprocal<double>},
      {"rsqrt", &xgrad::rsqrt<double>}};
  for (const auto& [name, f] : unary) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const std::string n = name;
      const bool positive = n == "log" || n == "sqrt" || n == "reciprocal" || n == "rsqrt";
      const auto x = g.input("x", positive ? ps : xs);
      const auto u = g.input("u", us);
      const auto y = f(x);
      check_close(y.value(), torch_fixture(std::string("elementwise_") + name + "_y"));
      check_close(grad(y, {x}, u)[0].value(), torch_fixture(std::string("elementwise_") + name + "_grad"));
    }
  }
  using Binary = Var<double> (*)(const Var<double>&, const Var<double>&);
  const std::pair<const char*, Binary> binary[] = {{"sub", &xgrad::sub<double>},
                                                   {"div", &xgrad::div<double>},
                                                   {"maximum", &xgrad::maximum<double>},
                                                   {"minimum", &xgrad::minimum<double>}};
  for (const auto& [name, f] : binary) {
    BOOST_TEST_CONTEXT(name) {
      Graph<double> g;
      const auto a = g.input("a", torch_fixture("elementwise_a"));  // (3, 4)
      const auto b = g.input("b", torch_fixture("elementwise_b"));  // (2, 1, 4)
      const auto w = g.input("w", torch_fixture("elementwise_w"));  // (2, 3, 4)
      const auto y = f(a, b);
      check_close(y.value(), torch_fixture(std::string("elementwise_") + name + "_y"));
      const auto grads = grad(y, {a, b}, w);
      check_close(grads[0].value(), torch_fixture(std::string("elementwise_") + name + "_grad_a"));
      check_close(grads[1].value(), torch_fixture(std::string("elementwise_") + name + "_grad_b"));
    }
  }
}

// An input for a row of this domain: normal draws, in (0.5, 2) for a positive one, 1 and 0 for
// a mask (central differences step to either side of 0 or 1 alike: the logic's gradient, 0, is
// what they see).
xt::xarray<double> row_input(elementwise::Domain domain, std::uint64_t seed, const Shape& shape = {3, 4}) {
  xt::xarray<double> x = random_array<double>(shape, seed);
  if (domain == elementwise::Domain::positive) x = 0.5 + 0.75 * (xt::tanh(x) + 1.0);
  if (domain == elementwise::Domain::mask) x = xt::where(x > 0.0, 1.0, 0.0);
  return x;
}

BOOST_AUTO_TEST_CASE(every_row_matches_finite_differences_to_second_order) {
  // relu's kink and the random draws: no element within 1e-3 of 0 (the FD step is 1e-6).
  Graph<double> g;
  const auto u = g.input("u", random_array<double>({3, 4}, 3));
  std::size_t rows = 0;
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                       \
  {                                                                         \
    const auto x = g.input("x", row_input(elementwise::Domain::DOMAIN, 1)); \
    BOOST_TEST_CONTEXT(#NAME) {                                             \
      check_gradients(xgrad::NAME(x), {x});                                 \
      check_gradients(grad(xgrad::NAME(x), {x}, u)[0], {x, u});             \
    }                                                                       \
    ++rows;                                                                 \
  }
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                  \
  {                                                                              \
    const auto a = g.input("a", row_input(elementwise::Domain::real, 1));        \
    const auto b = g.input("b", row_input(elementwise::Domain::DOMAIN, 2, {4})); \
    BOOST_TEST_CONTEXT(#NAME) {                                                  \
      check_gradients(xgrad::NAME(a, b), {a, b});                                \
      check_gradients(grad(xgrad::NAME(a, b), {a, b}, u)[1], {a, b, u});         \
    }                                                                            \
    ++rows;                                                                      \
  }
#include <xgrad/ops/elementwise.def>
  BOOST_TEST(rows == 27u);
}

BOOST_AUTO_TEST_CASE(every_row_has_no_attrs_and_round_trips) {
  Graph<double> g;
  const auto x = g.input("x", row_input(elementwise::Domain::positive, 4));
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)  \
  check_attrs_round_trip(xgrad::NAME(x), #NAME, "{}");
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX) \
  check_attrs_round_trip(xgrad::NAME(x, x), #NAME, "{}");
#include <xgrad/ops/elementwise.def>
}

BOOST_AUTO_TEST_CASE(sigmoid_and_silu_do_not_overflow_and_keep_nan) {
  // The logistic function on either side: e^1000 overflows, so x < 0 takes e^x / (1 + e^x).
  Graph<double> g;
  const double nan = std::nan("");
  const auto x = g.input("x", xt::xarray<double>{-1000.0, -745.0, 0.0, 1000.0, -inf, inf, nan});
  const auto y = xgrad::sigmoid(x).value();
  BOOST_TEST(y(0) == 0.0);
  BOOST_TEST(y(1) > 0.0);  // e^-745, the smallest subnormal's neighbourhood, not 0 / 0
  BOOST_TEST(y(2) == 0.5);
  BOOST_TEST(y(3) == 1.0);
  BOOST_TEST(y(4) == 0.0);
  BOOST_TEST(y(5) == 1.0);
  BOOST_TEST(std::isnan(y(6)));
  const auto gs = grad(sum(xgrad::sigmoid(x)), {x})[0].value();
  BOOST_TEST(gs(0) == 0.0);
  BOOST_TEST(gs(2) == 0.25);
  BOOST_TEST(gs(3) == 0.0);
  // silu = x sigmoid(x) is a composition: its nodes are mul and sigmoid.
  const auto s = xgrad::silu(x);
  BOOST_TEST(s.node().op->name() == "mul");
  BOOST_TEST(s.value()(0) == -0.0);
  BOOST_TEST(s.value()(3) == 1000.0);
  // abs: grad 0 at 0, sign(x) elsewhere.
  const auto a = g.input("a", xt::xarray<double>{-2.0, 0.0, 3.0});
  BOOST_TEST((grad(sum(xgrad::abs(a)), {a})[0].value() == xt::xarray<double>{-1.0, 0.0, 1.0}));
  BOOST_TEST((xgrad::rsqrt(g.input("r", xt::xarray<double>{4.0, 0.25})).value() == xt::xarray<double>{0.5, 2.0}));
}

BOOST_AUTO_TEST_CASE(a_libm_row_costs_more_work_than_arithmetic) {
  // The import's work limit: relu 2 visits an element (read x, write y), tanh more (its cost column).
  const std::vector<Shape> s = {{1000}};
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{1.0});
  BOOST_TEST(xgrad::relu(x).node().op->work(s, s) == 2000.0);
  BOOST_TEST(xgrad::tanh(x).node().op->work(s, s) > 4000.0);
}

BOOST_AUTO_TEST_CASE(every_binary_row_names_shapes_that_do_not_broadcast_or_broadcast_too_far) {
  // Refused in infer_shape, so a refused call adds no node: shapes that do not broadcast, and
  // (issue 15, class 7) a (2^15, 1) and b (1, 2^15), which would make 2^30 elements.
  using Binary = Var<double> (*)(const Var<double>&, const Var<double>&);
  const std::pair<std::string, Binary> rows[] = {
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX) {#NAME, &xgrad::NAME<double>},
#include <xgrad/ops/elementwise.def>
  };
  for (const auto& entry : rows) {
    const std::string& name = entry.first;  // (a lambda captures no structured binding in C++17)
    const Binary f = entry.second;
    Graph<double> g;
    const auto a = g.input("a", xt::xarray<double>::from_shape({2, 3}));
    const auto b = g.input("b", xt::xarray<double>::from_shape({4}));
    check_error([&] { f(a, b); }, {name + " (node 2): a (2, 3) and b (4,) do not broadcast together"});
    check_error([&] { f(b, a); }, {name + " (node 2): a (4,) and b (2, 3) do not broadcast together"});
    const auto column = g.input("column", xt::zeros<double>(Shape{std::size_t(1) << 15, 1}));
    const auto row = g.input("row", xt::zeros<double>(Shape{1, std::size_t(1) << 15}));
    check_error([&] { f(column, row); }, {name + " (node 4): broadcasting a (32768, 1) and b (1, 32768) to (32768, 32768) "
                                                 "makes more than 268435456 elements"});
    BOOST_TEST(g.size() == 4u, name);
  }
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace xgrad_tests
