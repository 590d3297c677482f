// The error catalogue: every validation rule of the library, the importers and the CLI, one row
// each, as in docs/errors.md. Each row is its own test case: it provokes the error, checks its
// type and that the message names the shapes or the JSON path. A last case checks that
// docs/errors.md lists every row with the message the code gives, so the document stays true.
// XGRAD_PRINT_ERRORS=1 build/tests/xgrad_tests --run_test=errors prints the table's rows.
#include "../check.hpp"
#include "../graph_json_v1.hpp"
#include "../pick_op.hpp"
#include "../onnx/onnx_models.hpp"
#include "../onnx/no_lowering_op.hpp"

#include <xgrad/graph/backward.hpp>

#include <boost/test/data/test_case.hpp>

#include <csignal>
#include <cstdlib>
#include <sys/resource.h>
#include <sys/stat.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>

#include "cli.hpp"
#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>

namespace fs = std::filesystem;

namespace {

enum class Kind { error, usage };

struct Row {
  const char* id;
  const char* area;
  const char* rule;
  Kind kind;
  std::function<void()> provoke;
  std::vector<std::string> names;  // what the message must contain: shapes, paths, files
};

std::ostream& operator<<(std::ostream& out, const Row& r) { return out << r.id; }

// A scratch directory of files for the reader and CLI rows.
const fs::path& scratch() {
  static const fs::path dir = [] {
    const fs::path d = fs::temp_directory_path() / "xgrad_error_catalogue";
    fs::remove_all(d);
    fs::create_directories(d);
    const auto write = [&](const char* name, const std::string& s) { std::ofstream(d / name, std::ios::binary) << s; };
    write("q.json", "[[0.5], [0]]");
    write("k.json", "[[1], [0]]");
    write("v.json", "[[3, 0], [0, 6]]");
    write("k3.json", "[[1, 2, 3]]");
    write("big.json", "[[1e300], [0]]");
    write("ragged.json", "[[1, 2], [3]]");
    write("short.npy", std::string("\x93NUMPY\x01\x00\xff\xff", 10));
    std::string int_npy = npy_bytes(xt::xarray<double>{1.0});
    write("int.npy", int_npy.replace(int_npy.find("<f8"), 3, "<i8"));
    write("g.dat", "[]");
    fs::create_directories(d / "dir.json");
    return d;
  }();
  return dir;
}
std::string at(const char* name) { return (scratch() / name).string(); }

void run_cli(const tool::Command& c, std::vector<std::string> args) { c.run(args); }


// A version 1.0 .npy prelude and this header dict, no data.
std::string npy_header(const std::string& dict) {
  return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
}

Json small_graph() {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  softmax(scale(x, 0.5));
  return to_json(g, ExportValues::all);
}
// Imports small_graph() after `edit`.
void import_edited(const std::function<void(Json&)>& edit) {
  Json j = small_graph();
  edit(j);
  graph_from_json<double>(j.dump());
}

// Graph<double> with q (2, 3), k (4, 3), v (4, 5) and odd shapes, for the library rows.
struct Fixture {
  Graph<double> g, other;
  Var<double> q = g.input("q", xt::zeros<double>({2, 3}));
  Var<double> k = g.input("k", xt::zeros<double>({4, 3}));
  Var<double> v = g.input("v", xt::zeros<double>({4, 5}));
  Var<double> flat = g.input("flat", xt::zeros<double>({3}));
  Var<double> alien = other.input("alien", xt::zeros<double>({4, 3}));
};

xt::xarray<double> z(std::initializer_list<std::size_t> s) { return xt::zeros<double>(s); }

// An op whose VJP breaks the contract: `count` gradients, each transposed (a wrong shape).
class BrokenVjpOp final : public OpFor<BrokenVjpOp> {
 public:
  explicit BrokenVjpOp(std::size_t count) : m_count(count) {}
  std::string name() const override { return "broken"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    y = *x[0];
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return std::vector<Var<T>>(m_count, transpose(v.grad_out));
  }

 private:
  std::size_t m_count;
};

// An op of no outputs, which no op may be.
class NothingOp final : public OpFor<NothingOp, 0> {
 public:
  std::string name() const override { return "nothing"; }
  std::size_t arity() const override { return 1; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>&) const override { return {}; }
  template <class T>
  void run_forward(const Args<T>&, const Outs<T>&) const {}
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>&) const {
    return {Var<T>()};
  }
};

// An op of two outputs of a program's own that breaks the contract: no infer_shapes (shapes =
// 0), or one shape for its two outputs (shapes = 1).
class PairOp final : public OpFor<PairOp, 2> {
 public:
  explicit PairOp(std::size_t shapes) : m_shapes(shapes) {}
  std::string name() const override { return "pair"; }
  std::size_t arity() const override { return 1; }
  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    if (m_shapes == 0) return Op::infer_shapes(x);  // the default: infer_shape, which it lacks
    return {x[0]};
  }
  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    for (auto* out : y) *out = *x[0];
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    return {a.grad_outs[0]};
  }

 private:
  std::size_t m_shapes;
};

void grad_through_broken(std::size_t count) {
  Graph<double> g;
  const auto x = g.input("x", z({2, 3}));
  grad(g.apply(std::make_shared<BrokenVjpOp>(count), {x}), {x});
}

// A safetensors file of this header and data, parsed as m.safetensors.
void safetensors_of(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  for (std::size_t k = 0; k < 8; ++k) bytes[k] = static_cast<char>((header.size() >> (8 * k)) & 0xff);
  parse_checkpoint(bytes + header + data, CheckpointFormat::safetensors, "m.safetensors");
}
const std::string f64_header = R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})";
std::string edited(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t i = 0; (i = s.find(from, i)) != std::string::npos; i += to.size()) s.replace(i, from.size(), to);
  return s;
}
// An .npz of a = [1.0] (and metadata k: v), edited, parsed as m.npz.
void npz_of(const std::function<std::string(std::string)>& edit) {
  const std::string bytes = checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"a", {1.0}}}, {{"k", "v"}},
                                             CheckpointFormat::npz, "m.npz");
  parse_checkpoint(edit(bytes), CheckpointFormat::npz, "m.npz");
}
// The .npy member a.npy's size field, twice (compressed and not), as the zip headers hold it.
std::string npy_sizes() {
  const std::string size(1, static_cast<char>(npy_bytes(xt::xarray<double>{1.0}).size()));
  return size + std::string(3, '\0') + size + std::string(3, '\0');
}
// A file of tests/data/checkpoint, copied to the scratch directory (so that messages name no
// machine's path).
std::string fixture_copy(const std::string& name) {
  fs::copy_file(XGRAD_TEST_DATA "/checkpoint/" + name, at(name.c_str()), fs::copy_options::overwrite_existing);
  return at(name.c_str());
}
// Three parameters w (2, 3), b (2,), s () for the load_parameters rows.
struct Params {
  Graph<double> g;
  Var<double> w = g.parameter("w", z({2, 3}));
  Var<double> b = g.parameter("b", z({2}));
  Var<double> s = g.parameter("s", xt::xarray<double>(1.0));
};
void load_params_from(std::map<std::string, xt::xarray<double>> tensors) {
  save_tensors(at("p.safetensors"), tensors);
  Params p;
  load_parameters(p.g, at("p.safetensors"));
}

// ONNX models for the X rows: one node, imported from bytes as "m.onnx".
using test::OnnxInput;
constexpr int f32 = onnx::TensorProto::FLOAT;
void import_model(const onnx::ModelProto& m, const OnnxImportOptions& options = {}) {
  import_onnx_bytes<float>(m.SerializeAsString(), "m.onnx", options);
}
onnx::ModelProto unary_model(const std::string& op, long opset = 17, int type = f32, std::vector<long> dims = {3}) {
  return test::onnx_model(op, {{"x", type, dims}}, {"x"}, opset);
}
OnnxTensor floats(xt::xarray<double> v) { return {"float32", std::move(v), {}}; }

std::vector<Row> rows() {
  return {
      // The graph.
      {"G01", "graph", "an op's input belongs to another graph", Kind::error, [] { Fixture x; add(x.q, x.alien); }, {"add (node", "input 1 (node 0) belongs to another graph"}},
      {"G02", "graph", "an op's input is an empty Var", Kind::error, [] { Fixture x; add(x.q, Var<double>()); }, {"add (node", "input 1 is an empty Var"}},
      {"G03", "graph", "set_value on a node that is not a leaf", Kind::error, [] { Fixture x; auto s = scale(x.q, 2.0); x.g.set_value(s, z({2, 3})); }, {"set_value: node", "scale", "leaves"}},
      {"G04", "graph", "set_value with another shape than the leaf's", Kind::error, [] { Fixture x; x.g.set_value(x.q, z({3, 2})); }, {"'q'", "(2, 3)", "(3, 2)"}},
      {"G05", "graph", "a node id that does not exist", Kind::error, [] { Fixture x; x.g.node(999); }, {"no node 999"}},
      {"G06", "graph", "matrix rows of different lengths", Kind::error, [] { matrix<double>({{1, 2}, {3}}); }, {"rows of different lengths (2 and 1)"}},
      {"G07", "graph", "the value of an empty Var", Kind::error, [] { Var<double>().value(); }, {"empty handle"}},
      {"G08", "graph", "the value of a node that keep_only released", Kind::error, [] { Fixture x; const auto s = scale(x.q, 2.0); x.g.keep_only({}); s.value(); }, {"node 4 (scale) has no value: keep_only released it", "keep_all() and replay()"}},
      {"G09", "graph", "a released node as an op's input", Kind::error, [] { Fixture x; const auto s = scale(x.q, 2.0); x.g.keep_only({}); add(s, s); }, {"add (node 5): input 0: node 4 (scale) has no value"}},
      {"G10", "graph", "export, to_dot, softmax_diagnostics or copy_from of a graph with released values", Kind::error, [] { Fixture x; scale(x.q, 2.0); x.g.keep_only({}); to_json(x.g, ExportValues::all); }, {"export: node 4 (scale) has no value"}},
      {"G12", "graph", "an index leaf where an op takes values", Kind::error, [] { Fixture x; scale(x.g.indices("ids", xt::xarray<std::int64_t>{1}), 2.0); }, {"scale (node 5): input 0 (node 4 ('ids')) is an index leaf (int64); scale takes float64 values there"}},
      {"G13", "graph", "the value of an index leaf, or the indices of another node", Kind::error, [] { Fixture x; x.g.indices("ids", xt::xarray<std::int64_t>{1}); x.g.var(4).value(); }, {"node 4 ('ids') is an index leaf: its int64 values are indices(), it has no float64 value"}},
      {"G14", "graph", "set_value of the other kind: values for an index leaf, indices for a leaf of values", Kind::error, [] { Fixture x; x.g.set_value(x.q, xt::xarray<std::int64_t>{{1, 2, 3}, {4, 5, 6}}); }, {"set_value: node 0 ('q') is an input leaf: its new value is float64 values (xt::xarray<double>), not int64 indices (xt::xarray<std::int64_t>)"}},
      {"G15", "graph", "an output a node does not have", Kind::error, [] { Fixture x; x.g.var(0, 1); }, {"graph: node 0 (input) has no output 1 (it has 1)"}},
      {"G16", "graph", "input values an op's forward rejects (on any thread)", Kind::error, [] { Fixture x; test::pick(x.k, x.g.indices("ids", xt::xarray<std::int64_t>{0, 7})); }, {"pick (node 5): id 7 at [1] is out of range for a table of 4 rows"}},
      {"G17", "graph", "a Var of an output its node does not have, as an op's input", Kind::error, [] { Fixture x; add(x.q, Var<double>(x.g, 0, 1)); }, {"add (node 4): input 1 names output 1 of node 0, which has 1"}},
      {"G18", "graph", "an op of several outputs that writes no infer_shapes", Kind::error, [] { Fixture x; x.g.apply(std::make_shared<PairOp>(0), {x.q}); }, {"pair (node 4): has 2 outputs: it writes infer_shapes, not infer_shape"}},
      {"G21", "graph", "an op of no outputs", Kind::error, [] { Fixture x; x.g.apply(std::make_shared<NothingOp>(), {x.q}); }, {"nothing (node 4): has no outputs: an op has at least one"}},
      {"G19", "graph", "infer_shapes giving another number of shapes than the op's outputs", Kind::error, [] { Fixture x; x.g.apply(std::make_shared<PairOp>(1), {x.q}); }, {"pair (node 4): infer_shapes gave 1 shapes for 2 outputs"}},
      {"G20", "graph", "set_grad_of naming an output that does not exist", Kind::error, [] { Fixture x; const auto s = scale(x.q, 1.0); const auto z = [&] { Graph<double>::BackwardScope b(x.g); return scale(s, 1.0); }(); x.g.set_grad_of(Slot{z.id(), 1}, Slot{s.id(), 0}); }, {"set_grad_of: node 5 output 1 and node 4 output 0: one of them does not exist"}},
      {"G11", "graph", "keep_only with a Var of another graph", Kind::error, [] { Fixture x; x.g.keep_only({x.alien}); }, {"keep_only: a Var to keep (node 0) belongs to another graph"}},
      // grad().
      {"D01", "grad", "grad_out of another shape than y", Kind::error, [] { Fixture x; grad(x.q, {x.q}, z({3, 2})); }, {"grad_out is (3, 2)", "y (node 0) is (2, 3)"}},
      {"D02", "grad", "an x of another graph than y", Kind::error, [] { Fixture x; grad(x.q, {x.alien}); }, {"x[0] (node 0) belongs to another graph"}},
      {"D06", "grad", "an index leaf as an x", Kind::error, [] { Fixture x; const auto ids = x.g.indices("ids", xt::xarray<std::int64_t>{1}); grad(x.q, {ids}); }, {"grad: x[0] (node 4, 'ids') is an index leaf: indices have no gradient"}},
      {"D07", "grad", "backward() with another number of grad_outs than ys", Kind::error, [] { Fixture x; const Accumulate<double> sum = sum_contributions<double>; backward<double>({x.q, x.k}, {x.q}, {x.q}, sum); }, {"grad: 1 grad_outs for 2 ys"}},
      {"D03", "grad", "y is an empty Var", Kind::error, [] { Fixture x; grad(Var<double>(), {x.q}); }, {"grad: y is an empty Var"}},
      {"D04", "grad", "a VJP rule that returns the wrong number of gradients", Kind::error, [] { grad_through_broken(2); }, {"broken (node 1): VJP returned 2 gradients for 1 inputs"}},
      {"D05", "grad", "a VJP rule that returns a gradient of the wrong shape", Kind::error, [] { grad_through_broken(1); }, {"broken (node 1): VJP for input 0 (2, 3) returned (3, 2)"}},
      // The ops.
      {"O01", "matmul", "inner sizes differ", Kind::error, [] { Fixture x; matmul(x.q, x.v); }, {"matmul (node", "inner sizes differ", "a is (2, 3)", "b is (4, 5)"}},
      {"O02", "matmul", "an operand of rank < 2", Kind::error, [] { Fixture x; matmul(x.flat, x.q); }, {"rank >= 2", "a is (3,)"}},
      {"O03", "matmul", "batch axes do not broadcast together", Kind::error, [] { Fixture x; auto a = x.g.input("a", z({2, 2, 3})); auto b = x.g.input("b", z({3, 3, 4})); matmul(a, b); }, {"batch axes (2,) and (3,) do not broadcast together", "(2, 2, 3)", "(3, 3, 4)"}},
      {"O04", "transpose", "rank < 2", Kind::error, [] { Fixture x; transpose(x.flat); }, {"transpose (node", "x is (3,)"}},
      {"O05", "softmax", "axis out of range", Kind::error, [] { Fixture x; softmax(x.q, 2); }, {"softmax (node", "axis 2 is out of range", "(2, 3)"}},
      {"O06", "softmax", "an empty axis", Kind::error, [] { Fixture x; auto e = x.g.input("e", z({2, 0})); softmax(e); }, {"softmax (node", "(2, 0)", "empty"}},
      {"O07", "softmax_vjp", "y and grad_out differ in shape", Kind::error, [] { Fixture x; softmax_vjp(x.q, x.k); }, {"softmax_vjp (node", "y is (2, 3)", "grad_out is (4, 3)"}},
      {"O08", "add", "shapes that do not broadcast together", Kind::error, [] { Fixture x; add(x.q, x.k); }, {"add (node", "a (2, 3) and b (4, 3) do not broadcast together"}},
      {"O09", "mul", "shapes that do not broadcast together", Kind::error, [] { Fixture x; mul(x.q, x.k); }, {"mul (node", "a (2, 3) and b (4, 3) do not broadcast together"}},
      {"O10", "sum_to", "the target does not broadcast to x", Kind::error, [] { Fixture x; sum_to(x.q, {2}); }, {"sum_to (node", "x (2, 3)", "(2,)"}},
      {"O11", "broadcast_to", "x does not broadcast to the target", Kind::error, [] { Fixture x; broadcast_to(x.q, {3, 3}); }, {"broadcast_to (node", "x (2, 3)", "(3, 3)"}},
      {"O12", "apply_mask", "the mask does not broadcast to x", Kind::error, [] { Fixture x; apply_mask(x.q, x.k, 0.0); }, {"apply_mask (node", "mask (4, 3)", "x (2, 3)"}},
      {"O13", "reshape", "another element count", Kind::error, [] { Fixture x; reshape(x.q, {4, 2}); }, {"reshape (node", "x (2, 3) has 6 elements", "(4, 2) holds 8"}},
      {"O14", "permute", "axes that are not a permutation", Kind::error, [] { Fixture x; permute(x.q, {1, 1}); }, {"permute (node", "axes [1, 1] are not a permutation", "(2, 3)"}},
      {"O15", "sum", "an axis out of range", Kind::error, [] { Fixture x; sum(x.q, {0, 2}); }, {"sum (node", "axis 2 is out of range for a (2, 3) input"}},
      {"O16", "sum", "an axis given twice", Kind::error, [] { Fixture x; sum(x.q, {1, -1}); }, {"sum (node", "axis -1 is repeated in the axes of x (2, 3)"}},
      {"O17", "mean", "an axis out of range", Kind::error, [] { Fixture x; mean(x.q, {-3}); }, {"mean (node", "axis -3 is out of range for a (2, 3) input"}},
      {"O18", "mean", "an axis given twice", Kind::error, [] { Fixture x; mean(x.q, {0, 0}); }, {"mean (node", "axis 0 is repeated in the axes of x (2, 3)"}},
      {"O19", "log_softmax", "axis out of range", Kind::error, [] { Fixture x; log_softmax(x.q, 2); }, {"log_softmax (node", "axis 2 is out of range", "(2, 3)"}},
      {"O20", "log_softmax", "an empty axis", Kind::error, [] { Fixture x; auto e = x.g.input("e", z({2, 0})); log_softmax(e); }, {"log_softmax (node", "(2, 0)", "empty"}},
      {"O21", "slice", "an axis out of range (rank 0 has none)", Kind::error, [] { Fixture x; slice(x.q, 2, 0, 1); }, {"slice (node", "axis 2 is out of range for a (2, 3) input"}},
      {"O22", "slice", "begin after end", Kind::error, [] { Fixture x; slice(x.q, 1, 2, 1); }, {"slice (node", "begin 2 is after end 1 on axis 1 of x (2, 3)"}},
      {"O23", "slice", "end past the axis", Kind::error, [] { Fixture x; slice(x.q, -1, 1, 4); }, {"slice (node", "end 4 is past axis -1 of x (2, 3), of length 3"}},
      {"O24", "pad", "an axis out of range (rank 0 has none)", Kind::error, [] { Fixture x; pad(x.q, -3, 1, 1); }, {"pad (node", "axis -3 is out of range for a (2, 3) input"}},
      {"O25", "pad", "a result of too many elements", Kind::error, [] { Fixture x; pad(x.q, 1, std::size_t(1) << 27, 0); }, {"pad (node", "padding axis 1 of x (2, 3) by 134217728 before and 0 after", "more than 268435456 elements"}},
      {"O26", "flash_attention", "q, k, v that do not fit (rank, batch axes, d_k, T_k, T_k = 0)", Kind::error, [] { Fixture x; flash_attention(x.q, x.v, x.v, 1.0); }, {"flash_attention (node", "d_k differs: q has d_k = 3, k has d_k = 5: q is (2, 3), k is (4, 5), v is (4, 5)"}},
      {"O27", "flash_attention, flash_attention_vjp", "a scale that is not finite", Kind::error, [] { Fixture x; flash_attention(x.q, x.k, x.v, std::numeric_limits<double>::infinity()); }, {"flash_attention (node", "the scale must be finite, got inf"}},
      {"O28", "flash_attention_vjp", "out, lse, grad_out or grad_lse not of the shapes of flash_attention's outputs", Kind::error, [] { Fixture x; auto f = flash_attention(x.q, x.k, x.v, 1.0); flash_attention_vjp(x.q, x.k, x.v, f.out, f.lse, x.q, f.lse, 1.0); }, {"flash_attention_vjp (node", "out is (2, 5), lse (2,), grad_out (2, 3), grad_lse (2,); for q (2, 3) and v (4, 5) out and grad_out must be (2, 5) (B..., T_q, d_v), lse and grad_lse (2,) (B..., T_q)"}},
      {"O76", "flash_attention, flash_attention_vjp", "a soft-cap negative or not finite (NaN included)", Kind::error, [] { Fixture x; flash_attention(x.q, x.k, x.v, 1.0, {}, -1.0); }, {"flash_attention (node 4): the soft-cap must be finite and > 0 (0 for none), got -1"}},
      {"O77", "flash_attention, flash_attention_vjp", "a window without the causal mask", Kind::error, [] { Fixture x; flash_attention(x.q, x.k, x.v, 1.0, FlashMask<double>{false, {}, 2}); }, {"flash_attention (node 4): window = 2 is a causal sliding window (query i sees the keys j with i' - window < j <= i', i' = i + T_k - T_q): set causal too; a bidirectional window is not supported"}},
      {"O29", "broadcast_to", "a result of too many elements", Kind::error, [] { Fixture x; auto one = x.g.input("one", z({1})); broadcast_to(one, {std::size_t(1) << 32, std::size_t(1) << 32}); }, {"broadcast_to (node 5): broadcasting x (1,) to (4294967296, 4294967296)", "more than 268435456 elements"}},
      {"O30", "add", "a broadcast result of too many elements", Kind::error, [] { Fixture x; auto a = x.g.input("a", z({32768, 1})); auto b = x.g.input("b", z({1, 32768})); add(a, b); }, {"add (node 6): broadcasting a (32768, 1) and b (1, 32768) to (32768, 32768)", "more than 268435456 elements"}},
      {"O31", "mul", "a broadcast result of too many elements", Kind::error, [] { Fixture x; auto a = x.g.input("a", z({32768, 1})); auto b = x.g.input("b", z({1, 32768})); mul(a, b); }, {"mul (node 6): broadcasting a (32768, 1) and b (1, 32768) to (32768, 32768)", "more than 268435456 elements"}},
      {"O32", "matmul", "a product of too many elements", Kind::error, [] { Fixture x; auto a = x.g.input("a", z({32768, 1})); auto b = x.g.input("b", z({1, 32768})); matmul(a, b); }, {"matmul (node 6): the product (32768, 32768) of a (32768, 1) and b (1, 32768)", "more than 268435456 elements"}},
      {"O33", "sum_to", "a target of too many elements (from an empty x)", Kind::error, [] { Fixture x; auto e = x.g.input("e", z({0, 32768, 32768})); sum_to(e, {1, 32768, 32768}); }, {"sum_to (node 5): summing x (0, 32768, 32768) to (1, 32768, 32768)", "more than 268435456 elements"}},
      {"O34", "layer_norm", "gamma or beta not (d), the last axis of x", Kind::error, [] { Fixture x; layer_norm(x.q, x.flat, x.k); }, {"layer_norm (node 4): gamma (3,) and beta (4, 3) must be (3,), the last axis of x (2, 3)"}},
      {"O35", "layer_norm, layer_norm_vjp", "an x of rank 0 or an empty last axis", Kind::error, [] { Fixture x; layer_norm(x.g.input("s", xt::xarray<double>::from_shape({})), x.flat, x.flat); }, {"layer_norm (node 5): normalises the last axis, of at least 1 element: x is ()"}},
      {"O36", "layer_norm", "eps negative or not finite", Kind::error, [] { Fixture x; layer_norm(x.q, x.flat, x.flat, -1.0); }, {"layer_norm: eps must be finite and >= 0, got -1"}},
      {"O37", "rms_norm", "gamma not (d), the last axis of x", Kind::error, [] { Fixture x; rms_norm(x.q, x.k); }, {"rms_norm (node 4): gamma (4, 3) must be (3,), the last axis of x (2, 3)"}},
      {"O38", "rms_norm, rms_norm_vjp", "an x of rank 0 or an empty last axis", Kind::error, [] { Fixture x; rms_norm(x.g.input("s", xt::xarray<double>::from_shape({})), x.flat); }, {"rms_norm (node 5): normalises the last axis, of at least 1 element: x is ()"}},
      {"O39", "rms_norm", "eps negative or not finite", Kind::error, [] { Fixture x; rms_norm(x.q, x.flat, -1.0); }, {"rms_norm: eps must be finite and >= 0, got -1"}},
      {"O40", "rms_norm_vjp", "gamma not (d), rstd not (..., 1), or grad_y not x's shape", Kind::error, [] { Fixture x; rms_norm_vjp(x.q, x.flat, x.q, x.q); }, {"rms_norm_vjp (node 4): x (2, 3) needs gamma (3,), rstd (2, 1) and grad_y (2, 3); got gamma (3,), rstd (2, 3), grad_y (2, 3)"}},
      {"O41", "split", "sizes that do not sum to the axis's length", Kind::error, [] { Fixture x; split(x.q, {2, 2}, 1); }, {"split (node 4): sizes [2, 2] sum to 4, not to the length 3 of axis 1 of x (2, 3)"}},
      {"O42", "split", "an axis out of range, or an x of rank 0", Kind::error, [] { Fixture x; split(x.q, {3}, 2); }, {"split (node 4): axis 2 is out of range for a (2, 3) input"}},
      {"O43", "split", "no sizes, or more than 65536", Kind::error, [] { Fixture x; split(x.q, {}, 0); }, {"split: takes 1 to 65536 sizes, got 0"}},
      {"O44", "chunk", "n of 0 or above 65536, an axis out of range, an x of rank 0", Kind::error, [] { Fixture x; chunk(x.q, 0, 0); }, {"chunk: n must be from 1 to 65536, got 0"}},
      {"O60", "embedding", "a table that is not a matrix", Kind::error, [] { Fixture x; embedding(x.flat, x.g.indices("ids", xt::xarray<std::int64_t>{0})); }, {"embedding (node 5): table (3,) must be a matrix (V, d)"}},
      {"O61", "embedding", "an output of too many elements", Kind::error, [] { Fixture x; auto t = x.g.input("t", z({1, 32768})); embedding(t, x.g.indices("ids", xt::xarray<std::int64_t>::from_shape({16384}))); }, {"embedding (node 6): the output (16384, 32768) (ids..., d) of table (1, 32768) and ids (16384,)", "more than 268435456 elements"}},
      {"O62", "embedding, embedding_vjp", "an id that is not an integer (NaN and inf included)", Kind::error, [] { Fixture x; embedding(x.k, x.g.input("ids", xt::xarray<double>{{0, 1}, {2.5, 3}})); }, {"embedding (node 5): id 2.5 at ids[1, 0] is not an integer"}},
      {"O63", "embedding, embedding_vjp", "a negative id", Kind::error, [] { Fixture x; embedding(x.k, x.g.indices("ids", xt::xarray<std::int64_t>{0, -1})); }, {"embedding (node 5): id -1 at ids[1] is negative"}},
      {"O64", "embedding, embedding_vjp", "an id not below the table's rows", Kind::error, [] { Fixture x; embedding(x.k, x.g.indices("ids", xt::xarray<std::int64_t>{{0, 1, 2}, {3, 3, 4}})); }, {"embedding (node 5): id 4 at ids[1, 2] is out of range for a table of 4 rows"}},
      {"O65", "embedding, embedding_vjp", "an id of 2^24 or more held as float32", Kind::error, [] { Graph<float> g; auto t = g.input("t", xt::xarray<float>::from_shape({16777217, 0})); embedding(t, g.input("ids", xt::xarray<float>{16777216.0f})); }, {"embedding (node 2): id 16777216 at ids[0] is 2^24 = 16777216 or more, where float32 no longer holds every integer: give such ids as an index leaf (Graph::indices)"}},
      {"O66", "embedding_vjp", "a grad_out that is not (ids..., d)", Kind::error, [] { Fixture x; embedding_vjp(x.q, x.g.indices("ids", xt::xarray<std::int64_t>{0, 1, 2}), 4); }, {"embedding_vjp (node 5): grad_out (2, 3) must be (ids..., d) for ids (3,)"}},
      {"O67", "embedding_vjp", "a gradient of too many elements", Kind::error, [] { Fixture x; embedding_vjp(x.flat, x.g.indices("id", xt::xarray<std::int64_t>(0)), std::size_t(1) << 27); }, {"embedding_vjp (node 5): the gradient (134217728, 3) (V, d) of a table of 134217728 rows", "more than 268435456 elements"}},
      {"O68", "dropout", "p outside [0, 1] (NaN included)", Kind::error, [] { Fixture x; dropout(x.q, 1.5, 7); }, {"dropout (node 4): p must be in [0, 1], got 1.5"}},
      {"O69", "gelu_vjp", "x and grad_out differ in shape", Kind::error, [] { Fixture x; gelu_vjp(x.q, x.k); }, {"gelu_vjp (node 4): x and grad_out differ in shape: x is (2, 3), grad_out is (4, 3)"}},
      {"O70", "layer_norm_vjp", "gamma not (d), mean or rstd not (..., 1), or grad_y not x's shape", Kind::error, [] { Fixture x; layer_norm_vjp(x.q, x.flat, x.q, x.q, x.q); }, {"layer_norm_vjp (node 4): x (2, 3) needs gamma (3,), mean and rstd (2, 1) and grad_y (2, 3); got gamma (3,), mean (2, 3), rstd (2, 3), grad_y (2, 3)"}},
      {"O71", "take_label", "an x of rank 0, or whose leading axes do not broadcast to the labels'", Kind::error, [] { Fixture x; take_label(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1, 2})); }, {"take_label (node 5): x (2, 3) must be (labels..., C), its leading axes (2,) broadcasting to labels (3,)"}},
      {"O72", "take_label, take_label_vjp", "a label outside [0, C) that is not ignore_index", Kind::error, [] { Fixture x; take_label(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 3}), -100); }, {"take_label (node 5): label 3 at labels[1] is outside the classes [0, 3) and is not ignore_index -100"}},
      {"O73", "take_label, take_label_vjp", "labels that are not an index leaf", Kind::error, [] { Fixture x; take_label(x.q, x.g.constant("labels", z({2}))); }, {"take_label (node 5): labels must be an index leaf (Graph::indices) of int64 class labels, not float64 values"}},
      {"O74", "take_label_vjp", "a grad_out not of the labels' shape", Kind::error, [] { Fixture x; take_label_vjp(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1, 2}), 3); }, {"take_label_vjp (node 5): grad_out (2, 3) must have the shape of labels (3,)"}},
      {"O75", "take_label_vjp", "a gradient of too many elements", Kind::error, [] { Fixture x; take_label_vjp(x.flat, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1, 2}), std::size_t(1) << 27); }, {"take_label_vjp (node 5): the gradient (3, 134217728) (labels..., C) of 134217728 classes", "more than 268435456 elements"}},
      {"O80", "where", "cond, a and b that do not broadcast together", Kind::error, [] { Fixture x; where(x.q, x.flat, x.k); }, {"where (node 4): cond (2, 3), a (3,) and b (4, 3) do not broadcast together"}},
      {"O81", "where", "a broadcast result of too many elements", Kind::error, [] { Fixture x; auto c = x.g.input("c", z({32768, 1})); auto a = x.g.input("a", z({1, 32768})); where(c, a, a); }, {"where (node 6): broadcasting cond (32768, 1), a (1, 32768) and b (1, 32768) to (32768, 32768)", "more than 268435456 elements"}},
      {"O82", "equal, less, less_equal, greater, greater_equal, logical_and, logical_or", "shapes that do not broadcast together", Kind::error, [] { Fixture x; less(x.q, x.k); }, {"less (node 4): a (2, 3) and b (4, 3) do not broadcast together"}},
      {"O83", "pow", "an exponent that is not finite", Kind::error, [] { Fixture x; pow(x.q, std::numeric_limits<double>::infinity()); }, {"pow: the exponent must be finite, got inf"}},
      // attention.
      {"A01", "attention", "rank < 2", Kind::error, [] { Fixture x; attention(x.flat, x.k, x.v); }, {"rank >= 2", "q is (3,)"}},
      {"A02", "attention", "batch axes differ", Kind::error, [] { Fixture x; auto qb = x.g.input("qb", z({2, 2, 3})); attention(qb, x.k, x.v); }, {"batch axes differ", "(2, 2, 3)", "(4, 3)"}},
      {"A03", "attention", "d_k of q and k differ", Kind::error, [] { Fixture x; attention(x.q, x.v, x.v); }, {"d_k differs", "q has d_k = 3", "k has d_k = 5", "(2, 3)", "(4, 5)"}},
      {"A04", "attention", "T_k of k and v differ", Kind::error, [] { Fixture x; auto v3 = x.g.input("v3", z({3, 5})); attention(x.q, x.k, v3); }, {"T_k differs", "k has T_k = 4", "v has T_k = 3"}},
      {"A05", "attention", "no keys (T_k = 0)", Kind::error, [] { Fixture x; auto k0 = x.g.input("k0", z({0, 3})); auto v0 = x.g.input("v0", z({0, 5})); attention(x.q, k0, v0); }, {"T_k = 0", "(0, 3)", "(0, 5)"}},
      {"A06", "attention", "d_k = 0", Kind::error, [] { Fixture x; auto q0 = x.g.input("q0", z({2, 0})); auto k0 = x.g.input("kd0", z({4, 0})); attention(q0, k0, x.v); }, {"d_k = 0", "(2, 0)", "(4, 0)"}},
      {"A07", "attention", "q, k, v of different graphs", Kind::error, [] { Fixture x; attention(x.q, x.alien, x.v); }, {"k (node 0) belongs to another graph"}},
      {"A08", "attention", "a scale that is not finite", Kind::error, [] { Fixture x; attention(x.q, x.k, x.v, std::nan("")); }, {"attention: the scale must be finite, got nan"}},
      {"A09", "attention", "a mask that does not broadcast to the scores", Kind::error, [] { Fixture x; masked_attention(x.q, x.k, x.v, causal_mask(4, 2)); }, {"the mask (4, 2) does not broadcast to the scores (2, 4)"}},
      {"A10", "attention", "a padding length beyond T_k", Kind::error, [] { padding_mask({2, 7}, 3, 5); }, {"sequence 1 has length 7, more than T_k = 5"}},
      {"A11", "multi_head_attention", "x_q or x_kv not (B, T, d_model) alike", Kind::error, [] { Graph<double> g; const auto p = attention_params(g, 4, 1); multi_head_attention(g.input("a", z({3, 4})), g.input("b", z({2, 3, 4})), p, 2); }, {"x_q is (3, 4), x_kv is (2, 3, 4)"}},
      {"A12", "multi_head_attention", "heads that do not divide d_model", Kind::error, [] { Graph<double> g; const auto p = attention_params(g, 4, 1); const auto x = g.input("x", z({1, 2, 4})); multi_head_attention(x, x, p, 3); }, {"3 heads do not divide d_model = 4"}},
      {"A13", "multi_head_attention", "a projection of the wrong shape", Kind::error, [] { Graph<double> g; const auto p = attention_params(g, 2, 1); const auto x = g.input("x", z({1, 2, 4})); multi_head_attention(x, x, p, 2); }, {"w_q is (2, 2), expected (4, 4) for d_model = 4"}},
      {"A14", "multi_head_attention", "a fixed mask other than causal_mask with the fused attention", Kind::error, [] { Graph<double> g; const auto p = attention_params(g, 4, 1); const auto x = g.input("x", z({1, 2, 4})); multi_head_attention(x, x, p, 2, padding_mask({1}, 2, 2), AttentionImpl::fused); }, {"multi_head_attention: the fused attention takes causal_mask(2, 2) as its fixed mask, not this (1, 2, 2) mask; give a key-padding mask as a Var (B, 1, 1, T_k), or use AttentionImpl::composed"}},
      {"A15", "causal_mask, padding_mask", "a mask of too many elements", Kind::error, [] { causal_mask(std::size_t(1) << 32, std::size_t(1) << 32); }, {"causal_mask: a (4294967296, 4294967296) mask", "more than 268435456 elements"}},
      {"A16", "attention", "scores of too many elements", Kind::error, [] { Fixture x; auto qa = x.g.input("qa", z({32768, 1})); attention(qa, qa, qa); }, {"attention: the scores (32768, 32768)", "more than 268435456 elements"}},
      {"A17", "multi_head_attention", "an input or parameter empty or of another graph", Kind::error, [] { Graph<double> g, other; const auto p = attention_params(g, 4, 1); multi_head_attention(g.input("x", z({1, 2, 4})), other.input("alien", z({1, 2, 4})), p, 2); }, {"x_kv (node 0) belongs to another graph than x_q"}},
      {"A18", "multi_head_attention", "d_model or T_k of 0", Kind::error, [] { Graph<double> g; const auto p = attention_params(g, 4, 1); multi_head_attention(g.input("x", z({1, 2, 4})), g.input("none", z({1, 0, 4})), p, 2); }, {"needs d_model > 0 and T_k > 0", "x_kv is (1, 0, 4)"}},
      {"A19", "rope", "an odd or empty head dimension", Kind::error, [] { Graph<double> g; rope(g.input("x", z({2, 5, 7})), rope_positions(g, 5)); }, {"rope (node 2): the last axis of x must be even and non-empty", "x is (2, 5, 7), positions (5,)"}},
      {"A20", "repeat_kv", "x of rank < 3 or groups of 0", Kind::error, [] { Graph<double> g; repeat_kv(g.input("x", z({2, 3, 4})), 0); }, {"repeat_kv: groups must be >= 1", "x is (2, 3, 4)"}},
      {"A21", "alibi_slopes, alibi_bias", "no heads", Kind::error, [] { Graph<double> g; alibi_bias(g, 0, 4, 4); }, {"alibi_bias: heads must be >= 1, got 0 (for T_q = 4, T_k = 4)"}},
      {"A22", "softcap", "a cap not finite and > 0", Kind::error, [] { Graph<double> g; softcap(g.input("x", z({2, 3})), std::nan("")); }, {"softcap: cap must be finite and > 0, got nan (for x (2, 3))"}},
      {"A23", "qk_norm", "a gain that is not (d_head)", Kind::error, [] { Graph<double> g; qk_norm(g.input("x", z({2, 3, 4})), g.input("gain", z({3})), QkNorm::layer); }, {"qk_norm (layer): x must be (..., d_head), d_head > 0, and gain (d_head): x is (2, 3, 4), gain (3,)"}},
      {"A24", "variant_attention", "kv heads that do not divide the query heads", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 4, 2, 3})), k = g.input("k", z({1, 3, 5, 3})); variant_attention(q, k, k); }, {"the 3 key/value heads do not divide the 4 query heads", "q is (1, 4, 2, 3), k is (1, 3, 5, 3)"}},
      {"A25", "variant_attention", "a bias or mask that does not broadcast to the scores", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})), k = g.input("k", z({1, 1, 5, 3})); VariantOptions<double> o; o.bias = alibi_bias(g, 2, 5, 5); variant_attention(q, k, k, o); }, {"variant_attention: the bias (2, 5, 5) does not broadcast to the scores (1, 2, 2, 5)"}},
      {"A26", "variant_attention", "a sigmoid_bias with softmax weights", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})); VariantOptions<double> o; o.sigmoid_bias = 0.0; variant_attention(q, q, q, o); }, {"variant_attention: sigmoid_bias is for sigmoid weights; these are softmax"}},
      {"A27", "variant_multi_head_attention", "kv_heads that do not divide heads", Kind::error, [] { Graph<double> g; const auto p = variant_attention_params(g, 8, 4, 4, false, 1); variant_multi_head_attention(g.input("x", z({1, 2, 8})), p, 4, 3); }, {"variant_multi_head_attention: 3 kv_heads do not divide the 4 heads"}},
      {"A28", "variant_multi_head_attention", "an odd head dimension with rope", Kind::error, [] { Graph<double> g; const auto p = variant_attention_params(g, 12, 4, 4, false, 1); VariantBlockOptions<double> o; o.rope = true; variant_multi_head_attention(g.input("x", z({1, 2, 12})), p, 4, 4, o); }, {"rope needs an even head dimension", "got d_head = 3 (d_model = 12, 4 heads)"}},
      {"A29", "variant_multi_head_attention", "a projection or gain of the wrong shape", Kind::error, [] { Graph<double> g; const auto p = variant_attention_params(g, 8, 2, 2, false, 1); variant_multi_head_attention(g.input("x", z({1, 2, 8})), p, 2, 1); }, {"w_k is (8, 8), expected (8, 4) for d_model = 8, 2 heads and 1 kv_heads (d_head = 4)"}},
      {"A30", "sliding_window_mask", "a window of 0 keys", Kind::error, [] { sliding_window_mask(3, 3, 0); }, {"sliding_window_mask: window = 0 lets no query attend to any key; a window holds at least the query's own position (window >= 1)"}},
      {"A31", "variant_attention", "a window without causal", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})); VariantOptions<double> o; o.window = 2; variant_attention(q, q, q, o); }, {"variant_attention: window = 2 is a causal sliding window", "set causal = true too"}},
      {"A32", "variant_attention", "a bias with impl fused", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})); VariantOptions<double> o; o.bias = alibi_bias(g, 2, 2, 2); o.impl = AttentionImpl::fused; variant_attention(q, q, q, o); }, {"variant_attention: impl fused has no additive bias (ALiBi), got a bias (2, 2, 2): use AttentionImpl::composed"}},
      {"A33", "variant_attention", "sigmoid weights with impl fused", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})); VariantOptions<double> o; o.weights = AttentionWeights::sigmoid; o.impl = AttentionImpl::fused; variant_attention(q, q, q, o); }, {"variant_attention: impl fused has softmax weights only", "got sigmoid weights: use AttentionImpl::composed"}},
      {"A34", "variant_attention", "a mask that is not a key-padding mask with impl fused", Kind::error, [] { Graph<double> g; const auto q = g.input("q", z({1, 2, 2, 3})); VariantOptions<double> o; o.mask = g.constant("causal", xt::cast<double>(causal_mask(2, 2))); o.impl = AttentionImpl::fused; variant_attention(q, q, q, o); }, {"variant_attention: impl fused takes a key-padding mask (B..., 1, T_k) broadcasting to (1, 2, 1, 2)", "not the mask (2, 2) for the scores (1, 2, 2, 2)", "set causal = true and window instead"}},
      {"A35", "variant_multi_head_attention", "alibi with impl fused", Kind::error, [] { Graph<double> g; const auto p = variant_attention_params(g, 8, 2, 2, false, 1); VariantBlockOptions<double> o; o.alibi = true; o.attention.impl = AttentionImpl::fused; variant_multi_head_attention(g.input("x", z({1, 2, 8})), p, 2, 2, o); }, {"variant_multi_head_attention: impl fused has no additive bias (ALiBi), got alibi = true: use AttentionImpl::composed"}},
      // Diagnostics and the sweep.
      {"S01", "diagnostics", "a threshold outside (0, 1]", Kind::error, [] { Fixture x; softmax_diagnostics(x.g, 0.0); }, {"the threshold must be in (0, 1], got 0"}},
      {"S02", "sweep", "a d_k of 0", Kind::error, [] { SweepOptions o; o.d_k = {4, 0}; saturation_sweep(o); }, {"saturation_sweep: d_k = 0"}},
      {"S03", "sweep", "T_q, T_k or trials of 0", Kind::error, [] { SweepOptions o; o.t_k = 0; saturation_sweep(o); }, {"T_k = 0"}},
      {"S04", "sweep", "an array of a trial of too many elements", Kind::error, [] { SweepOptions o; o.t_q = o.t_k = 32768; saturation_sweep(o); }, {"saturation_sweep: the scores (T_q, T_k) (32768, 32768)", "more than 268435456 elements"}},
      {"S05", "diagnostics", "per-row statistics of more than 2^22 rows", Kind::error, [] { Graph<double> g; softmax(broadcast_to(g.input("x", {{1.0}}), {max_diagnostic_rows + 1, 1})); softmax_diagnostics(g); }, {"softmax_diagnostics: the softmax nodes have 4194305 rows in all, more than the 4194304"}},
      {"S06", "xgrad inspect", "--format json of more than 2^22 softmax rows", Kind::error, [] { Graph<double> g; softmax(broadcast_to(g.input("x", {{1.0}}), {max_diagnostic_rows + 1, 1})); std::ofstream(at("rows.json")) << to_json(g, ExportValues::inputs).dump(); run_cli(tool::inspect_command, {at("rows.json"), "--format", "json"}); }, {"rows.json: the softmax nodes have 4194305 rows in all", "--format table or csv"}},
      {"S07", "diagnostics", "attention weights and logits of different shapes", Kind::error, [] { Graph<double> g; attention_weights_diagnostics(g.input("w", z({2, 3})), g.input("s", z({3, 2}))); }, {"attention_weights_diagnostics: weights must be (..., T_k) with T_k > 0 and logits of their shape: weights are (2, 3), logits (3, 2)"}},
      {"S08", "diagnostics", "a group axis that is no softmax node's axis but its softmax axis", Kind::error, [] { Graph<double> g; softmax(g.input("x", z({2, 3}))); softmax_diagnostics(g, 0.99, true, 1); }, {"softmax_diagnostics: group axis 1 is an axis other than the softmax axis of no softmax node (node 1 (2, 3) along axis 1)"}},
      {"T19", "xgrad", "inspect of a graph without stored inputs", Kind::error, [] { Graph<double> g; g.input("x", {{1.0}}); std::ofstream(at("none.json")) << to_json(g, ExportValues::none).dump(); run_cli(tool::inspect_command, {at("none.json")}); }, {"none.json: node 0 ('x') has no stored value"}},
      {"T20", "xgrad", "a --threshold outside (0, 1]", Kind::usage, [] { run_cli(tool::inspect_command, {"g.json", "--threshold", "0"}); }, {"--threshold needs a number in (0, 1], not '0'"}},
      {"T21", "xgrad", "a sweep size that is not a positive integer", Kind::usage, [] { run_cli(tool::saturation_command, {"--dk", "16,0"}); }, {"--dk needs an integer from 1 to 65536, not '0'"}},
      {"T22", "xgrad", "an integer option outside its range (never wrapped)", Kind::usage, [] { run_cli(tool::saturation_command, {"--seed", "18446744073709551620"}); }, {"--seed needs an integer from 0 to 18446744073709551615, not '18446744073709551620'"}},
      {"T23", "xgrad", "a number that is not plain decimal (spaces, a sign, inf, hex)", Kind::usage, [] { run_cli(tool::inspect_command, {"g.json", "--threshold", " 0.5"}); }, {"--threshold needs a number in (0, 1], not ' 0.5'"}},
      {"T24", "xgrad", "an output that exists and is not a regular file", Kind::error, [] { run_cli(tool::export_command, {"--shape", "1,1,1,1", "-o", at("dir.json")}); }, {"dir.json: exists and is a directory; refusing to replace it"}},
      {"T25", "xgrad", "an output that is a symbolic link to nothing", Kind::error, [] { fs::remove(at("dangling.json")); fs::create_symlink("nowhere.json", at("dangling.json")); run_cli(tool::export_command, {"--shape", "1,1,1,1", "-o", at("dangling.json")}); }, {"dangling.json: is a symbolic link to nothing; refusing to write through it"}},
      {"T26", "xgrad", "an output whose write fails", Kind::error, [] { FileSizeLimit limit(16); run_cli(tool::export_command, {"--shape", "1,1,1,1", "-o", at("fsize.json")}); }, {"fsize.json: cannot write it: File too large"}},
      // Optimizers.
      {"P01", "optim", "a parameter that is not a parameter leaf", Kind::error, [] { Fixture x; Sgd<double>({x.q}, 0.1); }, {"Sgd: params[0] is not a parameter (node 0, input)"}},
      {"P02", "optim", "hyperparameters out of range", Kind::error, [] { Graph<double> g; Adam<double>({g.parameter("w", z({2}))}, 0.1, 0.9, 1.5); }, {"Adam: beta2 must be in [0, 1), got 1.5"}},
      {"P03", "optim", "gradients that do not match the parameters", Kind::error, [] { Graph<double> g; const auto w = g.parameter("w", z({2, 3})); Sgd<double> s({w}, 0.1); s.step({g.constant("c", z({3, 2}))}); }, {"Sgd::step: the gradient of params[0] (2, 3) is (3, 2)"}},
      {"P04", "optim", "a gradient of another graph than its parameter", Kind::error, [] { Graph<double> g, h; const auto w = g.parameter("w", z({2, 3})); Sgd<double> s({w}, 0.1); s.step({h.constant("c", z({2, 3}))}); }, {"Sgd::step: the gradient of params[0] (node 0) belongs to another graph than the parameter (node 0)"}},
      {"P05", "optim", "a hyperparameter that is not finite", Kind::error, [] { Graph<double> g; Adam<double>({g.parameter("w", z({2}))}, std::numeric_limits<double>::infinity()); }, {"Adam: lr must be a finite number >= 0, got inf"}},
      {"P06", "glorot_uniform, he_normal", "a shape of too many elements", Kind::error, [] { glorot_uniform<double>({std::size_t(1) << 32, std::size_t(1) << 32}, 1); }, {"glorot_uniform: a (4294967296, 4294967296) array", "more than 268435456 elements"}},
      {"P07", "optim", "a negative or non-finite weight_decay of AdamW", Kind::error, [] { Graph<double> g; AdamW<double>({g.parameter("w", z({2}))}, 1e-3, 0.9, 0.999, 1e-8, -0.01); }, {"AdamW: weight_decay must be a finite number >= 0, got -0.01"}},
      {"P08", "optim", "set_lr with a negative or non-finite lr", Kind::error, [] { Graph<double> g; Adam<double> a({g.parameter("w", z({2}))}); a.set_lr(-1.0); }, {"Adam::set_lr: lr must be a finite number >= 0, got -1"}},
      {"P09", "clip_grad_norm", "a max_norm that is not finite and >= 0", Kind::error, [] { Graph<double> g; clip_grad_norm<double>({g.constant("c", z({2}))}, -1.0); }, {"clip_grad_norm: max_norm must be a finite number >= 0, got -1"}},
      {"P10", "clip_grad_norm", "an empty Var among the gradients", Kind::error, [] { Graph<double> g; clip_grad_norm<double>({g.constant("c", z({2})), Var<double>()}, 1.0); }, {"clip_grad_norm: grads[1] is an empty Var"}},
      {"P11", "clip_grad_norm", "a gradient that is the seed grad() made", Kind::error, [] { Graph<double> g; const auto w = g.parameter("w", z({2})); clip_grad_norm(grad(w, {w}), 1.0); }, {"clip_grad_norm: grads[0] (node 1, constant 'grad_out') is a leaf that grad() made", "scale every later gradient"}},
      {"P12", "optim", "AdamW's lr, betas or eps out of range", Kind::error, [] { Graph<double> g; AdamW<double>({g.parameter("w", z({2}))}, 1e-3, 1.0); }, {"AdamW: beta1 must be in [0, 1), got 1"}},
      {"P13", "optim", "AdamW::step with gradients that do not match the parameters", Kind::error, [] { Graph<double> g; const auto w = g.parameter("w", z({2, 3})); AdamW<double> a({w}); a.step({g.constant("c", z({3, 2}))}); }, {"AdamW::step: the gradient of params[0] (2, 3) is (3, 2)"}},
      {"P14", "optim", "set_state with moments of other shapes than the parameters", Kind::error, [] { Graph<double> g; AdamW<double> a({g.parameter("a", z({2})), g.parameter("b", z({2, 3}))}); auto s = a.state(); s.m[1] = z({3}); a.set_state(s); }, {"AdamW::set_state: m[1] is (3,), the parameter (2, 3)"}},
      {"P15", "optim", "set_state with another number of moments than parameters", Kind::error, [] { Graph<double> g; AdamW<double> a({g.parameter("a", z({2})), g.parameter("b", z({2, 3}))}); auto s = a.state(); s.v.pop_back(); a.set_state(s); }, {"AdamW::set_state: 1 arrays in v for 2 parameters"}},
      {"P16", "optim", "set_state with a negative step", Kind::error, [] { Graph<double> g; Adam<double> a({g.parameter("a", z({2}))}); auto s = a.state(); s.step = -1; a.set_state(s); }, {"Adam::set_state: step must be >= 0, got -1"}},
      {"P17", "optim", "a parameter given twice, in one group or in two", Kind::error, [] { Graph<double> g; const auto a = g.parameter("a", z({2})), b = g.parameter("b", z({2})); Adam<double>(std::vector<ParamGroup<double>>{{{a, b}}, {{b}}}); }, {"Adam: groups[1].params[0] (node 1, 'b') is groups[0].params[1] again"}},
      {"P18", "optim", "no parameter groups", Kind::error, [] { Sgd<double>(std::vector<ParamGroup<double>>{}, 0.1); }, {"Sgd: no parameter groups"}},
      {"P19", "optim", "a group's lr or weight_decay that is not finite and >= 0", Kind::error, [] { Graph<double> g; AdamW<double>(std::vector<ParamGroup<double>>{{{g.parameter("a", z({2}))}}, {{g.parameter("b", z({2}))}, std::nullopt, -0.1}}); }, {"AdamW: groups[1].weight_decay must be a finite number >= 0, got -0.1"}},
      {"P20", "optim", "lr or set_lr of a group that does not exist", Kind::error, [] { Graph<double> g; Adam<double> a(std::vector<ParamGroup<double>>{{{g.parameter("a", z({2}))}}, {{g.parameter("b", z({2}))}}}); a.set_lr(2, 0.1); }, {"Adam::set_lr: no groups[2], the optimizer has 2 groups"}},
      {"P21", "optim", "lr() of groups whose learning rates differ", Kind::error, [] { Graph<double> g; Sgd<double> s({{{g.parameter("a", z({2}))}, 0.5, std::nullopt}, {{g.parameter("b", z({2}))}, std::nullopt, std::nullopt}}, 0.1); s.lr(); }, {"Sgd::lr: the groups have different learning rates (groups[0].lr 0.5, groups[1].lr 0.1); read lr(group)"}},
      {"P22", "optim", "a negative or non-finite weight_decay of Sgd or Adam", Kind::error, [] { Graph<double> g; Sgd<double>({g.parameter("w", z({2}))}, 0.1, 0.9, -1.0); }, {"Sgd: weight_decay must be a finite number >= 0, got -1"}},
      {"P23", "decay_groups", "a weight_decay that is not finite and >= 0", Kind::error, [] { Graph<double> g; decay_groups<double>({g.parameter("w", z({2}))}, -1.0); }, {"decay_groups: weight_decay must be a finite number >= 0, got -1"}},
      // Losses.
      {"L01", "cross_entropy", "logits and targets of different shapes", Kind::error, [] { Fixture x; cross_entropy(x.q, x.flat); }, {"cross_entropy: logits (2, 3) and targets (3,) must have one shape"}},
      {"L02", "mse_loss", "prediction and target of different shapes", Kind::error, [] { Fixture x; mse_loss(x.q, x.k); }, {"mse_loss: prediction (2, 3) and target (4, 3) must have one shape"}},
      {"L03", "one_hot", "a label not below the number of classes", Kind::error, [] { one_hot<double>(xt::xarray<std::size_t>{0, 5}, 5); }, {"one_hot: label 5 at [1] is not below the number of classes, 5"}},
      {"L04", "cross_entropy, mse_loss", "a Var empty or of another graph than the other", Kind::error, [] { Fixture x; mse_loss(x.q, x.alien); }, {"mse_loss: target (node 0) belongs to another graph than prediction"}},
      {"L05", "one_hot", "a result of too many elements", Kind::error, [] { one_hot<double>(xt::xarray<std::size_t>{0, 1}, std::size_t(1) << 63); }, {"one_hot: a (2, 9223372036854775808) result", "more than 268435456 elements"}},
      {"L06", "cross_entropy", "class labels not of the logits' shape without the class axis", Kind::error, [] { Fixture x; cross_entropy(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1, 2}), CrossEntropyOptions<double>{}); }, {"cross_entropy: labels (3,) must be (2,), the shape of logits (2, 3) without its class axis"}},
      {"L07", "cross_entropy", "class labels that are not an index leaf", Kind::error, [] { Fixture x; cross_entropy(x.k, x.flat, CrossEntropyOptions<double>{}); }, {"cross_entropy: labels (node 3, input) must be an index leaf (Graph::indices)"}},
      {"L08", "cross_entropy", "class weights not (C)", Kind::error, [] { Fixture x; CrossEntropyOptions<double> o; o.weights = z({2}); cross_entropy(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1}), o); }, {"cross_entropy: weights (2,) must be (3,), one per class of logits (2, 3)"}},
      {"L09", "cross_entropy", "label_smoothing outside [0, 1] (NaN included)", Kind::error, [] { Fixture x; CrossEntropyOptions<double> o; o.label_smoothing = -0.1; cross_entropy(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1}), o); }, {"cross_entropy: label_smoothing must be in [0, 1], got -0.1"}},
      {"L10", "cross_entropy", "a label outside [0, C) that is not ignore_index", Kind::error, [] { Fixture x; cross_entropy(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 3}), CrossEntropyOptions<double>{}); }, {"cross_entropy: label 3 at labels[1] is outside the classes [0, 3)"}},
      {"L11", "cross_entropy", "logits of rank 0 with class labels", Kind::error, [] { Fixture x; cross_entropy(x.g.input("s", xt::xarray<double>(0.0)), x.g.indices("labels", xt::xarray<std::int64_t>(0)), CrossEntropyOptions<double>{}); }, {"cross_entropy: logits () have no class axis"}},
      {"L12", "cross_entropy", "class labels given to the form of target probabilities", Kind::error, [] { Fixture x; cross_entropy(x.q, x.g.indices("labels", xt::xarray<std::int64_t>{0, 1})); }, {"cross_entropy: targets (node 4) is an index leaf", "CrossEntropyOptions<T>{}"}},
      // gradcheck.
      {"C01", "gradcheck", "an x that is not a leaf", Kind::error, [] { Fixture x; auto s = scale(x.q, 2.0); gradcheck(s, {s}); }, {"x[0] (node", "is a scale node", "leaves"}},
      {"C02", "gradcheck", "no inputs", Kind::error, [] { Fixture x; gradcheck(x.q, {}); }, {"no inputs"}},
      {"C03", "gradcheck", "projection mode with 0 projections", Kind::error, [] { Fixture x; GradcheckOptions o; o.mode = GradcheckMode::projection; o.projections = 0; gradcheck(scale(x.q, 1.0), {x.q}, o); }, {"projections = 0"}},
      {"C04", "gradcheck", "eps not a positive number", Kind::error, [] { Fixture x; GradcheckOptions o; o.eps = -1; gradcheck(scale(x.q, 1.0), {x.q}, o); }, {"eps must be a positive number"}},
      {"C05", "gradcheck", "a full Jacobian of too many elements", Kind::error, [] { Fixture x; auto xs = x.g.input("xs", z({32768})); GradcheckOptions o; o.mode = GradcheckMode::full; gradcheck(scale(xs, 2.0), {xs}, o); }, {"gradcheck: the full Jacobian (32768, 32768) of x[0]", "more than 268435456 elements"}},
      // Graph JSON import.
      {"J01", "graph JSON", "not JSON, or truncated", Kind::error, [] { graph_from_json<double>("{\"format\": \"xgrad-gr"); }, {"graph JSON: not JSON"}},
      {"J02", "graph JSON", "nested deeper than the format allows", Kind::error, [] { graph_from_json<double>(std::string(1000, '[') + std::string(1000, ']')); }, {"graph JSON: nested deeper than 6 levels"}},
      {"J03", "graph JSON", "a NUL byte", Kind::error, [] { graph_from_json<double>(std::string_view("{}\0x", 4)); }, {"graph JSON: not JSON: a NUL byte at byte 2"}},
      {"J04", "graph JSON", "another format", Kind::error, [] { import_edited([](Json& j) { j["format"] = "onnx"; }); }, {"format: expected \"xgrad-graph\", got \"onnx\""}},
      {"J05", "graph JSON", "another version", Kind::error, [] { import_edited([](Json& j) { j["version"] = 3; }); }, {"version: version 3 is not supported (this is version 2, and reads version 1 too)"}},
      {"J06", "graph JSON", "a dtype other than float32 or float64", Kind::error, [] { import_edited([](Json& j) { j["dtype"] = "int8"; }); }, {"dtype: expected \"float32\" or \"float64\", got \"int8\""}},
      {"J07", "graph JSON", "read as the other dtype", Kind::error, [] { graph_from_json<float>(small_graph().dump()); }, {"dtype: the graph is float64, asked to read it as float32"}},
      {"J08", "graph JSON", "a missing key", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1].erase("op"); }); }, {"nodes[1]: missing key \"op\""}},
      {"J09", "graph JSON", "an unknown key", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["colour"] = 1; }); }, {"nodes[1].colour: unknown key"}},
      {"J10", "graph JSON", "a value of the wrong type", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"] = "0"; }); }, {"nodes[1].inputs: expected an array, got string"}},
      {"J11", "graph JSON", "a float where an integer belongs", Kind::error, [] { import_edited([](Json& j) { j["nodes"][2]["attrs"]["axis"] = 1.5; }); }, {"nodes[2].attrs.axis: expected an integer, got 1.5"}},
      {"J12", "graph JSON", "a negative integer where an id or a size belongs", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"][0][0] = -1; }); }, {"nodes[1].inputs[0][0]: expected a non-negative integer, got -1"}},
      {"J13", "graph JSON", "an unknown op", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "frob"; }); }, {"nodes[1].op: unknown op \"frob\""}},
      {"J14", "graph JSON", "an unknown role", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["role"] = "hero"; }); }, {"nodes[1].role: unknown role \"hero\""}},
      {"J15", "graph JSON", "a duplicate id", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["id"] = 0; }); }, {"nodes[1].id: duplicate id 0"}},
      {"J16", "graph JSON", "an id out of order", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["id"] = 7; }); }, {"nodes[1].id: id 7 out of order"}},
      {"J17", "graph JSON", "an input that is a later or missing node", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"][0][0] = 5; }); }, {"nodes[1].inputs[0][0]: refers to node 5, which is not before node 1"}},
      {"J18", "graph JSON", "the wrong number of inputs", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"].push_back({0, 0}); }); }, {"nodes[1].inputs: scale takes 1 inputs, got 2"}},
      {"J19", "graph JSON", "a missing attribute", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["attrs"].erase("alpha"); }); }, {"nodes[1].attrs: missing key \"alpha\""}},
      {"J20", "graph JSON", "an attribute of the wrong type", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["attrs"]["alpha"] = true; }); }, {"nodes[1].attrs.alpha: expected a number, got boolean"}},
      {"J21", "graph JSON", "attributes the op rejects", Kind::error, [] { import_edited([](Json& j) { j["nodes"][2]["attrs"]["axis"] = 7; }); }, {"nodes[2]: softmax: axis 7 is out of range for a (1, 2) input"}},
      {"J22", "graph JSON", "a declared shape the op does not give", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["outputs"][0]["shape"] = {2, 1}; }); }, {"nodes[1].outputs[0].shape: declared (2, 1), but scale of its inputs gives (1, 2)"}},
      {"J23", "graph JSON", "data of another length than the shape", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["outputs"][0]["data"].push_back(1); }); }, {"nodes[0].outputs[0].data: holds 3 numbers, but shape (1, 2) needs 2"}},
      {"J24", "graph JSON", "a value of another shape than its node (version 1)", Kind::error, [] { import_edited([](Json& j) { j = test::as_version_1(j); j["nodes"][0]["value"]["shape"] = {2, 1}; }); }, {"nodes[0].value.shape: is (2, 1), the node's shape is (1, 2)"}},
      {"J25", "graph JSON", "a shape of too many elements", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["outputs"][0]["shape"] = {1u << 20, 1u << 20}; }); }, {"nodes[0].outputs[0].shape: more than 268435456 elements"}},
      {"J26", "graph JSON", "a graph of too many elements in all", Kind::error, [] { Json j = small_graph(); j["nodes"][0]["outputs"][0].erase("data"); j["nodes"][0]["outputs"][0]["shape"] = {1u << 14, 1u << 14}; graph_from_json<double>(j.dump(), 1u << 20); }, {"nodes[0]: the graph holds more than 1048576 elements in all"}},
      {"J27", "graph JSON", "a string other than \"nan\", \"inf\", \"-inf\" for a number", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["outputs"][0]["data"][1] = "NaN"; }); }, {"nodes[0].outputs[0].data[1]: expected a number or \"nan\", \"inf\", \"-inf\", got the string \"NaN\""}},
      {"J28", "graph JSON", "a float32 value out of range", Kind::error, [] { Graph<float> g; g.input("x", {{1.0f}}); Json j = to_json(g, ExportValues::all); j["nodes"][0]["outputs"][0]["data"][0] = 1e300; graph_from_json<float>(j.dump()); }, {"nodes[0].outputs[0].data[0]: out of the range of float32"}},
      {"J29", "graph JSON", "a leaf whose role is not its op", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["role"] = "forward"; }); }, {"nodes[0].role: a leaf \"input\" has role \"forward\""}},
      {"J30", "graph JSON", "a leaf with inputs or attributes", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["attrs"]["alpha"] = 1; }); }, {"nodes[0].attrs: a leaf has no attributes"}},
      {"J31", "graph JSON", "an op node with a leaf's role", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["role"] = "input"; }); }, {"nodes[1].role: op \"scale\" is not a leaf"}},
      {"J32", "graph JSON", "grad_of on a forward node, or of a later node", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["outputs"][0]["grad_of"] = {0, 0}; }); }, {"nodes[1].outputs[0].grad_of: a forward node is no gradient"}},
      {"J33", "graph JSON", "an output or grad name for a missing node", Kind::error, [] { import_edited([](Json& j) { j["outputs"]["y"] = {9, 0}; }); }, {"outputs.y[0]: refers to node 9 of a graph of 3"}},
      {"J34", "graph JSON", "a key given twice in one object", Kind::error, [] { graph_from_json<double>("{\"format\": \"xgrad-graph\", \"format\": \"xgrad-graph\"}"); }, {"graph JSON: top level: the key \"format\" appears twice"}},
      {"J35", "graph JSON", "more work than an import runs", Kind::error, [] { graph_from_parsed_json<double>(small_graph(), max_array_elements, 5.0); }, {"nodes[2]: computing the graph takes more than 5 element visits (Op::work), the most this import runs: 72 in all, this softmax 68"}},
      {"J36", "graph JSON", "a work limit that is not a finite number >= 0", Kind::error, [] { graph_from_parsed_json<double>(small_graph(), max_array_elements, std::numeric_limits<double>::quiet_NaN()); }, {"graph_from_json: max_work must be a finite number >= 0, got nan"}},
      {"J37", "graph JSON", "an input or name for an output its node does not have", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"][0][1] = 1; }); }, {"nodes[1].inputs[0]: refers to output 1 of node 0, which has 1"}},
      {"J38", "graph JSON", "an input or name that is not [node, output]", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["inputs"][0] = {0}; }); }, {"nodes[1].inputs[0]: expected [node, output], an array of 2 integers"}},
      {"J39", "graph JSON", "another number of outputs than the op has", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["outputs"].push_back(j["nodes"][1]["outputs"][0]); }); }, {"nodes[1].outputs: scale has 1 outputs, got 2"}},
      {"J40", "graph JSON", "a leaf with another number of outputs than 1", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["outputs"] = Json::array(); }); }, {"nodes[0].outputs: a leaf has 1 output, not 0"}},
      {"J41", "graph JSON", "an index leaf in a version 1 file", Kind::error, [] { import_edited([](Json& j) { j = test::as_version_1(j); j["nodes"][0]["op"] = "indices"; }); }, {"nodes[0].op: version 1 has no index leaves"}},
      {"J42", "graph JSON", "an index leaf where an op takes values", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["op"] = "indices"; j["nodes"][0]["outputs"][0]["data"] = {1, 2}; }); }, {"nodes[1].inputs[0]: node 0 is an index leaf; scale takes float64 values there"}},
      {"J43", "graph JSON", "an index that is not an integer", Kind::error, [] { import_edited([](Json& j) { j["nodes"][0]["op"] = "indices"; j["nodes"][0]["outputs"][0]["data"] = {1, 2.5}; }); }, {"nodes[0].outputs[0].data[1]: expected an integer, got 2.5"}},
      {"J44", "graph JSON", "a version 1 node of an op that has several outputs now", Kind::error, [] { import_edited([](Json& j) { j = test::as_version_1(j); j["nodes"][1]["op"] = "flash_attention"; j["nodes"][1]["attrs"] = {{"scale", 1.0}}; j["nodes"][1]["inputs"] = {0, 0, 0}; }); }, {"nodes[1].op: a version 1 flash_attention node has one output; this version's flash_attention has 2: export the graph again"}},
      {"J45", "graph JSON", "a step that is not an integer from 0 to 2^64 - 1", Kind::error, [] { import_edited([](Json& j) { j["step"] = -1; }); }, {"graph JSON: step: expected an integer from 0 to 18446744073709551615, got -1"}},
      {"J46", "graph JSON", "a training mode that is not a boolean", Kind::error, [] { import_edited([](Json& j) { j["training"] = "no"; }); }, {"graph JSON: training: expected true or false, got string"}},
      {"J47", "graph JSON", "a dropout seed that is not an integer from 0 to 2^64 - 1", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "dropout"; j["nodes"][1]["attrs"] = {{"p", 0.5}, {"seed", 1.5}}; }); }, {"graph JSON: nodes[1].attrs.seed: expected an integer from 0 to 18446744073709551615, got 1.5"}},
      {"J48", "graph JSON", "a step or training mode in a version 1 file", Kind::error, [] { import_edited([](Json& j) { j = test::as_version_1(j); j["step"] = 3; }); }, {"graph JSON: step: version 1 has no run state (step, training)"}},
      {"J51", "graph JSON", "a gelu approximation other than none or tanh", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "gelu"; j["nodes"][1]["attrs"] = {{"approximate", "erf"}}; }); }, {"graph JSON: nodes[1].attrs.approximate: expected \"none\" or \"tanh\", got \"erf\""}},
      {"J52", "graph JSON", "a layer_norm eps negative or not finite", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "layer_norm"; j["nodes"][1]["attrs"] = {{"eps", -1}}; }); }, {"graph JSON: nodes[1].attrs.eps: expected a finite number >= 0, got -1"}},
      {"J53", "graph JSON", "an rms_norm eps negative or not finite", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "rms_norm"; j["nodes"][1]["attrs"] = {{"eps", -1}}; }); }, {"graph JSON: nodes[1].attrs.eps: expected a finite number >= 0, got -1"}},
      {"J54", "graph JSON", "split sizes that are not 1 to 65536 non-negative integers", Kind::error, [] { import_edited([](Json& j) { j["nodes"][1]["op"] = "split"; j["nodes"][1]["attrs"] = {{"axis", 0}, {"sizes", Json::array()}}; }); }, {"graph JSON: nodes[1].attrs.sizes: split takes 1 to 65536 sizes, got 0"}},
      // .npy files.
      {"N01", ".npy", "too short", Kind::error, [] { parse_npy("\x93NUMPY", "t.npy"); }, {"t.npy: too short for a .npy file (6 bytes)"}},
      {"N02", ".npy", "no magic", Kind::error, [] { parse_npy("PK\x03\x04xxxxxxxxxxxx", "t.npy"); }, {"t.npy: not a .npy file"}},
      {"N03", ".npy", "an unsupported format version", Kind::error, [] { parse_npy(std::string("\x93NUMPY\x04\x00\x00\x00", 10), "t.npy"); }, {"t.npy: format version 4.0 is not supported"}},
      {"N04", ".npy", "a header longer than the file", Kind::error, [] { parse_npy(std::string("\x93NUMPY\x01\x00\xff\xff{}", 12), "t.npy"); }, {"t.npy: the header claims 65535 bytes", "(truncated)"}},
      {"N05", ".npy", "a malformed header dict", Kind::error, [] { parse_npy(std::string("\x93NUMPY\x01\x00\x05\x00{'a' ", 15), "t.npy"); }, {"t.npy: malformed header dict"}},
      {"N06", ".npy", "an unknown, missing or repeated header key", Kind::error, [] { parse_npy(std::string("\x93NUMPY\x01\x00\x0c\x00{'descr': 1", 22), "t.npy"); }, {"t.npy: malformed header dict: expected a quoted string"}},
      {"N07", ".npy", "a dtype other than float32 or float64", Kind::error, [] { read_npy(at("int.npy")); }, {"int.npy: dtype '<i8' is not supported"}},
      {"N08", ".npy", "a negative axis", Kind::error, [] { parse_npy(npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }"), "t.npy"); }, {"t.npy: negative axis length"}},
      {"N09", ".npy", "a shape of too many elements", Kind::error, [] { parse_npy(npy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (99999, 99999), }"), "t.npy"); }, {"t.npy: shape (99999, 99999) has more than 268435456 elements"}},
      {"N10", ".npy", "data of another length than the shape", Kind::error, [] { parse_npy(npy_bytes(xt::xarray<double>{1.0, 2.0}).substr(0, 130), "t.npy"); }, {"t.npy: shape (2,) of float64 needs 16 data bytes, the file has 2 (truncated)"}},
      {"N11", ".npy", "'fortran_order' not True or False", Kind::error, [] { std::string b = npy_bytes(xt::xarray<double>{1.0}); b.replace(b.find("False"), 5, "Nope!"); parse_npy(b, "t.npy"); }, {"t.npy: 'fortran_order' must be True or False"}},
      // JSON arrays.
      {"R01", "JSON array", "not JSON", Kind::error, [] { parse_json_array("[1, 2", "a.json"); }, {"a.json: not JSON"}},
      {"R02", "JSON array", "ragged rows", Kind::error, [] { read_json_array(at("ragged.json")); }, {"ragged.json: [1]: ragged: 1 elements where other rows have 2"}},
      {"R03", "JSON array", "something other than a number", Kind::error, [] { parse_json_array("[[1, true]]", "a.json"); }, {"a.json: [0][1]: expected a number, got a boolean"}},
      {"R04", "JSON array", "nested deeper than 32 levels", Kind::error, [] { parse_json_array(std::string(40, '[') + std::string(40, ']'), "a.json"); }, {"a.json", "nested deeper than 32 levels"}},
      // Files.
      {"R05", "JSON array", "more numbers than an array holds", Kind::error, [] { parse_json_array("[1, 2, 3]", "a.json", 2); }, {"a.json: [2]: more than 2 numbers, the most an array holds"}},
      {"R06", "JSON array", "empty arrays of a shape of too many elements", Kind::error, [] { parse_json_array("[[], [], []]", "a.json", 2); }, {"a.json: shape (3, 0) has more than 2 elements"}},
      {"F01", "files", "a missing file", Kind::error, [] { read_array(at("none.npy")); }, {"none.npy: no such file"}},
      {"F02", "files", "not a regular file", Kind::error, [] { read_json_array(at("dir.json")); }, {"dir.json: a directory, not a regular file"}},
      {"F03", "files", "neither .npy nor .json", Kind::error, [] { read_array(at("g.dat")); }, {"g.dat: unknown array file type"}},
      {"F04", "files", "a file larger than the reader takes", Kind::error, [] { read_text_file(at("v.json"), 4); }, {"v.json: 16 bytes, more than the 4 this reader takes"}},
      {"F05", "files", "a FIFO (or a device) to read", Kind::error, [] { fs::remove(at("fifo.json")); mkfifo(at("fifo.json").c_str(), 0600); read_json_array(at("fifo.json")); }, {"fifo.json: a FIFO, not a regular file"}},
      {"F06", "files", "an output that is an input", Kind::error, [] { write_file_atomically(at("v.json"), "[]", {at("v.json")}); }, {"v.json: is the input", "v.json; refusing to write over it"}},
      {"F07", "files", "an output in a directory that does not exist", Kind::error, [] { check_output_path(at("no/such/out.csv")); }, {"no/such/out.csv: its directory", "no/such does not exist"}},
      {"F08", "files", "more files than one atomic write takes", Kind::error, [] { write_files_atomically(std::vector<std::pair<std::string, std::string>>(9, {at("out.json"), "[]"})); }, {"write_files_atomically: 9 files, more than the 8 (max_atomic_files) written at once"}},
      // Checkpoints.
      {"K01", "checkpoints", "a safetensors file shorter than its header length", Kind::error, [] { parse_checkpoint(std::string("\x05\x00\x00", 3), CheckpointFormat::safetensors, "m.safetensors"); }, {"m.safetensors: too short for a safetensors file (3 bytes"}},
      {"K02", "checkpoints", "a safetensors header over 100 MB", Kind::error, [] { parse_checkpoint(std::string("\x00\xe2\xf5\x05\x00\x00\x00\x00{}", 10), CheckpointFormat::safetensors, "m.safetensors"); }, {"m.safetensors: the header claims 100000256 bytes, more than the 100000000"}},
      {"K03", "checkpoints", "a safetensors header longer than the file", Kind::error, [] { parse_checkpoint(std::string("\x40\x00\x00\x00\x00\x00\x00\x00{}", 10), CheckpointFormat::safetensors, "m.safetensors"); }, {"m.safetensors: the header claims 64 bytes but the file has 2 after the length (truncated)"}},
      {"K04", "checkpoints", "a safetensors header that does not begin with {", Kind::error, [] { safetensors_of(" {}"); }, {"m.safetensors: header: does not begin with '{'"}},
      {"K05", "checkpoints", "a safetensors header that is not JSON", Kind::error, [] { safetensors_of("{\"a\": "); }, {"m.safetensors: header: not JSON"}},
      {"K06", "checkpoints", "a key twice in a safetensors header (a tensor name twice)", Kind::error, [] { safetensors_of(R"({"a":{},"a":{}})"); }, {"m.safetensors: header: top level: the key \"a\" appears twice"}},
      {"K07", "checkpoints", "a safetensors header nested deeper than 3 levels", Kind::error, [] { safetensors_of(R"({"a":{"shape":[[1]]}})"); }, {"m.safetensors: header: nested deeper than 3 levels"}},
      {"K08", "checkpoints", "a dtype other than F32 or F64", Kind::error, [] { safetensors_of(edited(f64_header, "F64", "I64"), std::string(16, '\0')); }, {"m.safetensors: header: tensor 'a'.dtype: dtype \"I64\" is not supported: xgrad reads F32 and F64"}},
      {"K09", "checkpoints", "a tensor entry with a missing, unknown or mistyped key", Kind::error, [] { safetensors_of(edited(f64_header, ",\"shape\":[2]", ""), std::string(16, '\0')); }, {"m.safetensors: header: tensor 'a': missing key \"shape\""}},
      {"K10", "checkpoints", "a tensor shape of too many elements", Kind::error, [] { safetensors_of(edited(f64_header, "[2]", "[99999,99999]"), std::string(16, '\0')); }, {"m.safetensors: header: tensor 'a'.shape: more than 268435456 elements"}},
      {"K11", "checkpoints", "data_offsets that begin after they end", Kind::error, [] { safetensors_of(edited(f64_header, "[0,16]", "[16,0]"), std::string(16, '\0')); }, {"m.safetensors: tensor 'a': data_offsets [16, 0] begin after they end"}},
      {"K12", "checkpoints", "data_offsets of another size than the shape's", Kind::error, [] { safetensors_of(edited(f64_header, "[0,16]", "[0,8]"), std::string(8, '\0')); }, {"m.safetensors: tensor 'a': data_offsets [0, 8] hold 8 bytes, shape (2,) of F64 needs 16"}},
      {"K13", "checkpoints", "a truncated safetensors file", Kind::error, [] { safetensors_of(f64_header, std::string(12, '\0')); }, {"m.safetensors: tensor 'a': data_offsets [0, 16] end past the data, which has 12 bytes (truncated)"}},
      {"K14", "checkpoints", "overlapping data_offsets", Kind::error, [] { safetensors_of(R"({"a":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", std::string(16, '\0')); }, {"m.safetensors: tensor 'b': data_offsets [8, 16] overlap those of tensor 'a' [0, 16]"}},
      {"K15", "checkpoints", "data that the tensors do not tile (a gap, trailing bytes)", Kind::error, [] { safetensors_of(f64_header, std::string(18, '\0')); }, {"m.safetensors: bytes [16, 18) of the data belong to no tensor: the tensors must tile the data (trailing bytes)"}},
      {"K16", "checkpoints", "metadata that does not map strings to strings", Kind::error, [] { safetensors_of(R"({"__metadata__":{"lr":0.1}})"); }, {"m.safetensors: header: __metadata__: the value of \"lr\" is number; metadata maps strings to strings"}},
      {"K17", "checkpoints", "a tensor with an empty name", Kind::error, [] { safetensors_of(R"({"":{"dtype":"F64","shape":[0],"data_offsets":[0,0]}})"); }, {"m.safetensors: a tensor has an empty name"}},
      {"K18", "checkpoints", "a tensor named __metadata__", Kind::error, [] { save_tensors(at("m.npz"), std::map<std::string, xt::xarray<double>>{{"__metadata__", z({1})}}); }, {"m.npz: the name '__metadata__' is reserved for the metadata, not a tensor"}},
      {"K19", "checkpoints", "a safetensors name or metadata string that is not UTF-8", Kind::error, [] { save_tensors(at("m.safetensors"), std::map<std::string, xt::xarray<double>>{{"\xff", z({1})}}); }, {"m.safetensors: a tensor name or a metadata string is not valid UTF-8"}},
      {"K20", "checkpoints", "a file name that is neither .safetensors nor .npz", Kind::error, [] { load_tensors<double>(at("m.ckpt")); }, {"m.ckpt: unknown checkpoint type: the name must end in .safetensors or .npz"}},
      {"K21", "checkpoints", "an .npz shorter than a zip end record", Kind::error, [] { parse_checkpoint("PK", CheckpointFormat::npz, "m.npz"); }, {"m.npz: too short for a zip archive (.npz) (2 bytes"}},
      {"K22", "checkpoints", "an .npz that libzip cannot open (not zip, truncated)", Kind::error, [] { npz_of([](const std::string&) { return std::string(64, 'x'); }); }, {"m.npz: not a readable zip archive (.npz): Not a zip archive"}},
      {"K41", "checkpoints", "an .npz with a member name twice", Kind::error, [] { parse_checkpoint(edited(checkpoint_bytes(std::map<std::string, xt::xarray<double>>{{"a", {1.0}}, {"b", {1.0}}}, {}, CheckpointFormat::npz, "m.npz"), "b.npy", "a.npy"), CheckpointFormat::npz, "m.npz"); }, {"m.npz: tensor 'a' (a.npy) appears twice"}},
      {"K42", "checkpoints", "an .npz whose members together declare more than xgrad reads", Kind::error, [] { parse_checkpoint(test::zip_declaring({1000000000, 1000000000, 1000000000}, 1000000), CheckpointFormat::npz, "m.npz"); }, {"m.npz: its 3 members declare 3000000000 bytes in all, more than the 2247495936 xgrad reads from one archive"}},
      {"K23", "checkpoints", "an .npz member that is not NAME.npy", Kind::error, [] { npz_of([](std::string b) { return edited(b, "a.npy", "a.txt"); }); }, {"m.npz: member 'a.txt': is not NAME.npy"}},
      {"K24", "checkpoints", "an .npz member compressed other than stored or deflated, or encrypted", Kind::error, [] { npz_of([](std::string b) { for (const auto& [sig, at] : {std::pair{std::string("PK\x03\x04"), 8}, std::pair{std::string("PK\x01\x02"), 10}}) { for (std::size_t i = 0; (i = b.find(sig, i)) != std::string::npos; i += 4) b[i + at] = 12; } return b; }); }, {"m.npz: tensor 'a' (a.npy): is compressed with zip method 12; xgrad reads stored and deflated members"}},
      {"K25", "checkpoints", "an .npz member whose declared size does not fit the archive", Kind::error, [] { npz_of([](std::string b) { return edited(b, npy_sizes(), npy_sizes().substr(0, 4) + std::string("\x00\x00\x00\x10", 4)); }); }, {"m.npz: tensor 'a' (a.npy): declares 268435456 bytes (136 compressed) in an archive of"}},
      {"K26", "checkpoints", "an .npz member whose data is corrupt (CRC)", Kind::error, [] { npz_of([](std::string b) { b[b.find('\n', b.find("'shape': (1,), }")) + 1] ^= 1; return b; }); }, {"m.npz: tensor 'a' (a.npy): cannot read it: CRC error"}},
      {"K27", "checkpoints", "an .npz member that is no valid .npy (any N rule)", Kind::error, [] { read_checkpoint(fixture_copy("bad_dtype.npz")); }, {"bad_dtype.npz: tensor 'a' (a.npy): dtype '<i8' is not supported"}},
      {"K28", "checkpoints", "an .npz __metadata__.json that is not an object of strings", Kind::error, [] { read_checkpoint(fixture_copy("bad_metadata.npz")); }, {"bad_metadata.npz: member '__metadata__.json': the value of \"k\" is number; metadata maps strings to strings"}},
      {"K29", "checkpoints", "an .npz tensor name with a NUL byte", Kind::error, [] { save_tensors(at("m.npz"), std::map<std::string, xt::xarray<double>>{{std::string("a\0b", 3), z({1})}}); }, {"m.npz: tensor name holds a NUL byte"}},
      {"K30", "checkpoints", "a float64 value that float32 cannot hold exactly, loaded as float32", Kind::error, [] { save_tensors(at("p.safetensors"), std::map<std::string, xt::xarray<double>>{{"w", {0.5, 0.1}}}); load_tensors<float>(at("p.safetensors")); }, {"p.safetensors: tensor 'w': the float64 value 0.10000000000000001 at [1] has no exact float32 value"}},
      {"K31", "checkpoints", "load_parameters: no tensor for a parameter", Kind::error, [] { load_params_from({{"w", z({2, 3})}, {"b", z({2})}}); }, {"p.safetensors: no tensor 's' for parameter 's' (node 2, ())"}},
      {"K32", "checkpoints", "load_parameters: a tensor that is no parameter", Kind::error, [] { load_params_from({{"w", z({2, 3})}, {"b", z({2})}, {"s", xt::xarray<double>(1.0)}, {"x", z({1})}}); }, {"p.safetensors: tensor 'x' (1,) is no parameter of the graph (3 parameters)"}},
      {"K33", "checkpoints", "load_parameters: a tensor of another shape than its parameter", Kind::error, [] { load_params_from({{"w", z({3, 2})}, {"b", z({2})}, {"s", xt::xarray<double>(1.0)}}); }, {"p.safetensors: tensor 'w' is (3, 2), parameter 'w' (node 0) is (2, 3)"}},
      {"K34", "checkpoints", "two parameters of one name", Kind::error, [] { Params p; p.g.parameter("w", z({1})); save_parameters(p.g, at("p.safetensors")); }, {"p.safetensors: parameters node 0 and node 3 are both named 'w'; a checkpoint names each parameter once"}},
      {"K35", "checkpoints", "a parameter without a name", Kind::error, [] { Params p; p.g.parameter("", z({1})); load_parameters(p.g, at("p.safetensors")); }, {"p.safetensors: parameter node 3 (1,) has no name; a checkpoint stores parameters by name"}},
      {"K36", "checkpoints", "a save whose temporary file cannot be created", Kind::error, [] { save_tensors(at("no/such/dir/m.npz"), std::map<std::string, xt::xarray<double>>{}); }, {"no/such/dir/m.npz: cannot create a temporary file in its directory: No such file or directory"}},
      {"K37", "checkpoints", "a save whose write fails (the old file stays)", Kind::error, [] { FileSizeLimit limit(16); save_tensors(at("fsize.safetensors"), std::map<std::string, xt::xarray<double>>{{"a", z({8})}}); }, {"fsize.safetensors: cannot write it: File too large"}},
      {"K38", "checkpoints", "a save over something that is not a regular file", Kind::error, [] { fs::create_directories(at("dir.npz")); save_tensors(at("dir.npz"), std::map<std::string, xt::xarray<double>>{}); }, {"dir.npz: exists and is a directory; refusing to replace it"}},
      {"K39", "checkpoints", "a save through a symbolic link to nothing", Kind::error, [] { fs::remove(at("dangling.npz")); fs::create_symlink("nowhere.npz", at("dangling.npz")); save_tensors(at("dangling.npz"), std::map<std::string, xt::xarray<double>>{}); }, {"dangling.npz: is a symbolic link to nothing; refusing to write through it"}},
      {"K40", "checkpoints", "safetensors __metadata__ that is not an object", Kind::error, [] { safetensors_of(R"({"__metadata__":[]})"); }, {"m.safetensors: header: __metadata__: expected an object of strings, got array"}},
      {"T27", "xgrad", "params without a file", Kind::usage, [] { run_cli(tool::params_command, {}); }, {"missing FILE (a .safetensors or .npz checkpoint)"}},
      // ONNX export.
      {"E01", "ONNX export", "a graph that names no output or gradient", Kind::error, [] { Graph<double> g; g.input("x", {{1.0}}); to_onnx_bytes(g); }, {"to_onnx: the graph names no output or gradient (Graph::set_output, Graph::set_grad): nothing to export"}},
      {"E02", "ONNX export", "an op without an ONNX lowering", Kind::error, [] { Graph<double> g; g.set_output("y", g.apply(std::make_shared<test::NoLoweringOp>(), {g.input("x", {{1.0}})})); to_onnx(g, at("never.onnx")); }, {"to_onnx: node 1 (frobnicate): has no ONNX lowering"}},
      {"E03", "ONNX export", "two leaves of one name", Kind::error, [] { Graph<double> g; const auto x = g.input("x", {{1.0}}); g.set_output("y", add(x, g.parameter("x", matrix<double>({{2.0}})))); to_onnx_bytes(g); }, {"to_onnx: nodes 0 and 1 are both leaves named 'x': ONNX names each graph input and initializer once"}},
      {"E04", "ONNX export", "an output named as a leaf", Kind::error, [] { Graph<double> g; const auto x = g.input("x", {{1.0}}); g.set_output("x", neg(x)); to_onnx_bytes(g); }, {"to_onnx: the output 'x' has the name of leaf node 0: ONNX names each value once"}},
      {"E05", "ONNX export", "a gradient and an output named grad_<its name>", Kind::error, [] { Graph<double> g; const auto x = g.input("x", {{1.0}}); const auto y = neg(x); g.set_output("grad_x", y); g.set_grad("x", grad(y, {x})[0]); to_onnx_bytes(g); }, {"to_onnx: the gradient 'x' and the output 'grad_x' would share one ONNX name"}},
      {"E06", "ONNX export", "a leaf without a name", Kind::error, [] { Graph<double> g; g.set_output("y", neg(g.input("", {{1.0}}))); to_onnx_bytes(g); }, {"to_onnx: leaf node 0 (input) has no name"}},
      {"E07", "ONNX export", "a lean graph (values released)", Kind::error, [] { Graph<double> g; const auto y = neg(neg(g.input("x", {{1.0}}))); g.set_output("y", y); g.keep_only({}); g.replay(); to_onnx_bytes(g); }, {"to_onnx: ", "released"}},
      {"E08", "ONNX export", "a model over the size limit", Kind::error, [] { Graph<double> g; g.set_output("y", neg(g.input("x", {{1.0}}))); OnnxExportOptions o; o.max_bytes = 64; to_onnx_bytes(g, o); }, {"to_onnx: the model would be", "bytes, over the limit of 64 (protobuf's is 2 GiB; xgrad writes no external data)"}},
      {"E09", "ONNX export", "a lowering that gives another number of values than outputs", Kind::error, [] { Graph<double> g; g.set_output("y", g.apply(std::make_shared<test::NoLoweringOp>(true), {g.input("x", {{1.0}})})); to_onnx_bytes(g); }, {"to_onnx: node 1 (two_names): its lowering gave 2 values for 1 outputs"}},
      {"T31", "xgrad", "onnx without a graph file", Kind::usage, [] { run_cli(tool::onnx_command, {"-o", at("m.onnx")}); }, {"missing GRAPH.json"}},
      {"T32", "xgrad", "onnx without -o", Kind::usage, [] { run_cli(tool::onnx_command, {at("g.json")}); }, {"missing -o MODEL.onnx"}},
      {"T33", "xgrad", "export --format onnx to standard output", Kind::usage, [] { run_cli(tool::export_command, {"--shape", "1,1,1,1", "--format", "onnx"}); }, {"--format onnx needs -o FILE: an ONNX model is binary"}},
      // The xgrad tool (exit status 2).
      {"T01", "xgrad", "an unknown option", Kind::usage, [] { run_cli(tool::attention_command, {"--frob"}); }, {"unknown option '--frob'"}},
      {"T02", "xgrad", "an option given twice", Kind::usage, [] { run_cli(tool::example_command, {"--dtype", "float32", "--dtype", "float64"}); }, {"option --dtype given twice"}},
      {"T03", "xgrad", "an option without its value", Kind::usage, [] { run_cli(tool::export_command, {"--shape"}); }, {"option --shape needs a value"}},
      {"T04", "xgrad", "a value not among the choices", Kind::usage, [] { run_cli(tool::export_command, {"--shape", "1,1,1,1", "--format", "svg"}); }, {"--format must be json|dot|onnx, not 'svg'"}},
      {"T05", "xgrad", "a missing input", Kind::usage, [] { run_cli(tool::attention_command, {"--q", "q.json"}); }, {"missing --k"}},
      {"T06", "xgrad", "both files and --shape", Kind::usage, [] { run_cli(tool::gradcheck_command, {"--shape", "1,1,1,1", "--q", "q.json"}); }, {"either --q --k --v or --shape"}},
      {"T07", "xgrad", "a --shape that is not four integers", Kind::usage, [] { run_cli(tool::gradcheck_command, {"--shape", "1,2"}); }, {"--shape needs TQ,TK,DK,DV", "'1,2'"}},
      {"T08", "xgrad", "a --shape axis above 65536", Kind::usage, [] { run_cli(tool::gradcheck_command, {"--shape", "1,70000,1,1"}); }, {"--shape needs an integer from 0 to 65536, not '70000'"}},
      {"T09", "xgrad", "score arrays of more than 2^26 elements", Kind::error, [] { run_cli(tool::gradcheck_command, {"--shape", "10000,10000,1,1"}); }, {"--shape 10000,10000,1,1: attention would build (10000, 10000) score arrays"}},
      {"T10", "xgrad", "an attention error on file inputs names the files", Kind::error, [] { run_cli(tool::attention_command, {"--q", at("q.json"), "--k", at("k3.json"), "--v", at("v.json")}); }, {"q.json, ", "k3.json, ", "v.json: attention: d_k differs"}},
      {"T11", "xgrad", "inputs of different dtypes", Kind::error, [] { write_npy(at("q32.npy"), xt::xarray<float>(xt::zeros<float>({2, 1}))); run_cli(tool::attention_command, {"--q", at("q32.npy"), "--k", at("k.json"), "--v", at("v.json")}); }, {"k.json: is float64 but the inputs before it are float32"}},
      {"T12", "xgrad", "a value outside float32's range", Kind::error, [] { run_cli(tool::attention_command, {"--q", at("big.json"), "--k", at("k.json"), "--v", at("v.json"), "--dtype", "float32"}); }, {"big.json: the value", "at [0, 0] is outside the range of float32"}},
      {"T13", "xgrad", "a grad-output of another shape than the output", Kind::error, [] { run_cli(tool::attention_command, {"--q", at("q.json"), "--k", at("k.json"), "--v", at("v.json"), "--grad-output", at("k3.json")}); }, {"k3.json: grad: grad_out is (1, 3)", "is (2, 2)"}},
      {"T14", "xgrad", "an output over an input file", Kind::error, [] { run_cli(tool::export_command, {"--q", at("q.json"), "--k", at("k.json"), "--v", at("v.json"), "-o", at("q.json")}); }, {"q.json: is the input", "q.json; refusing to write over it"}},
      {"T15", "xgrad", "an output that cannot be written", Kind::error, [] { run_cli(tool::export_command, {"--shape", "1,1,1,1", "-o", at("no/such/dir/g.json")}); }, {"no/such/dir/g.json: its directory", "no/such/dir does not exist"}},
      {"T16", "xgrad", "--values with --format dot", Kind::usage, [] { run_cli(tool::export_command, {"--shape", "1,1,1,1", "--format", "dot", "--values", "all"}); }, {"--values applies to --format json only"}},
      {"T17", "xgrad", "replay without a file", Kind::usage, [] { run_cli(tool::replay_command, {}); }, {"missing GRAPH.json"}},
      {"T18", "xgrad", "replay of a file that is no graph", Kind::error, [] { run_cli(tool::replay_command, {at("v.json")}); }, {"v.json: graph JSON: top level: expected an object, got array"}},
      {"T28", "xgrad", "import: an --input without NAME=", Kind::usage, [] { run_cli(tool::import_command, {at("m.onnx"), "--input", "x", "-o", at("g.json")}); }, {"--input needs NAME=FILE, not 'x'"}},
      {"T29", "xgrad", "import without -o", Kind::usage, [] { run_cli(tool::import_command, {at("m.onnx")}); }, {"missing -o GRAPH.json"}},
      {"T30", "xgrad", "export --graph with attention inputs", Kind::usage, [] { run_cli(tool::export_command, {"--graph", at("g.json"), "--shape", "1,1,1,1"}); }, {"--graph takes no --shape: the graph's file says it all"}},
      {"X01", "ONNX import", "not a protobuf ModelProto (truncated, malformed)", Kind::error, [] { import_onnx_bytes<float>("garbage", "m.onnx"); }, {"m.onnx: not an ONNX model (the protobuf does not parse: truncated or malformed)"}},
      {"X02", "ONNX import", "a model without a graph", Kind::error, [] { onnx::ModelProto m; m.set_ir_version(8); import_model(m); }, {"m.onnx: the model has no graph"}},
      {"X03", "ONNX import", "no opset of the default domain", Kind::error, [] { auto m = unary_model("Relu"); m.mutable_opset_import(0)->set_domain("com.example"); import_model(m); }, {"m.onnx: the model imports no opset of the default domain (ai.onnx)"}},
      {"X04", "ONNX import", "an opset newer than 17", Kind::error, [] { import_model(unary_model("Relu", 18)); }, {"m.onnx: opset 18 of the default domain is not supported (1 to 17)"}},
      {"X05", "ONNX import", "an op the importer does not map", Kind::error, [] { import_model(unary_model("Conv", 13)); }, {"m.onnx: node 0 'the_node' (Conv, domain ai.onnx, opset 13): op not supported"}},
      {"X06", "ONNX import", "an op of another domain", Kind::error, [] { auto m = unary_model("Relu"); m.mutable_graph()->mutable_node(0)->set_domain("com.microsoft"); import_model(m); }, {"node 0 'the_node' (Relu, domain com.microsoft, opset 17): domain not supported (only the default ONNX domain, ai.onnx)"}},
      {"X07", "ONNX import", "a graph input of an unsupported element type", Kind::error, [] { import_model(unary_model("Relu", 17, onnx::TensorProto::STRING)); }, {"m.onnx: graph input 'x': element type STRING is not supported"}},
      {"X08", "ONNX import", "a graph input of no fixed shape and no value given", Kind::error, [] { import_model(unary_model("Relu", 17, f32, {-1, 3})); }, {"graph input 'x': dimension 0 'batch' is not fixed; give its value (xgrad import --input x=FILE)"}},
      {"X09", "ONNX import", "a value given of another shape than the model declares", Kind::error, [] { OnnxImportOptions o; o.inputs["x"] = floats(xt::zeros<double>({2})); import_model(unary_model("Relu"), o); }, {"graph input 'x': the value given has shape (2,), the model declares (3,)"}},
      {"X10", "ONNX import", "a value given for no graph input", Kind::error, [] { OnnxImportOptions o; o.inputs["q"] = floats(xt::zeros<double>({3})); import_model(unary_model("Relu"), o); }, {"m.onnx: input 'q' given, but the model has no graph input of that name (it has x)"}},
      {"X11", "ONNX import", "a shape computed at run time", Kind::error, [] { import_model(test::onnx_model("Reshape", {{"x", f32, {3}}, {"s", f32, {1}}}, {"x", "s"})); }, {"(Reshape, domain ai.onnx, opset 17): input 1 's' must be known at import (a shape, axes, indices or a condition), but it is computed at run time (from graph inputs or parameters)"}},
      {"X12", "ONNX import", "an integer graph input in a float computation", Kind::error, [] { import_model(unary_model("Relu", 17, onnx::TensorProto::INT64)); }, {"(Relu, domain ai.onnx, opset 17): input 0 'x' is computed from the integer graph input 'x', which xgrad reads only as Gather's indices or as shapes"}},
      {"X13", "ONNX import", "an output that is not float", Kind::error, [] { import_model(unary_model("Shape")); }, {"m.onnx: graph output 'y' is int64: an xgrad graph computes float values only"}},
      {"X14", "ONNX import", "a float cast to the other float type at run time", Kind::error, [] { auto m = unary_model("Cast", 17, onnx::TensorProto::DOUBLE); auto* a = m.mutable_graph()->mutable_node(0)->add_attribute(); a->set_name("to"); a->set_type(onnx::AttributeProto::INT); a->set_i(f32); import_onnx_bytes<double>(m.SerializeAsString(), "m.onnx"); }, {"(Cast, domain ai.onnx, opset 17): cast of a float64 value computed at run time to float32 (an xgrad graph has one float type)"}},
      {"X15", "ONNX import", "a Pow exponent that is not finite", Kind::error, [] { auto m = test::onnx_model("Pow", {{"x", f32, {3}}}, {"x", "p"}); test::add_initializer(m, "p", {std::numeric_limits<float>::infinity()}); import_model(m); }, {"(Pow, domain ai.onnx, opset 17): exponent inf is not supported (a finite number)"}},
      {"X16", "ONNX import", "a Reshape to another element count", Kind::error, [] { auto m = test::onnx_model("Reshape", {{"x", f32, {6}}}, {"x", "s"}); test::add_int64_initializer(m, "s", {4}); import_model(m); }, {"(Reshape, domain ai.onnx, opset 17): cannot reshape (6,) (6 elements) to [4]"}},
      {"X17", "ONNX import", "an input no earlier node produces", Kind::error, [] { import_model(test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "nope"})); }, {"node 0 'the_node' (Add, domain ai.onnx, opset 17): input 1 'nope' is produced by no earlier node, initializer or graph input"}},
      {"X18", "ONNX import", "a graph output no node produces", Kind::error, [] { auto m = unary_model("Relu"); m.mutable_graph()->mutable_output(0)->set_name("z"); import_model(m); }, {"m.onnx: graph output 'z' is produced by no node (truncated model?)"}},
      {"X19", "ONNX import", "tensor data of another size than its shape", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::add_initializer(m, "w", {1, 2, 3}).mutable_raw_data()->resize(8); import_model(m); }, {"m.onnx: initializer 'w': shape (3,) of float32 needs 12 bytes of data, the tensor has 8"}},
      {"X20", "ONNX import", "a tensor of more than 2^28 elements", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); auto& t = test::add_initializer(m, "w", {}); t.clear_dims(); t.add_dims(1 << 20); t.add_dims(1 << 10); import_model(m); }, {"m.onnx: initializer 'w': shape (1048576, 1024) has more than 268435456 elements"}},
      {"X21", "ONNX import", "nodes beyond the work limit (each charged before it runs)", Kind::error, [] { OnnxImportOptions o; o.max_work = 100; import_model(test::onnx_model("MatMul", {{"a", f32, {8, 8}}, {"b", f32, {8, 8}}}, {"a", "b"}), o); }, {"(MatMul, domain ai.onnx, opset 17): matmul (node 2): computing the graph takes more than 100 element visits (Op::work)", "; raise it with OnnxImportOptions::max_work (xgrad import --max-work N)"}},
      {"X22", "ONNX import", "external data outside the model's directory", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::make_external(test::add_initializer(m, "w", {1, 2, 3}), "../w.bin"); test::write_model(m, at("ext.onnx")); import_onnx<float>(at("ext.onnx")); }, {"ext.onnx: initializer 'w': external data location '../w.bin' leaves the model's directory"}},
      {"X23", "ONNX import", "external data at an absolute path", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::make_external(test::add_initializer(m, "w", {1, 2, 3}), "/etc/w.bin"); test::write_model(m, at("ext.onnx")); import_onnx<float>(at("ext.onnx")); }, {"ext.onnx: initializer 'w': external data location '/etc/w.bin' is not a relative path beside the model"}},
      {"X24", "ONNX import", "external data in a model read from bytes", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::make_external(test::add_initializer(m, "w", {1, 2, 3}), "w.bin"); import_model(m); }, {"m.onnx: initializer 'w': external data is not allowed here"}},
      {"X29", "ONNX import", "external data through a symbolic link out of the model's directory", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::make_external(test::add_initializer(m, "w", {1, 2, 3}), "link.bin"); fs::remove(at("link.bin")); fs::create_symlink("/etc/hostname", at("link.bin")); test::write_model(m, at("ext.onnx")); import_onnx<float>(at("ext.onnx")); }, {"ext.onnx: initializer 'w': external data location 'link.bin': a symbolic link on the way leads out of the model's directory"}},
      {"X30", "ONNX import", "external data of another length than the tensor", Kind::error, [] { auto m = test::onnx_model("Add", {{"x", f32, {3}}}, {"x", "w"}); test::make_external(test::add_initializer(m, "w", {1, 2, 3}), "v.json"); test::write_model(m, at("ext.onnx")); import_onnx<float>(at("ext.onnx")); }, {"ext.onnx: initializer 'w': external data location 'v.json': shape (3,) of float32 needs 12 bytes of data, the external data range 0+16 has 16"}},
      {"X31", "ONNX import", "values computed at import beyond the work limit", Kind::error, [] { auto m = test::empty_model({}); test::add_int64_constant(m, "s", {100, 100}); test::add_node(m, "ConstantOfShape", {"s"}, {"c"}); test::add_node(m, "Add", {"c", "c"}, {"y"}); OnnxImportOptions o; o.max_work = 20000; import_model(m, o); }, {"m.onnx: node 2 '' (Add, domain ai.onnx, opset 17): computing the graph takes more than 20000 element visits (Op::work)", "this Add computed at import 20000"}},
      {"X26", "ONNX import", "a name that is not UTF-8", Kind::error, [] { auto m = unary_model("Relu"); m.mutable_graph()->mutable_input(0)->set_name("\xa9"); m.mutable_graph()->mutable_node(0)->set_input(0, "\xa9"); import_model(m); }, {"m.onnx: a graph input has a name that is not valid UTF-8"}},
      {"X27", "ONNX import", "a loss's target of another shape than the input needs", Kind::error, [] { import_model(test::onnx_model("NegativeLogLikelihoodLoss", {{"x", f32, {2, 3}}, {"t", onnx::TensorProto::INT64, {3}}}, {"x", "t"})); }, {"(NegativeLogLikelihoodLoss, domain ai.onnx, opset 17): target has shape (3,), the input (2, 3) needs (2,)"}},
      {"X28", "ONNX import", "a loss's reduction that is not mean, sum or none", Kind::error, [] { auto m = test::onnx_model("NegativeLogLikelihoodLoss", {{"x", f32, {2, 3}}, {"t", onnx::TensorProto::INT64, {2}}}, {"x", "t"}); auto* a = m.mutable_graph()->mutable_node(0)->add_attribute(); a->set_name("reduction"); a->set_type(onnx::AttributeProto::STRING); a->set_s("max"); import_model(m); }, {"reduction 'max' is not one of mean, sum, none"}},
      {"X25", "ONNX import", "Dropout in training mode", Kind::error, [] { auto m = test::onnx_model("Dropout", {{"x", f32, {3}}}, {"x", "", "t"}); auto* t = m.mutable_graph()->add_initializer(); t->set_name("t"); t->set_data_type(onnx::TensorProto::BOOL); t->add_int32_data(1); import_model(m); }, {"(Dropout, domain ai.onnx, opset 17): training mode is not supported (xgrad's dropout draws other masks than ONNX's)"}},
  };
}

// Provokes the row's error; returns its message after checking the type.
std::string message_of(const Row& r) {
  try {
    r.provoke();
  } catch (const xgrad::error& e) {
    BOOST_TEST((r.kind == Kind::error), r.id << " threw xgrad::error, expected a usage error");
    return e.what();
  } catch (const tool::usage_error& e) {
    BOOST_TEST((r.kind == Kind::usage), r.id << " threw a usage error, expected xgrad::error");
    return e.what();
  }
  BOOST_ERROR(r.id << ": nothing was thrown");
  return "";
}

// The row of docs/errors.md: scratch paths made relative, pipes escaped for the table.
std::string doc_row(const Row& r, std::string message) {
  for (std::size_t at; (at = message.find(scratch().string() + "/")) != std::string::npos;) {
    message.erase(at, scratch().string().size() + 1);
  }
  for (std::size_t at = 0; (at = message.find('|', at)) != std::string::npos; at += 2) message.insert(at, "\\");
  return std::string("| ") + r.id + " | " + r.area + " | " + r.rule + " | " +
         (r.kind == Kind::error ? "error" : "usage") + " | `" + message + "` |";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(errors)

BOOST_DATA_TEST_CASE(each_rule_has_its_error, boost::unit_test::data::make(rows()), row) {
  const std::string message = message_of(row);
  for (const auto& name : row.names) {
    BOOST_TEST(message.find(name) != std::string::npos, row.id << ": \"" << message << "\" lacks \"" << name << "\"");
  }
  if (std::getenv("XGRAD_PRINT_ERRORS")) std::cout << doc_row(row, message) << "\n";
}

BOOST_AUTO_TEST_CASE(docs_errors_md_lists_every_rule_with_its_message) {
  std::ifstream in(XGRAD_DOCS "/errors.md");
  std::ostringstream doc;
  doc << in.rdbuf();
  std::size_t listed = 0;
  for (const Row& r : rows()) {
    const std::string line = doc_row(r, message_of(r));
    BOOST_TEST(doc.str().find(line) != std::string::npos, "docs/errors.md lacks or differs from:\n" << line);
    ++listed;
  }
  BOOST_TEST(listed >= 80u);
}

BOOST_AUTO_TEST_SUITE_END()
