#include "../check.hpp"

namespace {

// y = x^2 with a deliberately wrong VJP (3 x grad_out instead of 2 x grad_out): the negative
// control that gradcheck must catch.
class WrongSquareOp final : public OpFor<WrongSquareOp> {
 public:
  std::string name() const override { return "wrong_square"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    y = (*x[0]) * (*x[0]);
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {scale(mul(v.grad_out, v.x[0]), 3.0)};
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(gradcheck)

BOOST_AUTO_TEST_CASE(fails_on_a_wrong_vjp) {
  for (auto mode : {GradcheckMode::full, GradcheckMode::projection}) {
    Graph<double> g;
    const auto x = g.input("x", random_array<double>({2, 3}, 1));
    const auto y = g.apply(std::make_shared<WrongSquareOp>(), {x});
    GradcheckOptions options;
    options.mode = mode;
    const auto report = xgrad::gradcheck(y, {x}, options);
    BOOST_TEST(!report.passed);
    const auto& w = report.worst();
    BOOST_TEST(w.name == "x");
    BOOST_TEST(!w.passed);
    BOOST_TEST(w.analytic == 1.5 * w.numeric, boost::test_tools::tolerance(1e-6));  // 3x vs 2x
    BOOST_TEST(report.str().find("FAIL") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(reports_the_worst_element_of_each_input) {
  Graph<double> g;
  const auto a = g.input("a", {{1, 2}});
  const auto x = g.input("x", {{3, 4}});
  const auto y = add(mul(a, a), g.apply(std::make_shared<WrongSquareOp>(), {x}));
  const auto report = xgrad::gradcheck(y, {a, x});
  BOOST_TEST(report.mode == GradcheckMode::full);
  BOOST_TEST(report.compared == 8u);  // 2 outputs x (2 + 2) input elements
  BOOST_TEST(report.inputs[0].passed);
  BOOST_TEST(!report.inputs[1].passed);
  BOOST_TEST(report.worst().name == "x");
  // dy[0, 1] / dx[0, 1] = 2 * 4 = 8; the wrong rule says 12.
  BOOST_TEST((report.worst().index == std::vector<std::size_t>{0, 1}));
  BOOST_TEST((report.worst().output_index == std::vector<std::size_t>{0, 1}));
  BOOST_TEST(report.worst().analytic == 12.0);
  BOOST_TEST(report.worst().numeric == 8.0, boost::test_tools::tolerance(1e-8));
  BOOST_TEST(report.worst().abs_error == 4.0, boost::test_tools::tolerance(1e-8));
  BOOST_TEST(report.worst().rel_error == 1.0 / 3, boost::test_tools::tolerance(1e-8));
}

BOOST_AUTO_TEST_CASE(automatic_mode_projects_large_inputs) {
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {16, 32}, {24, 32}, {24, 16}, 2);
  const auto report = xgrad::gradcheck(attention(q, k, v), {q, k, v});
  BOOST_TEST(report.mode == GradcheckMode::projection);
  BOOST_TEST(report.compared == 3 * GradcheckOptions().projections);
  BOOST_TEST(report.passed, report.str());
}

BOOST_AUTO_TEST_CASE(default_tolerances_depend_on_the_dtype) {
  Graph<float> gf;
  const auto xf = gf.input("x", {{1.0f}});
  const auto rf = xgrad::gradcheck(scale(xf, 2.0), {xf});
  BOOST_TEST(rf.dtype == "float32");
  BOOST_TEST(rf.atol == 1e-4);
  BOOST_TEST(rf.rtol == 1e-3);
  Graph<double> gd;
  const auto xd = gd.input("x", {{1.0}});
  const auto rd = xgrad::gradcheck(scale(xd, 2.0), {xd});
  BOOST_TEST(rd.atol == 1e-7);
  BOOST_TEST(rd.rtol == 1e-5);
}

BOOST_AUTO_TEST_CASE(leaves_the_graph_unchanged) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 2}, 5));
  const auto y = softmax(x);
  const xt::xarray<double> before = y.value();
  const std::size_t nodes = g.size();
  xgrad::gradcheck(y, {x});
  BOOST_TEST(g.size() == nodes);
  BOOST_TEST(y.value() == before);
}

BOOST_AUTO_TEST_CASE(empty_inputs_compare_nothing_and_say_so) {
  Graph<double> g;
  const auto q = g.input("q", xt::zeros<double>({0, 2}));
  const auto k = g.input("k", random_array<double>({3, 2}, 6));
  const auto v = g.input("v", random_array<double>({3, 4}, 7));
  const auto report = xgrad::gradcheck(attention(q, k, v), {q, k, v});
  BOOST_TEST(report.compared == 0u);
  BOOST_TEST(report.inputs[0].compared == 0u);
  BOOST_TEST(report.str().find("q: nothing to compare (an empty array)") != std::string::npos, report.str());
}

BOOST_AUTO_TEST_CASE(rejects_bad_arguments) {
  Graph<double> g, other;
  const auto x = g.input("x", {{1, 2}});
  const auto y = scale(x, 2.0);
  const auto alien = other.input("alien", {{1.0}});
  check_error([&] { xgrad::gradcheck(y, {y}); }, {"x[0] (node 1) is a scale node", "leaves"});
  check_error([&] { xgrad::gradcheck(y, {}); }, {"no inputs"});
  check_error([&] { xgrad::gradcheck(y, {alien}); }, {"x[0] belongs to another graph"});
  check_error([&] { xgrad::gradcheck(Var<double>(), {x}); }, {"y is an empty Var"});
  GradcheckOptions none;
  none.mode = GradcheckMode::projection;
  none.projections = 0;
  check_error([&] { xgrad::gradcheck(y, {x}, none); }, {"projections = 0"});
  GradcheckOptions zero_eps;
  zero_eps.eps = 0;
  check_error([&] { xgrad::gradcheck(y, {x}, zero_eps); }, {"eps must be a positive number"});
}

// Issue 15 (class 7): full mode on y and x of 2^15 elements would hold a 2^30-element Jacobian;
// refused before anything is copied.
BOOST_AUTO_TEST_CASE(full_mode_refuses_a_jacobian_of_too_many_elements) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>(Shape{std::size_t(1) << 15}));
  GradcheckOptions o;
  o.mode = GradcheckMode::full;
  check_error([&] { xgrad::gradcheck(scale(x, 2.0), {x}, o); },
              {"gradcheck: the full Jacobian (32768, 32768) of x[0] makes more than 268435456 elements"});
  o.mode = GradcheckMode::automatic;  // chooses projections, no overflow in y.size() * x.size()
  BOOST_TEST(xgrad::gradcheck(scale(x, 2.0), {x}, o).mode == GradcheckMode::projection);
}

BOOST_AUTO_TEST_SUITE_END()
