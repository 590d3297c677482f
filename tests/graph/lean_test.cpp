// Lean replays (Graph::keep_only): the kept values are a full replay's bits, released values
// cannot be read, and attention's forward+backward holds two T_q x T_k arrays, not four.
#include "../check.hpp"

#include <set>

#include <xgrad/ops/kernels/parallel.hpp>

namespace {

// Attention forward and backward over T queries and keys of width d, with out and the three
// gradients named as the graph's output and grads.
template <class T>
struct AttentionGraph {
  Graph<T> g;
  Var<T> q, k, v, seed, out;
  std::vector<Var<T>> grads;

  AttentionGraph(std::size_t t, std::size_t d, std::uint64_t seed_no) {
    q = g.input("q", random_array<T>({t, d}, seed_no));
    k = g.input("k", random_array<T>({t, d}, seed_no + 1));
    v = g.input("v", random_array<T>({t, d}, seed_no + 2));
    out = attention(q, k, v);
    seed = g.input("grad_out", random_array<T>({t, d}, seed_no + 3));
    grads = grad(out, {q, k, v}, seed);
    g.set_output("out", out);
    for (std::size_t i = 0; i < 3; ++i) g.set_grad(std::string(1, "qkv"[i]), grads[i]);
  }
  void set_inputs(std::uint64_t seed_no) {
    const Shape s = shape_of(q);
    for (const auto& x : {q, k, v, seed}) g.set_value(x, random_array<T>(s, seed_no++));
  }
  std::vector<xt::xarray<T>> results() const {
    return {out.value(), grads[0].value(), grads[1].value(), grads[2].value()};
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(lean)

BOOST_AUTO_TEST_CASE_TEMPLATE(attention_replays_to_the_same_bits, T, test::dtypes) {
  AttentionGraph<T> full(48, 8, 1), lean(48, 8, 1);
  lean.g.keep_only({});
  BOOST_TEST(lean.g.lean());
  for (std::uint64_t inputs : {10, 20}) {  // the second replay reuses the first one's buffers
    full.set_inputs(inputs);
    lean.set_inputs(inputs);
    full.g.replay();
    lean.g.replay();
    const auto a = full.results(), b = lean.results();
    for (std::size_t i = 0; i < a.size(); ++i) BOOST_TEST(same_bits(a[i], b[i]), "result " << i << ", inputs " << inputs);
  }
  // Everything else is released; keep_all and a replay bring every value back.
  std::size_t released = 0;
  for (std::size_t id = 0; id < lean.g.size(); ++id) released += lean.g.node(id).released;
  BOOST_TEST(released + 8 == lean.g.size());  // 4 leaves, out and 3 gradients
  lean.g.keep_all();
  lean.g.replay();
  for (std::size_t id = 0; id < full.g.size(); ++id) {
    BOOST_TEST(!lean.g.node(id).released);
    BOOST_TEST(same_bits(full.g.node(id).value(), lean.g.node(id).value()), "node " << id);
  }
}

BOOST_AUTO_TEST_CASE(attention_holds_two_score_sized_arrays) {
  // Full: the scores, the weights and both their gradients (4 T x T). Lean: the weights (written
  // over the scores) and the gradient of the weights; the gradient of the scores is written over
  // the weights, read there for the last time.
  const std::size_t t = 256, d = 4;
  AttentionGraph<double> full(t, d, 1), lean(t, d, 1);
  lean.g.keep_only({});
  lean.g.replay();
  lean.g.replay();
  const std::size_t m = t * t, small = 40 * t * d;  // O(T d): inputs, results and their kin
  BOOST_TEST(full.g.held_elements() >= 4 * m);
  BOOST_TEST(lean.g.held_elements() <= 2 * m + small, lean.g.held_elements() << " elements, M = " << m);
  BOOST_TEST(lean.g.held_elements() >= 2 * m);  // the weights must meet their gradient
}

BOOST_AUTO_TEST_CASE(ops_that_overwrite_inputs_give_the_same_bits) {
  // Each op that declares Op::overwrites_input(i), run with y the very array of input i (and of
  // every other slot holding the same input; in y's shape, as a lean replay gives it), against
  // its own separate output: rows long enough
  // to be split over 2 threads, along the last axis and the first (strided), and broadcasting
  // for the binary ops. The property test checks that no other op declares it.
  const test::BlasThreads two(2);
  BOOST_TEST_REQUIRE(xgrad::detail::parallel_threads() == 2u);
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({300, 700}, 1));
  const auto b = g.input("b", random_array<double>({300, 700}, 2));
  const auto row = g.input("row", random_array<double>({1, 700}, 3));
  const auto w = softmax(a);
  std::vector<Var<double>> nodes = {w, softmax(a, 0), softmax_vjp(w, b), softmax_vjp(w, b, 0), scale(a, 0.3),
                                    softmax_vjp(w, w), dropout(a, 0.3, 7), gelu(a), gelu(a, GeluApprox::tanh),
                                    gelu_vjp(a, b), gelu_vjp(a, b, GeluApprox::tanh), gelu_vjp(a, a),
                                    reshape(a, {700, 300}), apply_mask(a, row, -1.0), apply_mask(a, b, 0.0),
                                    where(b, a, row), where(row, a, b), where(a, b, a), pow(a, 3.0), pow(a, 2.0)};
  std::size_t rows = 0, expected = 30;  // the checks of these nodes, one for each input of a's shape
  // Every row of ops/elementwise.def: a unary op on a (1 check); a binary one on a and b (2), on
  // a row broadcast either side (1 and 1), and on a twice (2).
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX) \
  nodes.push_back(NAME(a));                           \
  ++rows;                                             \
  expected += 1;
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                    \
  nodes.insert(nodes.end(), {NAME(a, b), NAME(a, row), NAME(row, a), NAME(a, a)}); \
  ++rows;                                                                          \
  expected += 6;
#include <xgrad/ops/elementwise.def>
  std::set<std::string> ops;
  std::size_t checked = 0;
  for (const auto& y : nodes) {
    const Node<double>& n = y.node();
    for (std::size_t i = 0; i < n.inputs.size(); ++i) {
      if (!n.op->overwrites_input(i) || g.node(n.inputs[i].node).value().size() != n.value().size()) continue;
      xt::xarray<double> over = g.node(n.inputs[i].node).value();
      Args<double> args;
      for (auto in : n.inputs) args.push_back(in == n.inputs[i] ? &over : &g.node(in.node).value());
      over.resize(n.value().shape());  // as a lean replay: the input's elements, in y's shape
      n.op->forward(args, over);
      BOOST_TEST(same_bits(over, n.value()), n.op_name() << " (node " << y.id() << ") over input " << i);
      ops.insert(n.op_name());
      ++checked;
    }
  }
  BOOST_TEST(checked == expected);
  BOOST_TEST(ops.size() == 10 + rows);
}

BOOST_AUTO_TEST_CASE(an_op_reading_two_outputs_of_one_node_does_not_write_over_either) {
  // Regression (found by the property test's graphs at 600 seeds): gelu_vjp(mean, y) of one
  // layer_norm, its last reader. The lean replay wrote gelu_vjp's output over the mean and, in
  // taking it, released the layer_norm node, y's buffer with it, which gelu_vjp then read.
  Graph<double> full, lean;
  for (Graph<double>* g : {&full, &lean}) {
    const auto x = g->input("x", random_array<double>({3, 1}, 1));
    const auto gamma = g->input("gamma", xt::xarray<double>{1.5});
    const auto ln = layer_norm(x, gamma, gamma, 0.1);
    g->set_output("y", permute(gelu_vjp(g->var(ln.id(), 1), ln), {1, 0}));
  }
  lean.keep_only({});
  for (std::uint64_t round = 1; round <= 2; ++round) {
    for (Graph<double>* g : {&full, &lean}) {
      g->set_value(g->var(0), random_array<double>({3, 1}, round + 1));
      g->replay();
    }
    const Slot y = lean.outputs().at("y");
    BOOST_TEST(same_bits(lean.node(y.node).value(), full.node(y.node).value()), "round " << round);
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(heads_split_for_matmul_are_read_as_views, T, test::dtypes) {
  // A multi-head block with its loss and parameter gradients: the lean replay leaves out the
  // copies whose readers are all matmuls (Op::view_of, Op::reads_view): v's head split and the
  // head split of the output's gradient (a reshape and a permute each), and the 8 reshapes to
  // rows that the weights' gradients multiply (rows_product): 12 nodes. q's split is read by
  // scale, k's by transpose (a transposed view would change OpenBLAS's bits), the merged heads
  // by linear: copied. Values and gradients are a full replay's bits, the second replay's (its
  // plan reused) too.
  Graph<T> full, lean;
  std::vector<Var<T>> results[2];
  for (int i = 0; i < 2; ++i) {
    Graph<T>& g = i ? lean : full;
    const auto x = g.input("x", random_array<T>({3, 7, 8}, 1));
    const auto p = attention_params(g, 8, 2);
    const auto y = multi_head_attention(x, x, p, 2, causal_mask(7, 7));
    const auto loss = sum(y * y);
    results[i] = grad(loss, g.parameters());
    results[i].push_back(loss);
  }
  lean.keep_only(results[1]);
  BOOST_TEST(lean.viewed_nodes() == 0u);
  for (std::uint64_t round = 2; round <= 3; ++round) {
    for (Graph<T>* g : {&full, &lean}) {
      g->set_value(g->var(0), random_array<T>({3, 7, 8}, round));
      g->replay();
    }
    BOOST_TEST(lean.viewed_nodes() == 12u);
    for (std::size_t i = 0; i < results[0].size(); ++i) {
      BOOST_TEST(same_bits(results[0][i].value(), results[1][i].value()), "result " << i << ", round " << round);
    }
  }
}

BOOST_AUTO_TEST_CASE(view_ops_describe_their_outputs) {
  // For permute, transpose and reshape, over a contiguous input and over a view, element i of
  // the forward's output is element offset + sum(index * strides) of the array viewed; a reshape
  // of a permuted view is no view.
  Graph<double> g;
  const auto a = g.input("a", random_array<double>({2, 3, 4, 5}, 1));
  const auto check = [&](const Var<double>& y, const View& v) {
    const xt::xarray<double>& base = a.value();
    bool ok = shapes_equal(v.shape, y.shape());
    for (std::size_t f = 0; ok && f < y.value().size(); ++f) {
      std::size_t rest = f, at = v.offset;
      for (std::size_t i = v.shape.size(); i-- > 0;) {
        at += rest % v.shape[i] * v.strides[i];
        rest /= v.shape[i];
      }
      ok = y.value().data()[f] == base.data()[at];
    }
    return ok;
  };
  const View whole = View::contiguous(a.shape());
  const auto p = permute(a, {0, 2, 1, 3});
  const auto pv = p.node().op->view_of(whole, p.shape());
  BOOST_TEST_REQUIRE(pv.has_value());
  BOOST_TEST(check(p, *pv));
  const auto t = transpose(p);
  const auto tv = t.node().op->view_of(*pv, t.shape());
  BOOST_TEST_REQUIRE(tv.has_value());
  BOOST_TEST(check(t, *tv));
  const auto r = reshape(a, {6, 20});
  const auto rv = r.node().op->view_of(whole, r.shape());
  BOOST_TEST_REQUIRE(rv.has_value());
  BOOST_TEST(check(r, *rv));
  BOOST_TEST(!reshape(p, {6, 20}).node().op->view_of(*pv, {6, 20}).has_value());
  BOOST_TEST(!scale(a, 2.0).node().op->view_of(whole, a.shape()).has_value());
}

BOOST_AUTO_TEST_CASE(kept_nodes_and_new_nodes) {
  AttentionGraph<double> full(16, 4, 1), lean(16, 4, 1);
  // Keep the weights (the softmax node): they survive the replay, with a full replay's bits.
  std::size_t weights = 0;
  for (std::size_t id = 0; id < lean.g.size(); ++id) {
    if (lean.g.node(id).op_name() == "softmax") weights = id;
  }
  BOOST_TEST_REQUIRE(weights > 0u);
  lean.g.keep_only({lean.g.var(weights)});
  full.set_inputs(5);
  lean.set_inputs(5);
  full.g.replay();
  lean.g.replay();
  BOOST_TEST(same_bits(lean.g.var(weights).value(), full.g.var(weights).value()));
  // A new node may read kept values, and is released by the next replay unless kept.
  const Var<double> w2 = scale(lean.g.var(weights), 2.0);
  BOOST_TEST(same_bits(w2.value(), xt::xarray<double>(2.0 * full.g.var(weights).value())));
  lean.g.replay();
  BOOST_TEST(w2.node().released);
}

BOOST_AUTO_TEST_CASE(outputs_named_after_a_lean_replay_are_kept_by_the_next) {
  // A lean replay keeps its plan between replays; naming an output or a gradient afterwards
  // changes what is kept, and the next replay keeps it (with a full replay's bits).
  AttentionGraph<double> full(4, 2, 1), lean(4, 2, 1);
  lean.g.keep_only({});
  lean.g.replay();
  BOOST_TEST_REQUIRE(lean.g.node(3).released);
  lean.g.set_output("scaled", lean.g.var(3));
  lean.g.replay();
  BOOST_TEST(!lean.g.node(3).released);
  BOOST_TEST(same_bits(lean.g.var(3).value(), full.g.var(3).value()));
  const std::size_t other = 4;
  BOOST_TEST_REQUIRE(lean.g.node(other).released);
  lean.g.set_grad("other", lean.g.var(other));
  lean.g.replay();
  BOOST_TEST(same_bits(lean.g.var(other).value(), full.g.var(other).value()));
}

BOOST_AUTO_TEST_CASE(released_values_are_errors) {
  AttentionGraph<double> a(4, 2, 1);
  a.g.keep_only({});
  // Node 3 is the first released one: scale(q, 1 / sqrt(d_k)).
  BOOST_TEST_REQUIRE(a.g.node(3).op_name() == "scale");
  const Var<double> s = a.g.var(3);
  const std::string id = "node 3 (scale) has no value: keep_only released it";
  check_error([&] { (void)s.value(); }, {id, "keep_all() and replay()"});
  check_error([&] { scale(s, 2.0); }, {"scale (node", "input 0: " + id});
  check_error([&] { to_json(a.g, ExportValues::all); }, {"export: " + id});
  check_error([&] { to_json(a.g, ExportValues::none); }, {"export: " + id});
  check_error([&] { to_dot(a.g); }, {"to_dot: " + id});
  check_error([&] { softmax_diagnostics(a.g); }, {"softmax_diagnostics: " + id});
  check_error([&] {
    Graph<double> copy;
    copy.copy_from(a.g, a.g.size());
  }, {"copy_from: " + id});
  check_error([&] { grad(a.out, {a.q}); }, {"keep_only released it"});
  Graph<double> other;
  const auto x = other.input("x", {{1.0}});
  check_error([&] { a.g.keep_only({x}); }, {"keep_only: a Var to keep", "another graph"});
  // The kept values still read, and the graph replays.
  BOOST_TEST(a.out.value().size() == 8u);
  a.g.replay();
  BOOST_TEST(a.grads[0].value().size() == 8u);
}

BOOST_AUTO_TEST_SUITE_END()
