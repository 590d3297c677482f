#include "../check.hpp"

#include <cmath>
#include <limits>

namespace {

xt::xarray<double> fixture(const std::string& name) { return torch_fixture("embedding_" + name); }

// The ids of a fixture as int64 (they are saved as float64 integers).
xt::xarray<std::int64_t> fixture_ids(const std::string& what) { return xt::cast<std::int64_t>(fixture(what + "_ids")); }

}  // namespace

BOOST_AUTO_TEST_SUITE(embedding)

BOOST_AUTO_TEST_CASE(forward_matches_hand_values) {
  Graph<double> g;
  const auto table = g.input("table", {{1, 2}, {3, 4}, {5, 6}});
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{{2, 0}, {2, 2}});
  const auto y = xgrad::embedding(table, ids);
  BOOST_TEST(y.value() == (xt::xarray<double>{{{5, 6}, {1, 2}}, {{5, 6}, {5, 6}}}));
  // A scalar id gives one row (d); empty ids give (0, d).
  BOOST_TEST(xgrad::embedding(table, g.indices("one", xt::xarray<std::int64_t>(1))).value() == (xt::xarray<double>{3, 4}));
  const auto none = xgrad::embedding(table, g.indices("none", xt::xarray<std::int64_t>::from_shape({0})));
  BOOST_TEST(none.value().shape() == (std::vector<std::size_t>{0, 2}), boost::test_tools::per_element());
  // ids as a Var of the graph's dtype give the same rows, -0.0 as row 0.
  const auto vids = g.input("vids", xt::xarray<double>{{2, -0.0}, {2, 2}});
  BOOST_TEST(xgrad::embedding(table, vids).value() == y.value());
}

BOOST_AUTO_TEST_CASE(matches_pytorch) {
  // tests/data/make_torch_fixtures.py, part embedding: forward and the table's gradient, with
  // repeated ids, for ids (3, 5), (4,) and a scalar; as an index leaf and as a float64 Var.
  for (const std::string what : {"matrix", "vector", "scalar"}) {
    for (bool index_leaf : {true, false}) {
      BOOST_TEST_CONTEXT(what << (index_leaf ? ", index leaf" : ", float64 ids")) {
        Graph<double> g;
        const auto table = g.parameter("table", fixture("table"));
        const auto ids = index_leaf ? g.indices("ids", fixture_ids(what)) : g.input("ids", xt::cast<double>(fixture_ids(what)));
        const auto y = xgrad::embedding(table, ids);
        check_close(y.value(), fixture(what + "_y"));
        const auto grad_table = grad(y, {table}, fixture(what + "_grad_out"))[0];
        BOOST_TEST(grad_table.node().op_name() == "embedding_vjp");
        check_close(grad_table.value(), fixture(what + "_grad_table"));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(repeated_ids_sum_in_one_order_whatever_the_thread_count) {
  // 2000 positions into 3 rows of 600: the scatter-add runs over 2 threads (columns split), and
  // gives the bits of 1 thread, and of the sum taken in row-major order by hand.
  xt::xarray<std::int64_t> ids = xt::xarray<std::int64_t>::from_shape({2000});
  for (std::size_t i = 0; i < ids.size(); ++i) ids(i) = static_cast<std::int64_t>((i * 7) % 3);
  const xt::xarray<double> grad_out = random_array<double>({2000, 600}, 3);
  xt::xarray<double> expected = xt::zeros<double>({3, 600});
  for (std::size_t i = 0; i < 2000; ++i) {
    for (std::size_t c = 0; c < 600; ++c) expected(ids(i), c) += grad_out(i, c);
  }
  std::vector<xt::xarray<double>> results;
  for (int threads : {1, 2}) {
    const test::BlasThreads set(threads);
    Graph<double> g;
    results.push_back(xgrad::embedding_vjp(g.input("g", grad_out), g.indices("ids", ids), 3).value());
  }
  BOOST_TEST(same_bits(results[0], expected));
  BOOST_TEST(same_bits(results[1], expected));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(vjp_matches_finite_differences, T, test::dtypes) {
  Graph<T> g;
  const auto table = g.input("table", random_array<T>({5, 3}, 1));
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{{4, 0, 4}, {1, 1, 4}});
  const auto y = xgrad::embedding(table, ids);
  check_gradients(y, {table});
  // Second order: the VJP is embedding_vjp, whose own VJP w.r.t. grad_out is an embedding.
  const auto u = g.input("u", random_array<T>({2, 3, 3}, 2));
  const auto gt = grad(y, {table}, u)[0];
  check_gradients(gt, {u, table});
  const auto w = g.input("w", random_array<T>({5, 3}, 3));
  const auto gu = grad(gt, {u}, w)[0];
  BOOST_TEST(gu.node().op_name() == "embedding");
  check_gradients(gu, {w});
  // The same with ids as a constant Var of the dtype.
  const auto cids = g.constant("cids", xt::xarray<T>{3, 3, 2});
  check_gradients(xgrad::embedding(table, cids), {table});
}

BOOST_AUTO_TEST_CASE(ids_as_a_var_get_zeros_as_their_gradient) {
  // y is piecewise constant in the ids (PyTorch gives indices no gradient): a Var of ids asked
  // for its gradient gets zeros, for embedding and embedding_vjp alike.
  Graph<double> g;
  const auto table = g.input("table", random_array<double>({4, 2}, 1));
  const auto ids = g.input("ids", xt::xarray<double>{{3, 1}, {0, 3}});
  const auto y = xgrad::embedding(table, ids);
  const auto grads = grad(y, {table, ids});
  BOOST_TEST(grads[1].value() == xt::xarray<double>(xt::zeros<double>({2, 2})));
  BOOST_TEST(grads[0].value() == (xt::xarray<double>{{1, 1}, {1, 1}, {0, 0}, {2, 2}}));
  const auto gg = grad(grads[0], {ids});
  BOOST_TEST(gg[0].value() == xt::xarray<double>(xt::zeros<double>({2, 2})));
}

BOOST_AUTO_TEST_CASE(a_new_batch_of_ids_replays) {
  Graph<double> g;
  const auto table = g.parameter("table", {{1, 2}, {3, 4}, {5, 6}});
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{0, 1});
  const auto vids = g.input("vids", xt::xarray<double>{0, 1});
  const auto y = xgrad::embedding(table, ids);
  const auto z = xgrad::embedding(table, vids);
  const auto gt = grad(add(y, z), {table})[0];
  g.set_value(ids, xt::xarray<std::int64_t>{2, 2});
  g.set_value(vids, xt::xarray<double>{1, 2});
  g.replay();
  BOOST_TEST(y.value() == (xt::xarray<double>{{5, 6}, {5, 6}}));
  BOOST_TEST(z.value() == (xt::xarray<double>{{3, 4}, {5, 6}}));
  BOOST_TEST(gt.value() == (xt::xarray<double>{{0, 0}, {1, 1}, {3, 3}}));
}

BOOST_AUTO_TEST_CASE(rejects_bad_shapes) {
  Graph<double> g;
  const auto flat = g.input("flat", xt::zeros<double>({3}));
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{0});
  check_error([&] { xgrad::embedding(flat, ids); }, {"embedding (node 2): table (3,) must be a matrix (V, d)"});
  const auto go = g.input("go", xt::zeros<double>({2, 4}));
  check_error([&] { xgrad::embedding_vjp(go, ids, 5); }, {"embedding_vjp (node 3): grad_out (2, 4) must be (ids..., d) for ids (1,)"});
  const auto wide = g.input("wide", xt::xarray<double>::from_shape({1, std::size_t(1) << 15}));
  const auto many = g.indices("many", xt::xarray<std::int64_t>::from_shape({std::size_t(1) << 14}));
  check_error([&] { xgrad::embedding(wide, many); },
              {"embedding (node 5): the output (16384, 32768) (ids..., d) of table (1, 32768) and ids (16384,) makes more than 268435456 elements"});
  const auto go1 = g.input("go1", xt::zeros<double>({1, 1 << 10}));
  check_error([&] { xgrad::embedding_vjp(go1, ids, std::size_t(1) << 20); },
              {"embedding_vjp (node 6): the gradient (1048576, 1024) (V, d) of a table of 1048576 rows makes more than 268435456 elements"});
  BOOST_TEST(g.size() == 6u);
}

BOOST_AUTO_TEST_CASE(rejects_bad_ids_naming_position_and_value) {
  Graph<double> g;
  const auto table = g.input("table", xt::zeros<double>({7, 2}));
  const auto bad = [&](xt::xarray<double> ids, const std::string& message) {
    check_error([&] { xgrad::embedding(table, g.input("ids", ids)); }, {message});
  };
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  bad(xt::xarray<double>{{0, 1, 2, 3}, {0, 1, 2, 7}}, "embedding (node 2): id 7 at ids[1, 3] is out of range for a table of 7 rows");
  bad(xt::xarray<double>{{0, 2.5}}, "id 2.5 at ids[0, 1] is not an integer");
  bad(xt::xarray<double>{1, nan}, "id nan at ids[1] is not an integer");
  bad(xt::xarray<double>{inf}, "id inf at ids[0] is not an integer");
  bad(xt::xarray<double>{0, -1}, "id -1 at ids[1] is negative");
  bad(xt::xarray<double>(9), "id 9 at ids[] is out of range");
  // The first bad id in row-major order is named, whatever the thread count.
  const auto many = g.indices("many", xt::xarray<std::int64_t>(xt::zeros<std::int64_t>({100000})));
  g.set_value(many, [] {
    xt::xarray<std::int64_t> v = xt::zeros<std::int64_t>({100000});
    v(60000) = -3;
    v(90000) = 8;
    return v;
  }());
  for (int threads : {1, 2}) {
    const test::BlasThreads set(threads);
    check_error([&] { xgrad::embedding(table, many); }, {"id -3 at ids[60000] is negative"});
  }
  // The same rules for an index leaf, and in embedding_vjp.
  check_error([&] { xgrad::embedding(table, g.indices("i", xt::xarray<std::int64_t>{7})); },
              {"id 7 at ids[0] is out of range for a table of 7 rows"});
  const auto go = g.input("go", xt::zeros<double>({1, 2}));
  check_error([&] { xgrad::embedding_vjp(go, g.indices("j", xt::xarray<std::int64_t>{-2}), 7); },
              {"embedding_vjp (node", "id -2 at ids[0] is negative"});
  // A replay with a bad batch names the node too.
  const auto ids = g.indices("k", xt::xarray<std::int64_t>{1});
  const auto y = xgrad::embedding(table, ids);
  g.set_value(ids, xt::xarray<std::int64_t>{9});
  check_error([&] { g.replay(); }, {"embedding (node " + std::to_string(y.id()) + "): id 9 at ids[0] is out of range"});
}

BOOST_AUTO_TEST_CASE(float32_ids_stop_below_2_to_the_24) {
  // float32 holds every integer only below 2^24: 2^24 + 1 rounds to 2^24, so such ids could
  // name the wrong row. An index leaf holds any id.
  Graph<float> g;
  const std::size_t rows = (std::size_t(1) << 24) + 2;
  const auto table = g.input("table", xt::xarray<float>::from_shape({rows, 0}));  // V rows of d = 0
  const auto below = g.input("below", xt::xarray<float>{16777215.0f});
  BOOST_CHECK_NO_THROW(xgrad::embedding(table, below));
  const auto at = g.input("at", xt::xarray<float>{0.0f, 16777216.0f});
  check_error([&] { xgrad::embedding(table, at); },
              {"id 16777216 at ids[1] is 2^24 = 16777216 or more, where float32 no longer holds every integer: give such "
               "ids as an index leaf (Graph::indices)"});
  const auto leaf = g.indices("leaf", xt::xarray<std::int64_t>{16777217});
  BOOST_CHECK_NO_THROW(xgrad::embedding(table, leaf));
}

BOOST_AUTO_TEST_CASE(attrs_round_trip) {
  Graph<double> g;
  const auto table = g.input("table", random_array<double>({4, 3}, 5));
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{{3, 0}, {3, 3}});
  const auto y = xgrad::embedding(table, ids);
  const auto gt = grad(y, {table})[0];
  check_attrs_round_trip(y, "embedding", "{}");
  const Json j = check_attrs_round_trip(gt, "embedding_vjp", R"({"rows":4})");
  check_refuses_bad_attrs(j, gt.id(), {"rows"});
  check_refuses_attr(j, gt.id(), "rows", 5,
                     "nodes[" + std::to_string(gt.id()) + "].outputs[0].shape: declared (4, 3), but embedding_vjp of its inputs gives (5, 3)");
}

BOOST_AUTO_TEST_SUITE_END()
