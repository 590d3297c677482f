// Suite onnx_export: graphs, forward and backward, written as ONNX models by to_onnx. Each case
// writes its model and xgrad's values (tests/output/onnx_export/<case>/model.onnx, case.json),
// which ONNX Runtime runs (ctest onnx_runtime_runs_exports: tests/onnx/run_exports.js) and ONNX's
// checker checks (ctest onnx_checker_accepts_exports: tests/onnx/check_exports.py); here, each
// model is also imported back (import_onnx) and replayed against xgrad's values.
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include <onnx/onnx_pb.h>

#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>

#include "../check.hpp"
#include "no_lowering_op.hpp"
#include "../tools/sandbox.hpp"

#include "../../examples/char_gpt.hpp"

namespace fs = std::filesystem;
using namespace xgrad;
using xgrad::test::check_error;

namespace {

const std::string cases_dir = std::string(XGRAD_TEST_OUTPUT) + "/onnx_export/";
const std::string fixtures = std::string(XGRAD_TEST_DATA) + "/onnx/";

template <class T>
std::string dtype_of() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

// Values as case.json holds them: flat, row-major, non-finite ones as strings.
template <class V>
Json flat(const xt::xarray<V>& a) {
  Json data = Json::array();
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a.data()[i]);
    if (std::isnan(x)) data.push_back("nan");
    else if (std::isinf(x)) data.push_back(x > 0 ? "inf" : "-inf");
    else data.push_back(x);
  }
  return {{"shape", shape_of(a)}, {"data", data}};
}

// The ONNX names and xgrad values of the graph's named outputs and gradients.
template <class T>
std::vector<std::pair<std::string, xt::xarray<T>>> named_values(const Graph<T>& g) {
  std::vector<std::pair<std::string, xt::xarray<T>>> out;
  for (const auto& [name, slot] : g.outputs()) out.emplace_back(name, g.node(slot.node).value(slot.output));
  for (const auto& [name, slot] : g.grads()) out.emplace_back("grad_" + name, g.node(slot.node).value(slot.output));
  return out;
}

// Writes the case for run_exports.js and check_exports.py: the model and, in case.json, a feed
// for every input leaf (and every parameter when `parameters` holds its name) and xgrad's values.
template <class T>
void write_case(const std::string& name, const Graph<T>& g, const OnnxExportOptions& options = {}) {
  const std::string dir = cases_dir + name + "_" + dtype_of<T>();
  fs::create_directories(dir);
  to_onnx(g, dir + "/model.onnx", options);
  Json c = {{"dtype", dtype_of<T>()}, {"feeds", Json::object()}, {"expected", Json::object()}};
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& n = g.node(id);
    if (!n.is_leaf() || !(n.role == Role::input || (options.parameters_as_inputs && n.role == Role::parameter))) continue;
    Json feed = n.index_leaf ? flat(n.indices) : flat(n.value());  // a mask leaf's value: its 1 and 0
    feed["dtype"] = n.index_leaf ? "int64" : n.mask_leaf ? "bool" : dtype_of<T>();
    c["feeds"][n.name] = feed;
  }
  for (const auto& [out, value] : named_values(g)) c["expected"][out] = flat(value);
  std::ofstream(dir + "/case.json") << c.dump() << "\n";
}

// The worst difference between a and b relative to b's largest finite magnitude, or absolute
// where that is below 1 (a gradient that is 0 up to rounding, as a key bias's); NaN must sit
// where b has NaN, and infinities must be equal (else the result is +inf).
template <class T>
double worst_error(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  if (!shapes_equal(a.shape(), b.shape())) return std::numeric_limits<double>::infinity();
  double scale = 0, worst = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (std::isfinite(b.data()[i])) scale = std::max(scale, std::abs(static_cast<double>(b.data()[i])));
  }
  for (std::size_t i = 0; i < b.size(); ++i) {
    const double x = a.data()[i], y = b.data()[i];
    if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
      if (!(std::isnan(x) && std::isnan(y)) && x != y) return std::numeric_limits<double>::infinity();
      continue;
    }
    worst = std::max(worst, std::abs(x - y) / std::max(scale, 1.0));
  }
  return worst;
}

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// xgrad -> ONNX -> import_onnx -> replay: the imported graph, fed the leaves' values, gives every
// named output and gradient within tolerance<T>() of xgrad's; returns the worst error.
template <class T>
double round_trip(const Graph<T>& g, const std::string& what) {
  OnnxImportOptions options;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& n = g.node(id);
    if (!n.is_leaf() || n.role != Role::input) continue;
    OnnxTensor t;
    t.dtype = n.index_leaf ? "int64" : n.mask_leaf ? "bool" : dtype_of<T>();
    if (n.index_leaf) t.ints = n.indices;
    else if (n.mask_leaf) t.ints = xt::cast<std::int64_t>(n.value());
    else t.real = xt::cast<double>(n.value());
    options.inputs[n.name] = t;
  }
  const std::unique_ptr<Graph<T>> back = import_onnx_bytes<T>(to_onnx_bytes(g), what, options);
  double worst = 0;
  for (const auto& [name, value] : named_values(g)) {
    BOOST_TEST_REQUIRE(back->outputs().count(name), what << ": no output " << name << " after the round trip");
    const double e = worst_error(back->var(back->outputs().at(name)).value(), value);
    BOOST_TEST(e <= tolerance<T>(), what << ": " << name << " differs by " << e << " after the round trip");
    worst = std::max(worst, e);
  }
  BOOST_TEST_MESSAGE(what << " (" << dtype_of<T>() << "): round trip within " << worst);
  return worst;
}

// Names the gradients of every leaf in xs (by its name) and the output.
template <class T>
void name_all(Graph<T>& g, const std::string& output, const Var<T>& y, const std::vector<Var<T>>& xs) {
  g.set_output(output, y);
  const std::vector<Var<T>> grads = grad(y, xs);
  for (std::size_t i = 0; i < xs.size(); ++i) g.set_grad(xs[i].node().name, grads[i]);
}

// Attention on random shapes: (B, T_q, d_k) x (B, T_k, d_k) x (B, T_k, d_v) with B = 2, composed
// or fused, masked (causal, or at random with one query row of no allowed key) or not.
template <class T>
void build_attention_case(Graph<T>& g, std::uint64_t seed, AttentionImpl impl, int mask_kind) {
  std::mt19937_64 rng(seed);
  const auto dim = [&](std::size_t lo, std::size_t hi) { return lo + rng() % (hi - lo + 1); };
  const std::size_t b = 2, t_q = dim(2, 7), t_k = dim(2, 7), d_k = dim(1, 6), d_v = dim(1, 6);
  const Var<T> q = g.input("q", random_array<T>({b, t_q, d_k}, seed + 1));
  const Var<T> k = g.input("k", random_array<T>({b, t_k, d_k}, seed + 2));
  const Var<T> v = g.input("v", random_array<T>({b, t_k, d_v}, seed + 3));
  Var<T> out;
  if (mask_kind == 0) {
    out = attention(q, k, v, impl);
  } else {
    xt::xarray<bool> mask = causal_mask(t_q, t_k);
    if (mask_kind == 2) {
      for (std::size_t i = 0; i < mask.size(); ++i) mask.data()[i] = rng() % 3 != 0;
      for (std::size_t j = 0; j < t_k; ++j) mask(t_q - 1, j) = false;  // a row of no allowed key
    }
    out = masked_attention(q, k, v, mask);
  }
  // Weighted, so that each output element has its own gradient.
  const Var<T> w = g.constant("weights", random_array<T>(shape_of(out), seed + 4));
  g.set_output("out", out);
  const std::vector<Var<T>> grads = grad(out, {q, k, v}, w);
  g.set_grad("q", grads[0]);
  g.set_grad("k", grads[1]);
  g.set_grad("v", grads[2]);
}

// One graph with every op of the registry in it, forward (each branch a named output) and
// backward (the gradient of a weighted sum of every branch w.r.t. every leaf).
template <class T>
void build_every_op(Graph<T>& g) {
  const Var<T> x = g.input("x", random_array<T>({2, 3, 4}, 1));
  const Var<T> w = g.parameter("w", random_array<T>({4, 5}, 2, 0.5));
  const Var<T> wt = g.parameter("wt", random_array<T>({5, 4}, 3, 0.5));
  const Var<T> table = g.parameter("table", random_array<T>({6, 4}, 4));
  const Var<T> gamma = g.parameter("gamma", random_array<T>({4}, 5));
  const Var<T> beta = g.parameter("beta", random_array<T>({4}, 6));
  const Var<T> ids = g.indices("ids", xt::xarray<std::int64_t>{{0, 5, 2}, {2, 2, 1}});
  const Var<T> float_ids = g.input("float_ids", xt::xarray<T>{{3, 3, 0}, {4, 1, 5}});
  const Var<T> mask = g.constant("mask", xt::xarray<T>{{1, 0, 1, 1}, {0, 0, 0, 0}, {1, 1, 1, 0}});
  const Var<T> labels = g.indices("labels", xt::xarray<std::int64_t>{{4, -100, 0}, {1, 1, 3}});
  const Var<T> classes = g.indices("classes", xt::xarray<std::int64_t>{{3, 0, 2}, {1, -1, 0}});
  const Var<T> a = matmul(x, w);                  // (2, 3, 5)
  const Var<T> at = matmul(x, wt, false, true);   // (2, 3, 5)
  const Var<T> s = add(a, at);
  std::vector<std::pair<std::string, Var<T>>> branches = {
      {"matmul", s},
      {"transpose", transpose(s)},
      {"matmul_ta", matmul(x, s, true, false)},
      {"linear", linear(x, w, sum(s, {0, 1}))},  // b (5): a node, so that its gradient flows too
      {"permute", permute(s, {2, 0, 1})},
      {"reshape", reshape(s, {3, 10})},
      {"slice", slice(s, -1, 1, 4)},
      {"pad", pad(s, 1, 2, 1)},
      {"concat", concat(std::vector<Var<T>>{s, a, at}, -2)},
      {"split", split(s, {1, 3, 1}, -1)[1]},
      {"split_rows", split(x, {1, 2}, 1)[0]},
      {"split_empty", split(s, {2, 0}, 0)[1]},
      {"chunk", chunk(s, 2, 1)[1]},
      {"scale", scale(s, 0.1)},
      {"sum", sum(s, {0, 2}, true)},
      {"sum_all", sum(s)},
      {"mean", mean(s, {-1})},
      {"sum_to", sum_to(s, {3, 1})},
      {"broadcast_to", broadcast_to(gamma, {3, 4})},
      {"softmax", softmax(s, 1)},
      {"log_softmax", log_softmax(s)},
      {"masked_softmax", softmax(apply_mask(x, mask, -std::numeric_limits<double>::infinity()))},
      {"relu", relu(s)},
      {"neg", neg(s)},
      {"exp", exp(scale(s, 0.5))},
      {"log", log(add(exp(s), s))},  // e^s + s > 0
      {"sqrt", sqrt(exp(s))},
      {"tanh", tanh(s)},
      {"erf", erf(s)},
      {"sin", sin(s)},
      {"cos", cos(s)},
      {"sigmoid", sigmoid(s)},
      {"silu", silu(s)},
      {"abs", abs(s)},
      {"reciprocal", reciprocal(exp(s))},
      {"rsqrt", rsqrt(exp(s))},
      {"sub", sub(a, at)},
      {"div", div(a, exp(at))},
      {"maximum", maximum(a, at)},
      {"minimum", minimum(a, at)},
      {"equal", equal(a, maximum(a, at))},
      {"less", less(a, at)},
      {"less_equal", less_equal(a, at)},
      {"greater", greater(a, at)},
      {"greater_equal", greater_equal(a, at)},
      {"logical_and", logical_and(less(a, at), greater(s, a))},
      {"logical_or", logical_or(less(a, at), greater(s, a))},
      {"logical_not", logical_not(less(a, at))},
      {"where", where(greater(a, at), a, exp(at))},
      {"where_constant_mask", where(mask, x, neg(x))},
      {"pow", pow(exp(s), 1.5)},
      {"pow_2", pow(s, 2.0)},
      {"pow_3", pow(s, 3.0)},
      {"dropout", dropout(s, 0.3, 7)},
      {"embedding", embedding(table, ids)},
      {"embedding_float_ids", embedding(table, float_ids)},
      {"take_label", take_label(s, labels, -100)},
      {"take_label_broadcast", take_label(gamma, classes, -1)},
      {"gelu", gelu(s)},
      {"gelu_tanh", gelu(s, GeluApprox::tanh)},
      {"layer_norm", layer_norm(x, gamma, beta)},
      {"layer_norm_1d", layer_norm(gamma, gamma, beta, 1e-3)},
      {"rms_norm", rms_norm(x, gamma)},
      {"rms_norm_1d", rms_norm(beta, gamma, 1e-3)},
      // positions a parameter (its gradient exported too): (3) over x (2, 3, 4), and (2, 1).
      {"rope", rope(x, slice(beta, 0, 0, 3))},
      {"rope_batch", rope(x, scale(slice(slice(table, 0, 0, 2), 1, 0, 1), 7.0), 500.0)},
      {"flash_attention", fused_attention(x, add(x, scale(x, 0.5)), s)},
  };
  Var<T> total;
  std::uint64_t seed = 100;
  for (const auto& [name, branch] : branches) {
    g.set_output(name, branch);
    const Var<T> weighted = sum(mul(branch, g.constant("weights", random_array<T>(shape_of(branch), seed++))));
    total = total.valid() ? add(total, weighted) : weighted;
  }
  // layer_norm's mean and rstd outputs carry gradients too.
  const Var<T> ln = layer_norm(x, gamma, beta, 1e-5);
  total = add(total, add(sum(g.var(ln.id(), 1)), sum(g.var(ln.id(), 2))));
  // So do rms_norm's rstd.
  total = add(total, sum(g.var(rms_norm(x, beta, 0.01).id(), 1)));
  name_all(g, "total", total, {x, w, wt, table, gamma, beta});
}

}  // namespace

BOOST_AUTO_TEST_SUITE(onnx_export)

BOOST_AUTO_TEST_CASE_TEMPLATE(documented_example_runs_elsewhere, T, test::dtypes) {
  const DocumentedExample ex = documented_example();
  Graph<T> g;
  const Var<T> q = g.input("q", xt::cast<T>(ex.q)), k = g.input("k", xt::cast<T>(ex.k)), v = g.input("v", xt::cast<T>(ex.v));
  name_all(g, "out", attention(q, k, v), {q, k, v});
  write_case("documented_example", g);
  round_trip(g, "documented example");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(random_attention_composed_fused_and_masked, T, test::dtypes) {
  const struct {
    const char* name;
    AttentionImpl impl;
    int mask;
  } cases[] = {{"attention_composed", AttentionImpl::composed, 0}, {"attention_fused", AttentionImpl::fused, 0},
               {"attention_causal", AttentionImpl::composed, 1}, {"attention_random_mask", AttentionImpl::composed, 2}};
  for (std::uint64_t seed : {11, 12}) {
    for (const auto& c : cases) {
      Graph<T> g;
      build_attention_case(g, seed, c.impl, c.mask);
      const std::string name = std::string(c.name) + "_" + std::to_string(seed);
      write_case(name, g);
      round_trip(g, name);
    }
  }
}

// Issue 36: a graph whose mask is a run-time input (a mask leaf) exports it as a bool input;
// the import makes it a mask leaf again, and both graphs replay a new batch's mask alike.
BOOST_AUTO_TEST_CASE_TEMPLATE(mask_leaf_round_trips_and_replays, T, test::dtypes) {
  const std::size_t b = 3, t = 5, d = 8;
  Graph<T> g;
  const Var<T> x = g.input("x", random_array<T>({b, t, d}, 21));
  const AttentionParams<T> p = attention_params(g, d, 22);
  const Var<T> pad = g.mask("pad", key_padding_mask({5, 2, 3}, t));
  name_all(g, "out", sum(multi_head_attention(x, x, p, 2, pad)), {x, p.w_q, p.w_v});
  write_case("mask_leaf", g);
  round_trip(g, "mask leaf");
  {  // The fused attention's lowering of the same mask leaf, and of its causal flag.
    Graph<T> f;
    const Var<T> fx = f.input("x", random_array<T>({b, t, d}, 21));
    const AttentionParams<T> fp = attention_params(f, d, 22);
    const Var<T> fpad = f.mask("pad", key_padding_mask({5, 0, 3}, t));  // a sequence of no key
    FlashMask<T> both;
    both.causal = true;
    both.key_mask = fpad;
    const Var<T> q = f.input("q", random_array<T>({b, 2, t, 4}, 23));
    name_all(f, "out", sum(add(multi_head_attention(fx, fx, fp, 2, fpad, AttentionImpl::fused),
                               sum(fused_attention(q, q, q, std::nullopt, both)))), {fx, fp.w_k, q});
    write_case("mask_leaf_fused", f);
    round_trip(f, "mask leaf, fused");
  }
  OnnxImportOptions options;
  options.gradients = true;
  const std::unique_ptr<Graph<T>> back = import_onnx_bytes<T>(to_onnx_bytes(g), "mask leaf", options);
  Var<T> imported_pad;
  for (std::size_t id = 0; id < back->size(); ++id) {
    if (back->node(id).name == "pad") imported_pad = back->var(id);
  }
  BOOST_TEST_REQUIRE(imported_pad.valid());
  BOOST_TEST(imported_pad.node().mask_leaf);
  BOOST_TEST(!back->grads().count("pad"));  // a mask has no gradient
  for (const std::vector<std::size_t>& lengths : {std::vector<std::size_t>{1, 5, 4}, {3, 3, 1}}) {
    g.set_value(pad, key_padding_mask(lengths, t));
    back->set_value(imported_pad, key_padding_mask(lengths, t));
    g.set_value(x, random_array<T>({b, t, d}, lengths[0]));
    back->set_value(back->var(0), random_array<T>({b, t, d}, lengths[0]));
    g.replay();
    back->replay();
    const double e = worst_error(back->var(back->outputs().at("out")).value(), g.var(g.outputs().at("out")).value());
    BOOST_TEST(e <= tolerance<T>(), "lengths " << lengths[0] << ": out differs by " << e);
    const double ex = worst_error(back->var(back->outputs().at("grad_x")).value(), g.var(g.grads().at("x")).value());
    BOOST_TEST(ex <= tolerance<T>(), "lengths " << lengths[0] << ": grad x differs by " << ex);
  }
}

// Issue 31: the fused attention's soft-cap (C Tanh(s / C) on the scores; its VJP multiplies by
// 1 - Tanh^2) and causal sliding window (an And of two int64 range comparisons, no T_q x T_k
// initializer) with a key mask leaf, out and lse, forward and backward; and the cap alone.
BOOST_AUTO_TEST_CASE_TEMPLATE(flash_attention_soft_cap_and_window_run_elsewhere, T, test::dtypes) {
  Graph<T> g;
  const Var<T> q = g.input("q", random_array<T>({2, 2, 6, 4}, 31, 2));
  const Var<T> k = g.input("k", random_array<T>({2, 2, 8, 4}, 32, 2));
  const Var<T> v = g.input("v", random_array<T>({2, 2, 8, 3}, 33));
  const Var<T> pad = g.mask("pad", key_padding_mask({8, 7}, 8));
  const FlashOutputs<T> windowed = flash_attention(q, k, v, 0.5, FlashMask<T>{true, pad, 3}, 2.0);
  const FlashOutputs<T> capped = flash_attention(q, k, v, 0.5, {}, 1.0);
  const auto weighted = [&](const Var<T>& y, std::uint64_t seed) {
    return sum(mul(y, g.constant("weights", random_array<T>(shape_of(y), seed))));
  };
  g.set_output("windowed", windowed.out);
  g.set_output("windowed_lse", windowed.lse);
  g.set_output("capped", capped.out);
  name_all(g, "total", add(add(weighted(windowed.out, 34), weighted(windowed.lse, 35)), weighted(capped.out, 36)), {q, k, v});
  write_case("flash_softcap_window", g);
  round_trip(g, "flash_attention with a soft-cap and a window");
}

// cross_entropy of class labels with every option, and each reduction (ONNX Runtime runs it:
// GatherElements, ScatterElements and Where on the int64 labels input). The importer reads
// neither GatherElements nor ScatterElements, so no round trip.
BOOST_AUTO_TEST_CASE_TEMPLATE(cross_entropy_of_labels_runs_elsewhere, T, test::dtypes) {
  Graph<T> g;
  const Var<T> logits = g.input("logits", random_array<T>({2, 3, 5}, 81));
  const Var<T> labels = g.indices("labels", xt::xarray<std::int64_t>{{4, -100, 0}, {1, 1, 3}});
  CrossEntropyOptions<T> o;
  o.ignore_index = -100;
  o.weights = xt::xarray<T>{0.5, 1.0, 2.0, 1.5, 0.75};
  o.label_smoothing = 0.1;
  const Var<T> mean_loss = cross_entropy(logits, labels, o);
  o.reduction = Reduction::none;
  g.set_output("none", cross_entropy(logits, labels, o));
  o.reduction = Reduction::sum;
  o.label_smoothing = 0;
  g.set_output("sum", cross_entropy(logits, labels, o));
  name_all(g, "mean", mean_loss, {logits});
  write_case("cross_entropy_labels", g);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(every_op_has_a_lowering, T, test::dtypes) {
  Graph<T> g;
  build_every_op(g);
  std::set<std::string> used;
  for (std::size_t id = 0; id < g.size(); ++id) used.insert(g.node(id).op_name());
  for (const std::string& op : op_names()) BOOST_TEST(used.count(op), op << " is in no graph this suite exports");
  write_case("every_op", g);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(multi_head_block, T, test::dtypes) {
  Graph<T> g;
  const std::size_t d = 8;
  const Var<T> x = g.input("x", random_array<T>({2, 5, d}, 21));
  const Var<T> ln_g = g.parameter("ln.g", xt::ones<T>({d})), ln_b = g.parameter("ln.b", xt::zeros<T>({d}));
  const AttentionParams<T> p = attention_params(g, d, 22);
  const Var<T> a = layer_norm(x, ln_g, ln_b);
  const Var<T> h = add(x, multi_head_attention(a, a, p, 2, causal_mask(5, 5)));
  const Var<T> w1 = g.parameter("w1", random_array<T>({d, 2 * d}, 23, 0.3)), w2 = g.parameter("w2", random_array<T>({2 * d, d}, 24, 0.3));
  const Var<T> y = add(h, dropout(matmul(gelu(matmul(h, w1)), w2), 0.1, 25));
  const Var<T> weights = g.constant("weights", random_array<T>(shape_of(y), 26));
  g.set_output("y", y);
  const std::vector<Var<T>> xs = {x, ln_g, ln_b, p.w_q, p.b_q, p.w_k, p.b_k, p.w_v, p.b_v, p.w_o, p.b_o, w1, w2};
  const std::vector<Var<T>> grads = grad(y, xs, weights);
  for (std::size_t i = 0; i < xs.size(); ++i) g.set_grad(xs[i].node().name, grads[i]);
  write_case("multi_head_block", g);
  round_trip(g, "multi-head block");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(char_gpt_loss_and_parameter_gradients, T, test::dtypes) {
  Graph<T> g;
  char_gpt::Config c;
  c.layers = 2;
  c.heads = 2;
  c.d_model = 16;
  c.block = 8;
  c.vocab = 11;
  c.dropout = 0.1;
  const char_gpt::Model<T> m = char_gpt::build_model(g, c, 3, 5);
  xt::xarray<std::int64_t> ids = xt::zeros<std::int64_t>({std::size_t(3), c.block}), next = ids;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    ids.data()[i] = static_cast<std::int64_t>((7 * i + 3) % c.vocab);
    next.data()[i] = static_cast<std::int64_t>((7 * i + 10) % c.vocab);
  }
  g.set_step(4);
  char_gpt::feed(g, m, ids, next);
  g.replay();
  const std::vector<Var<T>> params = char_gpt::parameters(m);
  g.set_output("logits", m.logits);
  name_all(g, "loss", m.loss, params);
  write_case("char_gpt", g);
  round_trip(g, "char_gpt");
}

BOOST_AUTO_TEST_CASE_TEMPLATE(imported_models_export_again, T, test::dtypes) {
  // Every fixture of the importer's suite (tests/data/onnx: PyTorch's encoder layer and GPT at
  // opsets 14 and 17 in both float types, the encoder with a padding mask, the block of attention
  // variants at opsets 14 and 17), in T.
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(fixtures)) {
    if (e.path().extension() == ".onnx") dirs.push_back(e.path().stem().string());
  }
  std::sort(dirs.begin(), dirs.end());
  BOOST_TEST(dirs.size() == 11u);
  for (const std::string& dir : dirs) {
    OnnxImportOptions options;
    options.gradients = true;
    for (const auto& e : fs::directory_iterator(fixtures + dir)) {
      const std::string file = e.path().filename().string();
      if (file.rfind("input_", 0) != 0) continue;
      const std::string name = file.substr(6, file.size() - 10);  // input_<name>.npy
      OnnxTensor t;
      try {
        StoredArray a = read_npy(e.path().string());
        t.dtype = dtype_of<T>();
        t.real = std::move(a.values);
      } catch (const error&) {
        t.dtype = "int64";
        t.ints = read_npy_integers(e.path().string());
      }
      options.inputs[name] = t;
    }
    const std::unique_ptr<Graph<T>> g = import_onnx<T>(fixtures + dir + ".onnx", options);
    write_case("imported_" + dir + "_as", *g);
    if (dir != "encoder_padded_opset17_float32") {
      round_trip(*g, dir);
    } else {
      // Its padding mask is a float input leaf of 0 and 1 read by apply_mask, which becomes a
      // Cast to bool at run time: ONNX Runtime runs it, xgrad's importer takes Where conditions
      // only from bool graph inputs.
      check_error([&] { round_trip(*g, dir); }, {"(Cast, domain ai.onnx, opset 17): cast of a", "computed at run time to bool"});
    }
  }
}

BOOST_AUTO_TEST_CASE_TEMPLATE(non_finite_values_agree, T, test::dtypes) {
  // NaN and inf among the inputs, and a query row whose every key is masked.
  Graph<T> g;
  xt::xarray<T> qv = random_array<T>({4, 3}, 31);
  qv(1, 0) = std::numeric_limits<T>::quiet_NaN();
  qv(2, 2) = std::numeric_limits<T>::infinity();
  const Var<T> q = g.input("q", qv), k = g.input("k", random_array<T>({5, 3}, 32)), v = g.input("v", random_array<T>({5, 2}, 33));
  xt::xarray<bool> mask = causal_mask(4, 5);
  for (std::size_t j = 0; j < 5; ++j) mask(3, j) = false;
  const Var<T> out = masked_attention(q, k, v, mask);
  BOOST_TEST(std::isnan(out.value()(1, 0)));  // the row of q's NaN
  BOOST_TEST(out.value()(3, 1) == 0);         // the row of no allowed key
  name_all(g, "out", out, {q, k, v});
  g.set_output("log_softmax", log_softmax(apply_mask(q, g.constant("row_mask", matrix<T>({{1}, {1}, {0}, {1}})),
                                                     -std::numeric_limits<double>::infinity())));
  g.set_output("relu", relu(q));
  g.set_output("maximum", maximum(q, neg(q)));
  g.set_output("erf", erf(q));
  g.set_output("flash", fused_attention(q, k, v));
  write_case("non_finite", g);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(comparisons_where_and_mask_leaves_run_elsewhere, T, test::dtypes) {
  // The comparisons, the logic, where and pow on NaN, infinities and signed zeros, with a mask
  // leaf (ONNX's bool input) read by where and the logic as it is; the gradients of finite
  // inputs through where, a comparison and pow.
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  Graph<T> g;
  const Var<T> x = g.input("x", xt::xarray<T>{{0, -0.0, 1, nan}, {2, inf, -inf, 3}, {0.5, 1, nan, -2}});
  const Var<T> t = g.input("t", xt::xarray<T>{-0.0, 1, 1, -2});
  const Var<T> m = g.mask("m", xt::xarray<bool>{{true, false, true, true}, {false, false, true, false}, {true, true, true, false}});
  g.set_output("equal", equal(x, t));
  g.set_output("less", less(x, t));
  g.set_output("less_equal", less_equal(x, t));
  g.set_output("greater", greater(x, t));
  g.set_output("greater_equal", greater_equal(x, t));
  g.set_output("and_mask", logical_and(m, less(x, t)));
  g.set_output("or_mask", logical_or(greater(x, t), m));
  g.set_output("not_mask", logical_not(m));
  g.set_output("not_x", logical_not(x));  // NaN is true: its not is 0; -0 is false
  g.set_output("where_x", where(x, t, neg(t)));  // a NaN condition takes a
  g.set_output("where_mask", where(m, x, t));
  g.set_output("pow_x", pow(x, 2.0));
  const Var<T> f = g.input("f", random_array<T>({3, 4}, 93));
  const Var<T> y = sum(mul(where(m, pow(f, 3.0), neg(f)), add(less(f, t), t)));
  name_all(g, "y", y, {f, t});
  write_case("comparisons_where_mask_leaf", g);
}

BOOST_AUTO_TEST_CASE_TEMPLATE(parameters_as_inputs_take_new_values, T, test::dtypes) {
  // The model is written with w's first value; ONNX Runtime is fed another, and xgrad's values
  // are those of a replay with it.
  Graph<T> g;
  const Var<T> x = g.input("x", random_array<T>({3, 4}, 41));
  const Var<T> w = g.parameter("w", random_array<T>({4, 2}, 42));
  name_all(g, "y", tanh(matmul(x, w)), {w});
  OnnxExportOptions options;
  options.parameters_as_inputs = true;
  const std::string model = to_onnx_bytes(g, options);
  g.set_value(w, random_array<T>({4, 2}, 43));
  g.replay();
  write_case("parameters_as_inputs", g, options);
  BOOST_TEST(model != to_onnx_bytes(g, options));  // the new value is the new default
}

BOOST_AUTO_TEST_CASE(one_to_one_ops_round_trip_bit_for_bit) {
  // matmul, transpose, permute, reshape, add, mul, tanh, relu, exp map onto one ONNX op each and
  // back onto the same xgrad op: the replayed values are the same bits.
  Graph<double> g;
  const Var<double> x = g.input("x", random_array<double>({2, 3, 4}, 51));
  const Var<double> w = g.parameter("w", random_array<double>({4, 4}, 52));
  const Var<double> y = relu(add(tanh(matmul(x, w)), exp(mul(x, x))));
  g.set_output("y", reshape(permute(transpose(y), {0, 2, 1}), {6, 4}));
  const std::unique_ptr<Graph<double>> back = import_onnx_bytes<double>(to_onnx_bytes(g), "one to one", [&] {
    OnnxImportOptions o;
    o.inputs["x"] = OnnxTensor{"float64", x.value(), {}};
    return o;
  }());
  BOOST_TEST(same_bits(back->var(back->outputs().at("y")).value(), g.var(g.outputs().at("y")).value()));
}

BOOST_AUTO_TEST_CASE(refusals_name_the_node_and_write_nothing) {
  const std::string dir = std::string(XGRAD_TEST_OUTPUT) + "/onnx_export_refusals/";
  fs::create_directories(dir);
  Graph<double> g;
  const Var<double> x = g.input("x", random_array<double>({2, 2}, 61));
  check_error([&] { to_onnx_bytes(g); }, {"to_onnx: the graph names no output or gradient"});

  const Var<double> y = g.apply(std::make_shared<test::NoLoweringOp>(), {tanh(x)});
  g.set_output("y", y);
  std::ofstream(dir + "model.onnx") << "old";
  check_error([&] { to_onnx(g, dir + "model.onnx"); }, {"to_onnx: node 2 (frobnicate): has no ONNX lowering"});
  std::ifstream in(dir + "model.onnx");
  std::string kept((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(kept == "old");  // the file it would have replaced is whole

  // An index leaf as an output is an int64 output.
  Graph<double> ids;
  const Var<double> leaf = ids.indices("ids", xt::xarray<std::int64_t>{3, 1});
  ids.set_output("same_ids", leaf);
  onnx::ModelProto m;
  BOOST_TEST_REQUIRE(m.ParseFromString(to_onnx_bytes(ids)));
  BOOST_TEST(m.graph().output(0).type().tensor_type().elem_type() == onnx::TensorProto::INT64);

  Graph<double> twice;
  twice.input("x", random_array<double>({2}, 62));
  twice.set_output("z", tanh(twice.parameter("x", random_array<double>({2}, 63))));
  check_error([&] { to_onnx_bytes(twice); }, {"nodes 0 and 1 are both leaves named 'x'"});

  Graph<double> clash;
  const Var<double> c = clash.input("c", random_array<double>({2}, 64));
  clash.set_output("c", tanh(c));
  check_error([&] { to_onnx_bytes(clash); }, {"the output 'c' has the name of leaf node 0"});

  Graph<double> lean;
  const Var<double> l = lean.input("l", random_array<double>({2}, 65));
  const Var<double> t = tanh(tanh(l));
  lean.set_output("t", t);
  lean.keep_only({});
  lean.replay();
  check_error([&] { to_onnx_bytes(lean); }, {"to_onnx"});

  Graph<double> fine;
  fine.set_output("y", tanh(fine.input("x", random_array<double>({2}, 66))));
  check_error([&] { to_onnx(fine, dir); }, {"exists and is a directory; refusing to replace it"});
  OnnxExportOptions small;
  small.max_bytes = 64;
  check_error([&] { to_onnx_bytes(fine, small); }, {"to_onnx: the model would be", "bytes, over the limit of 64"});
}

BOOST_AUTO_TEST_CASE(cli_onnx_and_export_format_onnx_write_the_same_model) {
  test::Sandbox box;
  const test::Run direct = box.xgrad("export --shape 3,4,5,2 --seed 7 --dtype float64 --format onnx -o direct.onnx");
  BOOST_TEST_REQUIRE(direct.rc == 0, direct.err);
  BOOST_TEST(direct.out.empty());
  BOOST_TEST_REQUIRE(box.xgrad("export --shape 3,4,5,2 --seed 7 --dtype float64 -o g.json").rc == 0);
  const test::Run r = box.xgrad("onnx g.json -o g.onnx");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  BOOST_TEST(r.out.find("g.json: ") == 0, r.out);
  BOOST_TEST(r.out.find("(float64) as an ONNX model of inputs q, k, v and outputs out, grad_k, grad_q, grad_v") != std::string::npos, r.out);
  BOOST_TEST(r.out.find("written to g.onnx\n") != std::string::npos, r.out);
  // The graph file holds the same graph: the same model, byte for byte.
  BOOST_TEST(test::read_text(box.dir / "g.onnx") == test::read_text(box.dir / "direct.onnx"));
  // And it imports back: the inputs q, k, v, the outputs and gradients by their ONNX names.
  const auto g = import_onnx<double>(box.path("g.onnx"));
  for (const char* name : {"out", "grad_q", "grad_k", "grad_v"}) BOOST_TEST(g->outputs().count(name), name);
  BOOST_TEST(onnx_graph_inputs(box.path("g.onnx")) == (std::vector<std::string>{"q", "k", "v"}));

  // --parameters-as-inputs on an imported model lists its parameters as inputs too.
  const std::string gpt = fixtures + "gpt_opset17_float32";
  BOOST_TEST_REQUIRE(box.xgrad("import '" + gpt + ".onnx' --input idx='" + gpt + "/input_idx.npy' --grad -o gpt.json").rc == 0);
  const test::Run p = box.xgrad("onnx gpt.json -o gpt.onnx --parameters-as-inputs");
  BOOST_TEST_REQUIRE(p.rc == 0, p.err);
  onnx::ModelProto model;
  BOOST_TEST_REQUIRE(model.ParseFromString(test::read_text(box.dir / "gpt.onnx")));
  std::set<std::string> inputs, initializers;
  for (const auto& in : model.graph().input()) inputs.insert(in.name());
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  BOOST_TEST(inputs.count("idx"));
  BOOST_TEST(inputs.count("wte.weight"));
  BOOST_TEST(initializers.count("wte.weight"));  // its default
}

BOOST_AUTO_TEST_CASE(cli_onnx_refuses_with_one_line_and_writes_nothing) {
  test::Sandbox box;
  Graph<double> g;
  g.input("x", random_array<double>({2}, 71));
  test::write_text(box.dir / "none.json", to_json(g, ExportValues::all).dump());
  const test::Run r = box.xgrad("onnx none.json -o none.onnx");
  BOOST_TEST(r.rc == 2);
  BOOST_TEST(r.err == "xgrad onnx: none.json: to_onnx: the graph names no output or gradient (Graph::set_output, "
                      "Graph::set_grad): nothing to export\n");
  BOOST_TEST(!fs::exists(box.dir / "none.onnx"));
  const test::Run usage = box.xgrad("export --shape 1,1,1,1 --format onnx");
  BOOST_TEST(usage.rc == 2);
  BOOST_TEST(usage.err.find("--format onnx needs -o FILE") != std::string::npos, usage.err);
}

BOOST_AUTO_TEST_SUITE_END()
