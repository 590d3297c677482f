#include "../check.hpp"

#include <cmath>
#include <limits>

namespace {

using Labels = xt::xarray<std::int64_t>;

}  // namespace

BOOST_AUTO_TEST_SUITE(take_label)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3}, {4, 5, 6}});
  const auto labels = g.indices("labels", Labels{2, 0});
  BOOST_TEST(xgrad::take_label(x, labels).value() == (xt::xarray<double>{3, 4}));
  // ignore_index, in range or not, gives 0 at its positions.
  BOOST_TEST(xgrad::take_label(x, g.indices("a", Labels{1, -100}), -100).value() == (xt::xarray<double>{2, 0}));
  BOOST_TEST(xgrad::take_label(x, g.indices("b", Labels{1, 1}), 1).value() == (xt::xarray<double>{0, 0}));
  // x (C) is shared by every position (class weights); (1, C) and (C) broadcast over labels (2, 2).
  const auto w = g.constant("w", xt::xarray<double>{10, 20, 30});
  const auto l2 = g.indices("l2", Labels{{2, 0}, {-1, 1}});
  BOOST_TEST(xgrad::take_label(w, l2, -1).value() == (xt::xarray<double>{{30, 10}, {0, 20}}));
  BOOST_TEST(xgrad::take_label(g.input("row", {{7, 8, 9}}), l2, -1).value() == (xt::xarray<double>{{9, 7}, {0, 8}}));
  // (2, 1, C) against labels (2, 3): each row of x serves the three positions of its row.
  const auto x3 = g.input("x3", xt::xarray<double>{{{1, 2}}, {{3, 4}}});
  BOOST_TEST(xgrad::take_label(x3, g.indices("l3", Labels{{0, 1, 1}, {1, 0, 0}})).value() ==
             (xt::xarray<double>{{1, 2, 2}, {4, 3, 3}}));
  // A scalar label of x (C); empty labels give an empty y.
  BOOST_TEST(xgrad::take_label(w, g.indices("one", Labels(1))).value() == xt::xarray<double>(20));
  const auto none = xgrad::take_label(g.input("e", xt::xarray<double>::from_shape({0, 3})), g.indices("n", Labels::from_shape({0})));
  BOOST_TEST(none.value().size() == 0u);
  // The scatter: one entry per kept position, 0 elsewhere.
  const auto go = g.input("go", xt::xarray<double>{5, 7});
  BOOST_TEST(xgrad::take_label_vjp(go, g.indices("c", Labels{2, -100}), 3, -100).value() ==
             (xt::xarray<double>{{0, 0, 5}, {0, 0, 0}}));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_matches_finite_differences, T, test::dtypes) {
  Graph<T> g;
  const auto x = g.input("x", random_array<T>({2, 3, 4}, 1));
  const auto labels = g.indices("labels", Labels{{3, 0, -7}, {1, 1, 2}});
  const auto y = xgrad::take_label(x, labels, -7);
  check_gradients(y, {x});
  // Second order: the VJP is take_label_vjp, whose own VJP w.r.t. grad_out is a take_label.
  const auto u = g.input("u", random_array<T>({2, 3}, 2));
  const auto gx = grad(y, {x}, u)[0];
  BOOST_TEST(gx.node().op_name() == "take_label_vjp");
  check_gradients(gx, {u, x});
  const auto v = g.input("v", random_array<T>({2, 3, 4}, 3));
  const auto gu = grad(gx, {u}, v)[0];
  BOOST_TEST(gu.node().op_name() == "take_label");
  check_gradients(gu, {v});
  // A broadcast x: its gradient is the scatter summed back to its shape.
  const auto w = g.input("w", random_array<T>({4}, 4));
  const auto wl = xgrad::take_label(w, labels, -7);
  BOOST_TEST(grad(wl, {w})[0].node().op_name() == "sum_to");
  check_gradients(wl, {w});
  const auto x1 = g.input("x1", random_array<T>({2, 1, 4}, 5));
  check_gradients(xgrad::take_label(x1, labels, -7), {x1});
}

BOOST_AUTO_TEST_CASE(an_ignored_position_takes_no_gradient_even_from_inf_or_nan) {
  // As torch's masked_fill: the loss of an all-ignored batch is 0 / 0, and its gradient must
  // still be 0, not inf * 0 = NaN.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3}, 6));
  const auto y = xgrad::take_label(x, g.indices("labels", Labels{-100, 2}), -100);
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const auto gx = grad(y, {x}, g.constant("u", xt::xarray<double>{inf, 1}))[0];
  BOOST_TEST(gx.value() == (xt::xarray<double>{{0, 0, 0}, {0, 0, 1}}));
  const auto gn = grad(y, {x}, g.constant("n", xt::xarray<double>{nan, 2}))[0];
  BOOST_TEST(gn.value() == (xt::xarray<double>{{0, 0, 0}, {0, 0, 2}}));
}

BOOST_AUTO_TEST_CASE(a_new_batch_of_labels_replays) {
  // The labels are read when the nodes run: set_value then replay gives the new entries and
  // gradients, nothing of the first batch kept.
  Graph<double> g;
  const auto x = g.parameter("x", {{1, 2, 3}, {4, 5, 6}});
  const auto labels = g.indices("labels", Labels{0, 1});
  const auto y = xgrad::take_label(x, labels, -100);
  const auto gx = grad(y, {x}, g.constant("u", xt::xarray<double>{10, 20}))[0];
  g.set_value(labels, Labels{2, -100});
  g.replay();
  BOOST_TEST(y.value() == (xt::xarray<double>{3, 0}));
  BOOST_TEST(gx.value() == (xt::xarray<double>{{0, 0, 10}, {0, 0, 0}}));
  // A bad batch throws at the node, naming it; a good one replays again.
  g.set_value(labels, Labels{3, 0});
  check_error([&] { g.replay(); }, {"take_label (node " + std::to_string(y.id()) + "): label 3 at labels[0] is outside the classes [0, 3)"});
  g.set_value(labels, Labels{1, 1});
  g.replay();
  BOOST_TEST(y.value() == (xt::xarray<double>{2, 5}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3}));
  const auto scalar = g.input("s", xt::xarray<double>(1.0));
  const auto labels = g.indices("labels", Labels{0, 1, 2});
  check_error([&] { xgrad::take_label(scalar, labels); }, {"take_label (node 3): x () needs a last axis of classes: (..., C)"});
  check_error([&] { xgrad::take_label(x, labels); },
              {"take_label (node 3): x (2, 3) must be (labels..., C), its leading axes (2,) broadcasting to labels (3,)"});
  // x's leading axes broadcast to labels', not the other way round.
  const auto big = g.input("big", xt::zeros<double>({2, 2, 3}));
  check_error([&] { xgrad::take_label(big, g.indices("l2", Labels{0, 1})); },
              {"x (2, 2, 3) must be (labels..., C), its leading axes (2, 2) broadcasting to labels (2,)"});
  check_error([&] { xgrad::take_label_vjp(x, labels, 3); },
              {"take_label_vjp (node 5): grad_out (2, 3) must have the shape of labels (3,)"});
  const auto wide = g.input("wide", xt::zeros<double>({std::size_t(1) << 15}));
  const auto many = g.indices("many", Labels::from_shape({std::size_t(1) << 15}));
  check_error([&] { xgrad::take_label_vjp(wide, many, std::size_t(1) << 14); },
              {"take_label_vjp (node 7): the gradient (32768, 16384) (labels..., C) of 16384 classes makes more than 268435456 elements"});
  BOOST_TEST(g.size() == 7u);
}

BOOST_AUTO_TEST_CASE(rejects_bad_labels_naming_position_and_value) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 3, 4}));
  check_error([&] { xgrad::take_label(x, g.indices("a", Labels{{0, 1, 2}, {3, 4, 0}})); },
              {"take_label (node 2): label 4 at labels[1, 1] is outside the classes [0, 4)"});
  check_error([&] { xgrad::take_label(x, g.indices("b", Labels{{0, -1, 2}, {3, 9, 0}}), -100); },
              {"label -1 at labels[0, 1] is outside the classes [0, 4) and is not ignore_index -100"});
  check_error([&] { xgrad::take_label(g.input("w", xt::zeros<double>({4})), g.indices("c", Labels(7))); },
              {"label 7 at labels[] is outside the classes [0, 4)"});
  const auto go = g.input("go", xt::zeros<double>({2}));
  check_error([&] { xgrad::take_label_vjp(go, g.indices("d", Labels{1, 5}), 5); },
              {"take_label_vjp (node", "label 5 at labels[1] is outside the classes [0, 5)"});
  // Labels must be an index leaf: values of the dtype (a constant, a mask) are refused.
  check_error([&] { xgrad::take_label(x, g.constant("f", xt::xarray<double>{{0, 1, 2}, {3, 0, 1}})); },
              {"take_label (node", "labels must be an index leaf (Graph::indices) of int64 class labels, not float64 values"});
  check_error([&] { xgrad::take_label_vjp(go, g.input("h", xt::xarray<double>{0, 1}), 2); },
              {"take_label_vjp (node", "labels must be an index leaf (Graph::indices)"});
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 4}, 7));
  const auto labels = g.indices("labels", Labels{3, -100, 0});
  const auto y = xgrad::take_label(x, labels, -100);
  const auto gx = grad(y, {x})[0];
  const auto plain = xgrad::take_label(x, g.indices("kept", Labels{1, 2, 3}));
  const auto gp = grad(plain, {x})[0];
  check_attrs_round_trip(y, "take_label", R"({"ignore_index":-100})");
  check_attrs_round_trip(gx, "take_label_vjp", R"({"classes":4,"ignore_index":-100})");
  check_attrs_round_trip(plain, "take_label", "{}");
  const Json j = check_attrs_round_trip(gp, "take_label_vjp", R"({"classes":4})");
  check_refuses_bad_attrs(j, gx.id(), {"classes"});
  check_refuses_attr(j, gx.id(), "classes", 5,
                     "nodes[" + std::to_string(gx.id()) + "].outputs[0].shape: declared (3, 4), but take_label_vjp of its inputs gives (3, 5)");
  check_refuses_attr(to_json(g, ExportValues::all), y.id(), "ignore_index", "none",
                     "nodes[" + std::to_string(y.id()) + "].attrs.ignore_index: expected an integer");
}

BOOST_AUTO_TEST_SUITE_END()
