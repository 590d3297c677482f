#include "../check.hpp"

#include <map>

#include <xtensor/xview.hpp>

BOOST_AUTO_TEST_SUITE(split)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  // torch.split: along the first, the last and a middle axis, a block of length 0, one block a copy.
  Graph<double> g;
  const auto a = g.input("a", {{1, 2, 3}, {4, 5, 6}});
  const auto rows = xgrad::split(a, {1, 1}, 0);
  BOOST_TEST_REQUIRE(rows.size() == 2u);
  BOOST_TEST(rows[0].value() == (xt::xarray<double>{{1, 2, 3}}));
  BOOST_TEST(rows[1].value() == (xt::xarray<double>{{4, 5, 6}}));
  BOOST_TEST(rows[0].id() == rows[1].id());  // one node, two outputs
  const auto cols = xgrad::split(a, {2, 0, 1}, -1);
  BOOST_TEST_REQUIRE(cols.size() == 3u);
  BOOST_TEST(cols[0].value() == (xt::xarray<double>{{1, 2}, {4, 5}}));
  BOOST_TEST(cols[1].value().shape() == (std::vector<std::size_t>{2, 0}), boost::test_tools::per_element());
  BOOST_TEST(cols[2].value() == matrix<double>({{3.0}, {6.0}}));
  BOOST_TEST(xgrad::split(a, {3}, 1)[0].value() == a.value());
  const auto x = g.input("x", random_array<double>({2, 5, 3}, 1));
  const auto mid = xgrad::split(x, {3, 2}, 1);
  BOOST_TEST(mid[0].value() == xt::xarray<double>(xt::view(x.value(), xt::all(), xt::range(0, 3), xt::all())));
  BOOST_TEST(mid[1].value() == xt::xarray<double>(xt::view(x.value(), xt::all(), xt::range(3, 5), xt::all())));
  // An empty axis: blocks of length 0 only.
  const auto e = g.input("e", xt::xarray<double>::from_shape({2, 0}));
  BOOST_TEST(xgrad::split(e, {0, 0}, 1)[1].value().shape() == (std::vector<std::size_t>{2, 0}), boost::test_tools::per_element());
  Graph<float> f;
  const auto p = f.input("p", xt::xarray<float>{1, 2, 3});
  BOOST_TEST(xgrad::split(p, {2, 1}, 0)[1].value() == (xt::xarray<float>{3}));
}

BOOST_AUTO_TEST_CASE(chunk_gives_torchs_parts) {
  // torch.chunk's sizes for every length 0-12 and n 1-7 (tests/data/make_torch_fixtures.py).
  const xt::xarray<double> table = torch_fixture("split_chunk_sizes");
  BOOST_TEST_REQUIRE(table.shape()[0] == 13u * 7u);
  for (std::size_t row = 0; row < table.shape()[0]; ++row) {
    const auto length = static_cast<std::size_t>(table(row, 0)), n = static_cast<std::size_t>(table(row, 1));
    std::vector<std::size_t> expected;
    for (std::size_t k = 2; k < table.shape()[1] && table(row, k) >= 0; ++k) expected.push_back(static_cast<std::size_t>(table(row, k)));
    BOOST_TEST(chunk_sizes(length, n) == expected, boost::test_tools::per_element());
    Graph<double> g;
    const auto x = g.input("x", xt::xarray<double>::from_shape({2, length}));
    const auto parts = chunk(x, n, -1);
    BOOST_TEST_REQUIRE(parts.size() == expected.size(), "length " << length << ", n " << n);
    for (std::size_t k = 0; k < parts.size(); ++k) BOOST_TEST(parts[k].shape()[1] == expected[k]);
  }
  BOOST_TEST(chunk_sizes(5, 4) == (std::vector<std::size_t>{2, 2, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(matches_pytorch_where_only_some_outputs_are_used) {
  Graph<double> g;
  const auto x = g.input("x", torch_fixture("split_x"));  // (2, 7, 3)
  const auto y = xgrad::split(x, {2, 0, 4, 1}, 1);
  check_close(y[0].value(), torch_fixture("split_y0"), 0);
  check_close(y[2].value(), torch_fixture("split_y2"), 0);
  check_close(y[3].value(), torch_fixture("split_y3"), 0);
  // Outputs 1 and 3 get no gradient: their parts of grad_x are zeros.
  const auto loss = add(sum(mul(y[0], g.input("u0", torch_fixture("split_u0")))), sum(mul(y[2], g.input("u2", torch_fixture("split_u2")))));
  check_close(grad(loss, {x})[0].value(), torch_fixture("split_grad_x"), 0);
  const auto parts = chunk(x, 2, -1);  // sizes 2, 1: only the last part used
  BOOST_TEST_REQUIRE(parts.size() == 2u);
  check_close(parts[1].value(), torch_fixture("split_chunk_last"), 0);
  check_close(grad(parts[1], {x}, torch_fixture("split_v"))[0].value(), torch_fixture("split_chunk_grad_x"), 0);
}

BOOST_AUTO_TEST_CASE(vjp_is_concat_with_pad_for_outputs_no_gradient_reaches) {
  // Gradients of outputs 1 and 3 of four: pads of zeros ahead of each (outputs 0 and 2) and behind the
  // last, then one concat; no constant of zeros.
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({3, 8}, 2));
  const auto y = xgrad::split(x, {1, 2, 3, 2}, -1);
  const std::size_t before = g.size();
  const auto gx = grad(add(sum(y[1]), sum(y[3])), {x})[0];
  std::map<std::string, int> ops;
  for (std::size_t i = before; i < g.size(); ++i) ++ops[g.node(i).op_name()];
  BOOST_TEST(ops["pad"] == 2);
  BOOST_TEST(ops["concat"] == 1);
  BOOST_TEST(ops["constant"] == 1);  // the seed
  BOOST_TEST(gx.node().op_name() == "concat");
  xt::xarray<double> expected = xt::zeros<double>({3, 8});
  xt::view(expected, xt::all(), xt::range(1, 3)) = 1.0;
  xt::view(expected, xt::all(), xt::range(6, 8)) = 1.0;
  BOOST_TEST(gx.value() == expected);
  // Only the middle output: one pad of both sides, no concat.
  const std::size_t again = g.size();
  const auto only = grad(sum(y[2]), {x})[0];
  BOOST_TEST(only.node().op_name() == "pad");
  std::map<std::string, int> only_ops;
  for (std::size_t i = again; i < g.size(); ++i) ++only_ops[g.node(i).op_name()];
  BOOST_TEST(only_ops["pad"] == 1);
  BOOST_TEST(only_ops["concat"] == 0);
  // Every output: one concat of the gradients themselves.
  const auto all = grad(add(add(sum(y[0]), sum(y[1])), add(sum(y[2]), sum(y[3]))), {x})[0];
  BOOST_TEST(all.node().op_name() == "concat");
  BOOST_TEST(all.value() == xt::xarray<double>(xt::ones<double>({3, 8})));
}

BOOST_AUTO_TEST_CASE(vjp_matches_finite_differences_to_second_order) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 6, 3}, 3));
  const auto w = g.input("w", random_array<double>({2, 6, 3}, 4));
  const auto y = xgrad::split(x, {2, 1, 3}, 1);
  // Each output alone, two of them, and all three through other ops.
  for (const auto& out : y) check_gradients(out, {x});
  check_gradients(add(sum(mul(y[0], y[0])), sum(tanh(y[2]))), {x});
  check_gradients(add(sum(exp(y[0])), add(sum(mul(y[1], y[1])), sum(sin(y[2])))), {x});
  // Second order: the VJP is pad and concat nodes, themselves differentiable.
  const auto loss = add(sum(mul(mul(y[0], y[0]), y[0])), sum(tanh(y[2])));
  const auto gx = grad(loss, {x})[0];
  check_gradients(gx, {x});
  check_gradients(sum(mul(gx, w)), {x, w});
  // chunk along axis 0 and a rank-1 x.
  const auto v = g.input("v", random_array<double>({5}, 5));
  const auto c = chunk(v, 3, 0);  // 2, 2, 1
  check_gradients(add(sum(mul(c[0], c[0])), sum(exp(c[2]))), {v});
}

BOOST_AUTO_TEST_CASE(rejects_bad_sizes_axes_and_shapes) {
  Graph<double> g;
  const auto x = g.input("x", xt::zeros<double>({2, 5}));
  const auto s = g.input("s", xt::xarray<double>(1.0));
  const std::size_t nodes = g.size();
  check_error([&] { xgrad::split(x, {2, 2}, 1); }, {"split (node 2): sizes [2, 2] sum to 4, not to the length 5 of axis 1 of x (2, 5)"});
  check_error([&] { xgrad::split(x, {3, 3}, -1); }, {"split (node 2): sizes [3, 3] sum to 6, not to the length 5 of axis -1 of x (2, 5)"});
  check_error([&] { xgrad::split(x, {2, std::size_t(-1)}, 0); }, {"sum to more than 18446744073709551615, not to the length 2 of axis 0 of x (2, 5)"});
  check_error([&] { xgrad::split(x, {5}, 2); }, {"split (node 2): axis 2 is out of range for a (2, 5) input"});
  check_error([&] { xgrad::split(x, {2}, -3); }, {"split (node 2): axis -3 is out of range for a (2, 5) input"});
  check_error([&] { xgrad::split(s, {1}, 0); }, {"split (node 2): x must have rank >= 1 to be split: x is ()"});
  check_error([&] { xgrad::split(x, {}, 0); }, {"split: takes 1 to 65536 sizes, got 0"});
  check_error([&] { xgrad::split(x, std::vector<std::size_t>(65537, 0), 0); }, {"split: takes 1 to 65536 sizes, got 65537"});
  check_error([&] { chunk(x, 0, 1); }, {"chunk: n must be from 1 to 65536, got 0"});
  check_error([&] { chunk(x, 70000, 1); }, {"chunk: n must be from 1 to 65536, got 70000"});
  check_error([&] { chunk(x, 2, 2); }, {"chunk: axis 2 is out of range for a (2, 5) input"});
  check_error([&] { chunk(x, 2, -3); }, {"chunk: axis -3 is out of range for a (2, 5) input"});
  check_error([&] { chunk(s, 2, 0); }, {"chunk: x must have rank >= 1 to be split: x is ()"});
  BOOST_TEST(g.size() == nodes);  // nothing added
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2, 3, 4}});
  const auto y = xgrad::split(x, {1, 0, 3}, -1);
  check_attrs_round_trip(y[0], "split", R"({"axis":-1,"sizes":[1,0,3]})");
  const auto copy = graph_from_json<double>(to_json(g, ExportValues::all).dump());
  BOOST_TEST(copy->node(1).output_count() == 3u);
  BOOST_TEST(copy->node(1).value(2) == y[2].value());
  // Bad attrs in a file: the path and the problem.
  const Json good = to_json(g, ExportValues::all);
  const auto refuses = [&](const Json& attrs, const std::string& message) {
    Json bad = good;
    bad["nodes"][1]["attrs"] = attrs;
    check_error([&] { graph_from_json<double>(bad.dump()); }, {message});
  };
  refuses(Json::parse(R"({"axis": -1, "sizes": []})"), "nodes[1].attrs.sizes: split takes 1 to 65536 sizes, got 0");
  refuses(Json::parse(R"({"axis": -1, "sizes": [1, -2, 3]})"), "nodes[1].attrs.sizes[1]: expected a non-negative integer, got -2");
  refuses(Json::parse(R"({"axis": -1, "sizes": [1, 1.5]})"), "nodes[1].attrs.sizes[1]");
  refuses(Json::parse(R"({"axis": -1, "sizes": 4})"), "nodes[1].attrs.sizes");
  refuses(Json::parse(R"({"axis": 0.5, "sizes": [4]})"), "nodes[1].attrs.axis");
  refuses(Json::parse(R"({"sizes": [4]})"), "nodes[1].attrs");
  refuses(Json::parse(R"({"axis": 1, "sizes": [1, 3]})"), "nodes[1].outputs: split has 2 outputs, got 3");
  Json many = Json::parse(R"({"axis": 1})");
  many["sizes"] = std::vector<std::size_t>(70000, 0);
  refuses(many, "nodes[1].attrs.sizes: split takes 1 to 65536 sizes, got 70000");
  // Sizes that do not fit x: the shape check names them.
  Json wrong = good;
  wrong["nodes"][1]["attrs"]["sizes"] = {1, 1, 1};
  check_error([&] { graph_from_json<double>(wrong.dump()); }, {"sizes [1, 1, 1] sum to 3, not to the length 4 of axis -1 of x (1, 4)"});
}

BOOST_AUTO_TEST_CASE(exports_imports_and_replays) {
  // Split with gradients through JSON: the same text back, and new inputs replayed through the
  // imported graph give a fresh build's values.
  const auto build = [](Graph<double>& g, const xt::xarray<double>& value) {
    const auto x = g.input("x", value);
    const auto y = xgrad::split(x, {1, 2, 1}, 0);
    const auto loss = add(sum(mul(y[0], y[0])), sum(exp(y[2])));
    g.set_output("loss", loss);
    g.set_grad("x", grad(loss, {x})[0]);
    return loss;
  };
  Graph<double> g;
  const auto loss = build(g, random_array<double>({4, 3}, 6));
  const std::string text = to_json(g, ExportValues::all).dump();
  const auto imported = graph_from_json<double>(text);
  imported->replay();
  BOOST_TEST(to_json(*imported, ExportValues::all).dump() == text);
  const xt::xarray<double> x2 = random_array<double>({4, 3}, 7);
  imported->set_value(imported->var(0), x2);
  imported->replay();
  Graph<double> fresh;
  const auto floss = build(fresh, x2);
  BOOST_TEST(imported->node(loss.id()).value() == floss.value());
  const Slot gx = g.grads().at("x");
  BOOST_TEST(imported->node(gx.node).value(gx.output) == fresh.node(fresh.grads().at("x").node).value(fresh.grads().at("x").output));
}

BOOST_AUTO_TEST_SUITE_END()
