// ONNX import (lib/onnx_import.hpp): models PyTorch exported (tests/data/onnx, made by
// make_onnx_fixtures.py) against PyTorch's outputs and gradients, the saturation diagnostics on
// an imported graph, `xgrad import`, external data and bad files. ONNX's own node tests run as
// ctest entry onnx_node_tests (tests/onnx/node_tests.cpp).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include <xtensor/xadapt.hpp>

#include <nlohmann/json.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xview.hpp>

#include <xgrad/lib/onnx/reader.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

#include "../check.hpp"
#include "../tools/sandbox.hpp"
#include "onnx_models.hpp"

using namespace xgrad;
namespace fs = std::filesystem;

namespace {

const std::string fixtures = std::string(XGRAD_TEST_DATA) + "/onnx/";

// max |a - b| <= rtol * max |b|: relative to the array's scale (elements near 0 compare absolutely).
template <class T>
void check_close(const xt::xarray<T>& a, const xt::xarray<double>& b, double rtol, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE((shape_of(a) == shape_of(b)));
    double scale = 0, worst = 0;
    for (std::size_t i = 0; i < b.size(); ++i) {
      scale = std::max(scale, std::fabs(b.data()[i]));
      worst = std::max(worst, std::fabs(static_cast<double>(a.data()[i]) - b.data()[i]));
    }
    BOOST_TEST(worst <= rtol * scale, "max |xgrad - pytorch| = " << worst << ", scale " << scale);
  }
}

xt::xarray<double> fixture_array(const std::string& dir, const std::string& name) {
  return read_npy(fixtures + dir + "/" + name + ".npy").values;
}

// The leaf named `name` (an input, or the index leaf of an integer input).
template <class T>
Var<T> leaf_named(Graph<T>& g, const std::string& name) {
  for (std::size_t id = 0; id < g.size(); ++id) {
    if (g.node(id).is_leaf() && g.node(id).name == name) return g.var(id);
  }
  BOOST_FAIL("no leaf named " << name);
  return {};
}

template <class T>
void check_fixture(const std::string& model, int opset, double rtol) {
  const std::string dtype = sizeof(T) == 4 ? "float32" : "float64";
  const std::string dir = model + "_opset" + std::to_string(opset) + "_" + dtype;
  OnnxImportOptions options;
  options.gradients = true;
  const bool gpt = model == "gpt";
  const std::string input = gpt ? "idx" : "x";
  OnnxTensor in;
  if (gpt) {
    in.dtype = "int64";
    in.ints = read_npy_integers(fixtures + dir + "/input_idx.npy");
  } else {
    in.dtype = dtype;
    in.real = fixture_array(dir, "input_x");
  }
  options.inputs[input] = in;
  const auto g = import_onnx<T>(fixtures + dir + ".onnx", options);
  const std::string output = gpt ? "logp" : "y";
  check_close(g->var(g->outputs().at(output)).value(), fixture_array(dir, "output_" + output), rtol, dir + " " + output);
  if (!gpt) check_close(g->var(g->grads().at("x")).value(), fixture_array(dir, "grad_input_x"), rtol, dir + " grad x");

  // Every initializer's gradient against its PyTorch parameter's, through mapping.json.
  std::ifstream mf(fixtures + dir + "/mapping.json");
  const nlohmann::json mapping = nlohmann::json::parse(mf);
  std::set<std::string> checked;
  for (const auto& [name, m] : mapping["initializers"].items()) {
    if (!g->grads().count(name)) continue;  // read at import (the causal mask): no parameter
    const xt::xarray<T> grad = g->var(g->grads().at(name)).value();
    if (!m["parameter"].is_null()) {
      const std::string p = m["parameter"];
      const xt::xarray<double> want = fixture_array(dir, "grad_param_" + p);
      if (m["transform"] == "transposed") check_close(xt::xarray<T>(xt::transpose(grad)), want, rtol, dir + " " + p);
      else check_close(grad, want, rtol, dir + " " + p);
      checked.insert(p);
    } else if (m.contains("derived")) {
      // A constant the exporter folded from rows of a parameter ("wpe.weight[:6]").
      const std::string d = m["derived"][0];
      const std::size_t open = d.find("[:");
      BOOST_REQUIRE(open != std::string::npos);
      const std::string p = d.substr(0, open);
      const auto rows = static_cast<std::size_t>(std::stoul(d.substr(open + 2)));
      const xt::xarray<double> full = fixture_array(dir, "grad_param_" + p);
      check_close(grad, xt::xarray<double>(xt::view(full, xt::range(0, rows))), rtol, dir + " " + d);
      checked.insert(p);
    }
  }
  for (const auto& p : mapping["parameters_unmapped"]) BOOST_TEST(checked.count(p.get<std::string>()), dir << ": " << p << " not checked");
  std::size_t parameters = 0;  // PyTorch's, one gradient file each
  for (const auto& e : fs::directory_iterator(fixtures + dir)) parameters += e.path().filename().string().rfind("grad_param_", 0) == 0;
  BOOST_TEST(checked.size() == parameters, dir);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(onnx_import)

BOOST_AUTO_TEST_CASE(pytorch_exports_match_pytorch_outputs_and_gradients) {
  for (const std::string model : {"encoder", "gpt"}) {
    for (const int opset : {14, 17}) {
      check_fixture<float>(model, opset, 1e-5);
      check_fixture<double>(model, opset, 1e-10);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_pytorch_block_of_attention_variants_matches_pytorch) {
  // make_variant_block_fixture.py (issue 31): RMSNorm, grouped-query attention
  // (repeat_interleave), QK-norm, rotary embeddings, a tanh soft-cap, a causal sliding window and
  // a SiLU-gated MLP, at opsets 14 and 17 in float64: output and input gradient.
  for (const char* dir : {"variant_block_opset14_float64", "variant_block_opset17_float64"}) {
    OnnxImportOptions o;
    o.inputs["x"] = {"float64", fixture_array(dir, "input_x"), {}};
    o.gradients = true;
    const auto g = import_onnx<double>(fixtures + dir + ".onnx", o);
    check_close(g->var(g->outputs().at("y")).value(), fixture_array(dir, "output_y"), 1e-12, std::string(dir) + " y");
    check_close(g->var(g->grads().at("x")).value(), fixture_array(dir, "grad_input_x"), 1e-12, std::string(dir) + " grad x");
  }
}

BOOST_AUTO_TEST_CASE(a_padding_mask_given_at_run_time_matches_pytorch) {
  // torch.nn.TransformerEncoder (2 layers) with src_key_padding_mask, a bool graph input
  // (make_padded_fixture.py): the output and the input's gradient, then the mask replaced.
  const std::string dir = "encoder_padded_opset17_float32";
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", fixture_array(dir, "input_x"), {}};
  o.inputs["pad"] = {"bool", {}, read_npy_integers(fixtures + dir + "/input_pad.npy")};
  o.gradients = true;
  const auto g = import_onnx<float>(fixtures + dir + ".onnx", o);
  check_close(g->var(g->outputs().at("y")).value(), fixture_array(dir, "output_y"), 1e-5, dir + " y");
  check_close(g->var(g->grads().at("x")).value(), fixture_array(dir, "grad_input_x"), 1e-5, dir + " grad x");
  BOOST_TEST(g->grads().count("pad") == 0u);
  // Without padding the second sequence's first three outputs change.
  const Var<float> pad = leaf_named(*g, "pad");
  const xt::xarray<float> padded = g->var(g->outputs().at("y")).value();
  BOOST_TEST(pad.node().mask_leaf);  // issue 36: a bool graph input is a mask leaf
  g->set_value(pad, xt::xarray<bool>(xt::zeros<bool>({2, 5})));
  g->replay();
  const xt::xarray<float> unpadded = g->var(g->outputs().at("y")).value();
  BOOST_TEST(unpadded(0, 0, 0) == padded(0, 0, 0));  // the first sequence had no padding
  BOOST_TEST(unpadded(1, 0, 0) != padded(1, 0, 0));
}

BOOST_AUTO_TEST_CASE(softmax_diagnostics_read_the_imported_attention) {
  OnnxImportOptions options;
  options.inputs["idx"] = {"int64", {}, read_npy_integers(fixtures + "gpt_opset17_float64/input_idx.npy")};
  options.gradients = true;
  const auto g = import_onnx<double>(fixtures + "gpt_opset17_float64.onnx", options);
  std::vector<SoftmaxDiagnostics> d;
  for (const auto& s : softmax_diagnostics(*g)) {
    if (!g->node(s.node).in_backward()) d.push_back(s);  // log_softmax's VJP has a softmax of its own
  }
  BOOST_TEST_REQUIRE(d.size() == 2u);  // one attention softmax per block
  for (const auto& s : d) {
    BOOST_TEST(s.n == 6u);                  // T keys
    BOOST_TEST(s.row_count == 2u * 2 * 6);  // B x H x T queries
    BOOST_TEST(s.gradient_gain.has_value());
    // The causal mask: the first query sees one key, its weight 1.
    BOOST_TEST(s.rows.at(0).max_weight == 1.0);
  }
}

BOOST_AUTO_TEST_CASE(index_leaves_take_new_ids_and_replay) {
  const std::string model = fixtures + "gpt_opset14_float64.onnx";
  OnnxImportOptions a, b;
  a.inputs["idx"] = {"int64", {}, xt::xarray<std::int64_t>{{1, 2, 3, 4, 5, 6}, {0, 0, 1, 1, 2, 2}}};
  b.inputs["idx"] = {"int64", {}, xt::xarray<std::int64_t>{{10, 9, 8, 7, 6, 5}, {3, 3, 3, 3, 3, 3}}};
  const auto ga = import_onnx<double>(model, a), gb = import_onnx<double>(model, b);
  const Var<double> ids = leaf_named(*ga, "idx");
  BOOST_TEST(ids.node().index_leaf);
  ga->set_value(ids, b.inputs["idx"].ints);
  ga->replay();
  const auto ya = ga->var(ga->outputs().at("logp")).value(), yb = gb->var(gb->outputs().at("logp")).value();
  BOOST_TEST((ya == yb));
}

BOOST_AUTO_TEST_CASE(external_data_only_beside_the_model) {
  const fs::path dir = fs::path(XGRAD_TEST_OUTPUT) / "onnx_external";
  fs::create_directories(dir / "sub");
  const std::vector<float> w = {1.5f, -2.0f, 0.25f};
  std::ofstream(dir / "sub" / "w.bin", std::ios::binary).write(reinterpret_cast<const char*>(w.data()), 12);
  const auto model = [&](const std::string& location) {
    onnx::ModelProto m = test::onnx_model("Mul", {{"x", onnx::TensorProto::FLOAT, {3}}}, {"x", "w"});
    test::make_external(test::add_initializer(m, "w", w), location);
    test::write_model(m, (dir / "m.onnx").string());
    return (dir / "m.onnx").string();
  };
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", xt::xarray<double>{2.0, 2.0, 2.0}, {}};
  const auto g = import_onnx<float>(model("sub/w.bin"), o);
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{3.0f, -4.0f, 0.5f}));
  check_error([&] { import_onnx<float>(model("../w.bin"), o); }, {"initializer 'w': external data location '../w.bin' leaves the model's directory"});
  check_error([&] { import_onnx<float>(model("/etc/passwd"), o); }, {"external data location '/etc/passwd' is not a relative path beside the model"});
  check_error([&] { import_onnx<float>(model("sub/missing.bin"), o); }, {"missing.bin"});
}

BOOST_AUTO_TEST_CASE(cli_import_then_replay_and_inspect) {
  test::Sandbox box;
  const std::string dir = fixtures + "gpt_opset17_float32";
  const test::Run r = box.xgrad("import '" + dir + ".onnx' --input idx='" + dir + "/input_idx.npy' --grad -o g.json");
  BOOST_TEST_REQUIRE(r.rc == 0, r.err);
  const auto j = nlohmann::json::parse(test::read_text(box.dir / "g.json"));
  BOOST_TEST(j["dtype"] == "float32");
  BOOST_TEST(j["outputs"].contains("logp"));
  BOOST_TEST(j["grads"].contains("wte.weight"));
  const test::Run replay = box.xgrad("replay g.json");
  BOOST_TEST(replay.rc == 0, replay.out << replay.err);
  const test::Run dot = box.xgrad("export --graph g.json --format dot -o g.dot");
  BOOST_TEST(dot.rc == 0, dot.err);
  BOOST_TEST(test::read_text(box.dir / "g.dot").rfind("digraph xgrad {", 0) == 0);
  const test::Run again = box.xgrad("export --graph g.json --values inputs -o g2.json");
  BOOST_TEST(again.rc == 0, again.err);
  BOOST_TEST(box.xgrad("replay g2.json").rc == 0);
  const test::Run inspect = box.xgrad("inspect g.json");
  BOOST_TEST(inspect.rc == 0, inspect.err);
  BOOST_TEST(inspect.out.find("softmax") != std::string::npos);
  // float64 on request; a model's declared shape fixed, so no --input needed for the encoder.
  const test::Run f64 = box.xgrad("import '" + fixtures + "encoder_opset14_float32.onnx' --dtype float64 -o e.json");
  BOOST_TEST_REQUIRE(f64.rc == 0, f64.err);
  BOOST_TEST(nlohmann::json::parse(test::read_text(box.dir / "e.json"))["dtype"] == "float64");
}

BOOST_AUTO_TEST_CASE(cli_import_refuses_with_one_line_and_writes_nothing) {
  test::Sandbox box;
  // An unsupported op: the node named.
  test::write_model(test::onnx_model("Conv", {{"x", onnx::TensorProto::FLOAT, {1, 1, 3, 3}}, {"w", onnx::TensorProto::FLOAT, {1, 1, 1, 1}}},
                                     {"x", "w"}, 13),
                    box.path("conv.onnx"));
  const test::Run conv = box.xgrad("import conv.onnx -o g.json");
  BOOST_TEST(conv.rc == 2);
  BOOST_TEST(conv.err == "xgrad import: conv.onnx: node 0 'the_node' (Conv, domain ai.onnx, opset 13): op not supported\n");
  BOOST_TEST(!fs::exists(box.dir / "g.json"));
  // A truncated model.
  const std::string bytes = test::read_text(fixtures + "encoder_opset17_float32.onnx");
  test::write_text(box.dir / "cut.onnx", bytes.substr(0, bytes.size() / 2));
  const test::Run cut = box.xgrad("import cut.onnx -o g.json");
  BOOST_TEST(cut.rc == 2);
  BOOST_TEST(cut.err.find("cut.onnx: not an ONNX model (the protobuf does not parse: truncated or malformed)") != std::string::npos, cut.err);
  BOOST_TEST(!fs::exists(box.dir / "g.json"));
  // Bad usage.
  BOOST_TEST(box.xgrad("import conv.onnx").rc == 2);
  BOOST_TEST(box.xgrad("import conv.onnx --input x -o g.json").rc == 2);
  const test::Run unknown = box.xgrad("import '" + fixtures + "encoder_opset14_float32.onnx' --input nope=q.json -o g.json");
  BOOST_TEST(unknown.rc == 2);
  BOOST_TEST(unknown.err.find("input 'nope' given, but the model has no graph input of that name (it has x)") != std::string::npos, unknown.err);
}

// Imports a model built in code from its bytes, in float32.
std::unique_ptr<Graph<float>> import_built(const onnx::ModelProto& m, const OnnxImportOptions& o = {}) {
  return import_onnx_bytes<float>(m.SerializeAsString(), "m.onnx", o);
}
// A model of an int64 input ids (1, 2) that goes through `op` with the int64 constant `operand`
// before it indexes the table {1, 2, 3}: y = Gather(table, indices), indices = op(ids, operand).
onnx::ModelProto ids_through(const std::string& op, const std::vector<std::int64_t>& operand) {
  auto m = test::empty_model({{"ids", onnx::TensorProto::INT64, {1, 2}}});
  test::add_initializer(m, "table", {1, 2, 3});
  test::add_int64_constant(m, "operand", operand);
  test::add_node(m, op, {"ids", "operand"}, {"indices"});
  test::add_node(m, "Gather", {"table", "indices"}, {"y"});
  return m;
}
float output_at(const Graph<float>& g, std::size_t i) {
  return g.node(g.outputs().at("y").node).value().data()[i];
}

BOOST_AUTO_TEST_CASE(values_read_at_import_are_never_parameters_or_run_time_ids) {
  // An initializer the outputs depend on is a parameter: used as Pow's exponent it is refused,
  // not frozen (its gradient through the exponent would be lost, and training would not move it).
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {3}}});
  test::add_initializer(m, "w", {2.0f});
  test::add_node(m, "Pow", {"x", "w"}, {"p"});
  test::add_node(m, "Mul", {"w", "w"}, {"ww"});
  test::add_node(m, "Add", {"p", "ww"}, {"y"});
  check_error([&] { import_built(m); }, {"(Pow, domain ai.onnx, opset 17): input 1 'w' is a parameter"});
  // Ids computed from an integer graph input (ids + 1) would be frozen at import: refused.
  check_error([&] { import_built(ids_through("Add", {1})); },
              {"(Gather, domain ai.onnx, opset 17): input 1 'indices' (indices) is computed at import from an integer graph input"});
  // A Reshape of the ids (GPT-2's input_ids.view(-1, T)) reads the index leaf in its new shape.
  OnnxImportOptions vo;
  vo.inputs["ids"] = {"int64", {}, xt::xarray<std::int64_t>{{0, 1}}};
  const auto gv = import_built(ids_through("Reshape", {2}), vo);
  BOOST_TEST((gv->var(gv->outputs().at("y")).shape() == Shape{2}));
  const Var<float> leaf = leaf_named(*gv, "ids");
  BOOST_TEST(leaf.node().index_leaf);
  gv->set_value(leaf, xt::xarray<std::int64_t>{{2, 2}});
  gv->replay();
  BOOST_TEST(output_at(*gv, 0) == 3.0f);
  BOOST_TEST(output_at(*gv, 1) == 3.0f);
  // The graph input itself is an index leaf.
  auto ok = test::empty_model({{"ids", onnx::TensorProto::INT64, {2}}});
  test::add_initializer(ok, "table", {1, 2, 3});
  test::add_node(ok, "Gather", {"table", "ids"}, {"y"});
  OnnxImportOptions o;
  o.inputs["ids"] = {"int64", {}, xt::xarray<std::int64_t>{2, 0}};
  const auto g = import_built(ok, o);
  BOOST_TEST(output_at(*g, 0) == 3.0f);
  BOOST_TEST(output_at(*g, 1) == 1.0f);
}

BOOST_AUTO_TEST_CASE(every_input_of_an_op_is_data_unless_it_is_read_at_import) {
  // The safe default (review of 61bd929, section 3): an initializer that reaches the outputs
  // through any op the importer builds is a parameter with a gradient; only the positions an op
  // reads at import (shapes, axes, exponents, conditions) are listed as exceptions. Before, an op
  // without a row in that table froze such weights into constants and --grad dropped their
  // gradients. y = op(w) for ops of every family: d sum(y) / dw, against finite differences.
  for (const char* op : {"Abs", "Neg", "Sigmoid", "Tanh", "Exp", "Softplus", "LeakyRelu", "Elu", "Relu", "Identity",
                         "Softmax", "Flatten", "Transpose", "Reciprocal", "HardSigmoid", "Softsign"}) {
    BOOST_TEST_CONTEXT(op) {
      auto m = test::empty_model({});
      test::add_initializer(m, "w", {0.5f, -1.25f, 2.0f});
      test::add_node(m, op, {"w"}, {"y"});
      OnnxImportOptions o;
      o.gradients = true;
      std::unique_ptr<Graph<double>> g;
      BOOST_REQUIRE_NO_THROW(g = import_onnx_bytes<double>(m.SerializeAsString(), "m.onnx", o));
      const Var<double> w = leaf_named(*g, "w");
      BOOST_TEST((w.node().role == Role::parameter));
      BOOST_TEST_REQUIRE(g->grads().count("w") == 1u);
      const xt::xarray<double> grad = g->var(g->grads().at("w")).value();
      const xt::xarray<double> keep = w.value();
      for (std::size_t i = 0; i < 3; ++i) {
        const auto sum_at = [&](double h) {
          xt::xarray<double> v = keep;
          v(i) += h;
          g->set_value(w, v);
          g->replay();
          return xt::sum(g->var(g->outputs().at("y")).value())();
        };
        const double fd = (sum_at(1e-6) - sum_at(-1e-6)) / 2e-6;
        g->set_value(w, keep);
        g->replay();
        BOOST_TEST(grad(i) == fd, boost::test_tools::tolerance(1e-6));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(every_row_import_builds_its_row_with_its_gradient) {
  // Each line of the importer's row table (lib/onnx/elementwise.cpp): y = op(w) for a weight w
  // imports as one node of the row's op, whose value and d sum(y) / dw are those of the row
  // built directly (ONNX's node tests hold the op to ONNX's values: tests/onnx/node_tests.cpp).
  const auto& rows = onnx_rules::row_imports<double>();
  BOOST_TEST(rows.size() >= 12u);
  for (const auto& row : rows) {
    BOOST_TEST_CONTEXT(row.op_type) {
      const xt::xarray<double> w0{0.25, 0.5, 1.0, 1.5, 2.0};  // in every row's domain
      auto m = test::empty_model({});
      test::add_initializer(m, "w", {0.25f, 0.5f, 1.0f, 1.5f, 2.0f});
      test::add_node(m, row.op_type, {"w"}, {"y"});
      OnnxImportOptions o;
      o.gradients = true;
      std::unique_ptr<Graph<double>> g;
      BOOST_REQUIRE_NO_THROW(g = import_onnx_bytes<double>(m.SerializeAsString(), "m.onnx", o));
      Graph<double> direct;
      const auto w = direct.parameter("w", w0);
      const auto y = row.row(w);
      const Var<double> imported = g->var(g->outputs().at("y"));
      BOOST_TEST(imported.node().op_name() == y.node().op_name());
      BOOST_TEST(imported.value() == y.value());
      BOOST_TEST_REQUIRE(g->grads().count("w") == 1u);
      BOOST_TEST(g->var(g->grads().at("w")).value() == grad(xgrad::sum(y), {w})[0].value());
      check_gradients(xgrad::sum(y), {w});
    }
  }
}

BOOST_AUTO_TEST_CASE(losses_follow_new_labels_on_replay) {
  // SoftmaxCrossEntropyLoss with run-time labels: a one-hot of the index leaf, so a replay with
  // new labels gives what an import with them gives.
  const auto model = [] {
    auto m = test::onnx_model("SoftmaxCrossEntropyLoss", {{"x", onnx::TensorProto::FLOAT, {2, 3}}, {"t", onnx::TensorProto::INT64, {2}}},
                              {"x", "t"}, 13);
    auto* a = m.mutable_graph()->mutable_node(0)->add_attribute();
    a->set_name("reduction");
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s("sum");
    return m;
  }();
  OnnxImportOptions a, b;
  a.inputs["x"] = b.inputs["x"] = {"float32", xt::xarray<double>{{1, 2, 3}, {0, 0, 5}}, {}};
  a.inputs["t"] = {"int64", {}, xt::xarray<std::int64_t>{0, 1}};
  b.inputs["t"] = {"int64", {}, xt::xarray<std::int64_t>{2, 2}};
  const auto ga = import_built(model, a), gb = import_built(model, b);
  // -log_softmax picked: (log(e + e^2 + e^3) - 1) + (log(2 + e^5) - 0)
  const double l0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), l1 = std::log(2 + std::exp(5.0));
  BOOST_TEST(std::fabs(output_at(*ga, 0) - (l0 - 1 + l1)) < 1e-5);
  const Var<float> labels = leaf_named(*ga, "t");
  BOOST_TEST(labels.node().index_leaf);
  ga->set_value(labels, b.inputs["t"].ints);
  ga->replay();
  BOOST_TEST(output_at(*ga, 0) == output_at(*gb, 0));
  BOOST_TEST(std::fabs(output_at(*gb, 0) - (l0 - 3 + l1 - 5)) < 1e-5);
}

BOOST_AUTO_TEST_CASE(float_ops_on_constants_are_known_at_import) {
  // Sqrt has no host implementation: it runs as a node on the constant Cast(Shape(x)), and its
  // value still serves as a shape.
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {4}}});
  test::add_node(m, "Shape", {"x"}, {"s"});
  test::set_int(test::add_node(m, "Cast", {"s"}, {"f"}), "to", onnx::TensorProto::FLOAT);
  test::add_node(m, "Sqrt", {"f"}, {"r"});
  test::set_int(test::add_node(m, "Cast", {"r"}, {"i"}), "to", onnx::TensorProto::INT64);
  test::set_int(test::add_node(m, "Concat", {"i", "i"}, {"shape"}), "axis", 0);
  test::add_node(m, "Reshape", {"x", "shape"}, {"y"});
  const auto g = import_built(m);
  BOOST_TEST((g->var(g->outputs().at("y")).shape() == Shape{2, 2}));
}

// A .npy file of numpy's bool ('|b1').
std::string bool_npy(const std::vector<unsigned char>& v, const std::string& shape) {
  std::string header = "{'descr': '|b1', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + std::string(v.begin(), v.end());
}

// Issue 36: a float input that only Casts to bool read is a mask given at run time (xgrad's own
// export of a mask of its dtype writes one): a mask leaf, true where the input is not 0; a float
// input that anything else reads stays a float, and its Cast to bool is refused as before.
BOOST_AUTO_TEST_CASE(a_float_input_cast_to_bool_is_a_mask_leaf) {
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3}}, {"m", onnx::TensorProto::FLOAT, {2, 3}}});
  test::add_initializer(m, "fill", {-1e9f});
  test::set_int(test::add_node(m, "Cast", {"m"}, {"keep"}), "to", onnx::TensorProto::BOOL);
  test::add_node(m, "Where", {"keep", "x", "fill"}, {"y"});
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", xt::xarray<double>{{1, 2, 3}, {4, 5, 6}}, {}};
  o.inputs["m"] = {"float32", xt::xarray<double>{{1, 0, 0.5}, {0, 0, 2}}, {}};
  const auto g = import_built(m, o);
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{{1, -1e9f, 3}, {-1e9f, -1e9f, 6}}));
  const Var<float> mask = leaf_named(*g, "m");
  BOOST_TEST(mask.node().mask_leaf);
  g->set_value(mask, xt::xarray<bool>{{false, true, true}, {true, false, false}});
  g->replay();
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{{-1e9f, 2, 3}, {4, -1e9f, -1e9f}}));
  // Read by an Add too: a float input, whose cast to bool is computed at run time.
  auto both = m;
  test::add_node(both, "Add", {"m", "x"}, {"z"});
  both.mutable_graph()->add_output()->CopyFrom(both.graph().output(0));
  both.mutable_graph()->mutable_output(1)->set_name("z");
  check_error([&] { import_built(both, o); }, {"cast of a float32 value computed at run time to bool"});
}

BOOST_AUTO_TEST_CASE(bool_inputs_are_masks_given_at_run_time) {
  // A key padding mask as a graph input: Where(m, x, -1e9) with m a leaf of 0 and 1.
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3}}, {"m", onnx::TensorProto::BOOL, {2, 3}}});
  test::add_initializer(m, "fill", {-1e9f});
  test::add_node(m, "Not", {"m"}, {"keep"});
  test::add_node(m, "Where", {"keep", "x", "fill"}, {"y"});
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", xt::xarray<double>{{1, 2, 3}, {4, 5, 6}}, {}};
  o.inputs["m"] = {"bool", {}, xt::xarray<std::int64_t>{{0, 0, 1}, {1, 0, 0}}};
  o.gradients = true;
  const auto g = import_built(m, o);
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{{1, 2, -1e9f}, {-1e9f, 5, 6}}));
  BOOST_TEST(g->grads().count("x") == 1u);
  BOOST_TEST(g->grads().count("m") == 0u);  // a mask has no gradient
  // A new mask, replayed.
  const Var<float> mask = leaf_named(*g, "m");
  BOOST_TEST(mask.node().mask_leaf);
  g->set_value(mask, xt::xarray<bool>{{true, true, true}, {false, false, false}});
  g->replay();
  BOOST_TEST((g->var(g->outputs().at("y")).value() == xt::xarray<float>{{-1e9f, -1e9f, -1e9f}, {4, 5, 6}}));
  // A bool output is refused.
  auto b = test::empty_model({{"m", onnx::TensorProto::BOOL, {2}}});
  test::add_node(b, "Not", {"m"}, {"y"});
  check_error([&] { import_built(b); }, {"m.onnx: graph output 'y' is bool: an xgrad graph computes float values only"});
  // From the tool: numpy's bool .npy.
  test::Sandbox box;
  test::write_model(m, box.path("mask.onnx"));
  test::write_text(box.dir / "m.npy", bool_npy({0, 0, 1, 1, 0, 0}, "(2, 3)"));
  const test::Run r = box.xgrad("import mask.onnx --input m=m.npy -o g.json");
  BOOST_TEST(r.rc == 0, r.err);
}

BOOST_AUTO_TEST_CASE(compositions_do_not_overflow) {
  const auto one = [](const std::string& op, const std::vector<float>& x) {
    auto m = test::onnx_model(op, {{"x", onnx::TensorProto::FLOAT, {static_cast<long>(x.size())}}}, {"x"});
    if (op == "ReduceLogSumExp") test::set_int(*m.mutable_graph()->mutable_node(0), "keepdims", 0);
    OnnxImportOptions o;
    o.inputs["x"] = {"float32", xt::adapt(std::vector<double>(x.begin(), x.end())), {}};
    o.gradients = true;
    return import_built(m, o);
  };
  const auto sp = one("Softplus", {100.0f, -100.0f, 0.0f});
  BOOST_TEST(output_at(*sp, 0) == 100.0f);
  BOOST_TEST(output_at(*sp, 1) < 1e-30f);  // log(1 + 3.8e-44) in float32, as ONNX's reference gives
  BOOST_TEST(output_at(*sp, 2) == std::log(2.0f));
  BOOST_TEST(sp->var(sp->grads().at("x")).value()(2) == 0.5f);  // softplus'(0): both sides of |x| agree
  const auto lse = one("ReduceLogSumExp", {100.0f, 100.0f});
  BOOST_TEST(std::fabs(output_at(*lse, 0) - (100.0f + std::log(2.0f))) < 1e-5f);
  const auto sg = one("Sigmoid", {-100.0f, 100.0f, 0.0f});
  BOOST_TEST(output_at(*sg, 1) == 1.0f);
  BOOST_TEST(output_at(*sg, 2) == 0.5f);
  for (float v : sg->var(sg->grads().at("x")).value()) BOOST_TEST(std::isfinite(v));
}

BOOST_AUTO_TEST_CASE(integers_at_import_are_exact) {
  // Slice of a shape with a step near 2^63; Range near 2^62; INT64_MIN / -1 wraps, as ONNX
  // Runtime's arithmetic does; the results reach the float output through Cast.
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3, 4, 5, 6}}});
  test::add_node(m, "Shape", {"x"}, {"s"});
  test::add_int64_constant(m, "b", {1});
  test::add_int64_constant(m, "e", {4});
  test::add_int64_constant(m, "a", {0});
  test::add_int64_constant(m, "st", {std::numeric_limits<std::int64_t>::max()});
  test::add_node(m, "Slice", {"s", "b", "e", "a", "st"}, {"sl"});
  test::add_int64_constant(m, "lo", {std::int64_t(1) << 62}, true);
  test::add_int64_constant(m, "hi", {(std::int64_t(1) << 62) + 3}, true);
  test::add_int64_constant(m, "one", {1}, true);
  test::add_node(m, "Range", {"lo", "hi", "one"}, {"r"});
  test::add_int64_constant(m, "min", {std::numeric_limits<std::int64_t>::min()}, true);
  test::add_int64_constant(m, "neg1", {-1}, true);
  test::add_node(m, "Div", {"min", "neg1"}, {"q"});
  test::add_node(m, "Size", {"r"}, {"n"});
  test::add_node(m, "Mul", {"sl", "n"}, {"sn"});  // [3] * 3
  test::add_node(m, "Concat", {"sn", "sl"}, {"c"});
  test::set_int(m.mutable_graph()->mutable_node(m.graph().node_size() - 1)[0], "axis", 0);
  test::add_node(m, "Cast", {"c"}, {"cf"});
  test::set_int(m.mutable_graph()->mutable_node(m.graph().node_size() - 1)[0], "to", onnx::TensorProto::FLOAT);
  test::add_node(m, "Cast", {"q"}, {"qf"});
  test::set_int(m.mutable_graph()->mutable_node(m.graph().node_size() - 1)[0], "to", onnx::TensorProto::FLOAT);
  test::add_node(m, "Mul", {"cf", "qf"}, {"y"});
  const auto g = import_built(m);
  BOOST_TEST_REQUIRE(g->node(g->outputs().at("y").node).value().size() == 2u);
  const float min = static_cast<float>(std::numeric_limits<std::int64_t>::min());
  BOOST_TEST(output_at(*g, 0) == 9.0f * min);
  BOOST_TEST(output_at(*g, 1) == 3.0f * min);
}

BOOST_AUTO_TEST_CASE(trilu_keeps_a_triangle_of_run_time_values) {
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3, 4}}});
  test::add_int64_constant(m, "k", {1}, true);
  test::set_int(test::add_node(m, "Trilu", {"x", "k"}, {"y"}), "upper", 0);
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", xt::arange<double>(1, 25).reshape({2, 3, 4}), {}};
  o.gradients = true;
  const auto g = import_built(m, o);
  const auto y = g->var(g->outputs().at("y")).value();
  const auto gx = g->var(g->grads().at("x")).value();
  for (std::size_t b = 0; b < 2; ++b) {
    for (std::size_t i = 0; i < 3; ++i) {
      for (std::size_t j = 0; j < 4; ++j) {
        const bool kept = static_cast<long>(j) - static_cast<long>(i) <= 1;  // numpy.tril(x, 1)
        BOOST_TEST(y(b, i, j) == (kept ? static_cast<float>(1 + 12 * b + 4 * i + j) : 0.0f));
        BOOST_TEST(gx(b, i, j) == (kept ? 1.0f : 0.0f));
      }
    }
  }
  // On a value known at import (a causal mask made in the model): computed at import.
  auto c = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 2}}});
  test::add_int64_constant(c, "shape", {2, 2});
  auto* fill = test::add_node(c, "ConstantOfShape", {"shape"}, {"ones"}).add_attribute();
  fill->set_name("value");
  fill->set_type(onnx::AttributeProto::TENSOR);
  fill->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  fill->mutable_t()->add_dims(1);
  fill->mutable_t()->add_float_data(1.0f);
  test::add_node(c, "Trilu", {"ones"}, {"upper"});
  test::add_node(c, "Mul", {"x", "upper"}, {"y"});
  OnnxImportOptions co;
  co.inputs["x"] = {"float32", xt::xarray<double>{{5, 6}, {7, 8}}, {}};
  const auto gc = import_built(c, co);
  BOOST_TEST((gc->var(gc->outputs().at("y")).value() == xt::xarray<float>{{5, 6}, {0, 8}}));
  BOOST_TEST(gc->size() == 3u);  // x, the triangle as a constant leaf, mul: no trilu node
  check_error([&] { import_built(test::onnx_model("Trilu", {{"x", onnx::TensorProto::FLOAT, {3}}}, {"x"})); },
              {"Trilu needs rank >= 2, the input has shape (3,)"});
}

BOOST_AUTO_TEST_CASE(old_opsets_keep_their_defaults) {
  // Concat before opset 4: axis 1 by default; required from 4.
  auto c = test::onnx_model("Concat", {{"x", onnx::TensorProto::FLOAT, {2, 2}}}, {"x", "x"}, 3);
  BOOST_TEST((import_built(c)->var(import_built(c)->outputs().at("y")).shape() == Shape{2, 4}));
  auto c4 = test::onnx_model("Concat", {{"x", onnx::TensorProto::FLOAT, {2, 2}}}, {"x", "x"}, 4);
  check_error([&] { import_built(c4); }, {"(Concat, domain ai.onnx, opset 4): attribute 'axis' is required"});
  // Selu before opset 6: alpha 1.6732, gamma 1.0507.
  auto selu = test::onnx_model("Selu", {{"x", onnx::TensorProto::FLOAT, {1}}}, {"x"}, 5);
  OnnxImportOptions o;
  o.inputs["x"] = {"float32", xt::xarray<double>{-1.0}, {}};
  BOOST_TEST(std::fabs(output_at(*import_built(selu, o), 0) - 1.0507f * 1.6732f * (std::exp(-1.0f) - 1.0f)) < 1e-6f);
  // An op before the opset that defines it; legacy broadcasting.
  check_error([&] { import_built(test::onnx_model("LayerNormalization", {{"x", onnx::TensorProto::FLOAT, {2}}, {"s", onnx::TensorProto::FLOAT, {2}}}, {"x", "s"}, 16)); },
              {"(LayerNormalization, domain ai.onnx, opset 16): op not in the default domain at opset 16 (it is from opset 17)"});
  auto b = test::onnx_model("Add", {{"x", onnx::TensorProto::FLOAT, {3, 3}}, {"z", onnx::TensorProto::FLOAT, {3}}}, {"x", "z"}, 6);
  test::set_int(*b.mutable_graph()->mutable_node(0), "broadcast", 1);
  check_error([&] { import_built(b); }, {"the broadcast attribute of opsets before 7"});
}

BOOST_AUTO_TEST_CASE(large_values_are_refused_before_they_are_allocated) {
  // A declared (2^30) input without a value; a Where of 2^30 elements from small operands.
  check_error([&] { import_built(test::onnx_model("Relu", {{"x", onnx::TensorProto::FLOAT, {1L << 30}}}, {"x"})); },
              {"graph input 'x': the model's values would hold more than 268435456 elements"});
  check_error([&] { import_built(test::onnx_model("Relu", {{"x", onnx::TensorProto::FLOAT, {1L << 32, 1L << 32}}}, {"x"})); },
              {"graph input 'x': the model's values would hold more than"});
  auto w = test::empty_model({{"x", onnx::TensorProto::FLOAT, {1}}});
  test::add_node(w, "Shape", {"x"}, {"s"});
  test::add_int64_constant(w, "big", {1L << 15, 1});
  test::add_node(w, "ConstantOfShape", {"big"}, {"col"});
  test::add_int64_constant(w, "wide", {1, 1L << 15});
  test::add_node(w, "ConstantOfShape", {"wide"}, {"row"});
  test::add_node(w, "Equal", {"col", "col"}, {"c"});
  test::add_node(w, "Where", {"c", "row", "col"}, {"y"});
  check_error([&] { import_built(w); }, {"(Where, domain ai.onnx, opset 17): shape (32768, 32768) has more than 268435456 elements"});
  // A ConstantOfShape value of no element.
  auto e = test::empty_model({{"x", onnx::TensorProto::FLOAT, {1}}});
  test::add_int64_constant(e, "shape", {2});
  onnx::NodeProto& n = test::add_node(e, "ConstantOfShape", {"shape"}, {"y"});
  auto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(0);
  check_error([&] { import_built(e); }, {"attribute 'value' must hold one element, it holds 0"});
}


BOOST_AUTO_TEST_CASE(comparisons_of_run_time_values_are_masks_and_pow_takes_any_finite_exponent) {
  // y = Where(x < w, x, 0)^2.5 + Not(x < w): the comparison of a run-time input and an
  // initializer is a mask (no gradient through it, so w stays a value), Where and Not read it, Pow
  // 2.5 is the pow op.
  auto m = test::empty_model({{"x", onnx::TensorProto::DOUBLE, {4}}});
  test::add_initializer(m, "w", {1.0f, 1.0f, 3.0f, 3.0f});
  test::add_initializer(m, "zero", {0.0f});
  test::add_initializer(m, "p", {2.5f});
  test::set_int(test::add_node(m, "Cast", {"w"}, {"wd"}), "to", onnx::TensorProto::DOUBLE);
  test::set_int(test::add_node(m, "Cast", {"zero"}, {"zd"}), "to", onnx::TensorProto::DOUBLE);
  test::add_node(m, "Less", {"x", "wd"}, {"below"});
  test::add_node(m, "Where", {"below", "x", "zd"}, {"kept"});
  test::add_node(m, "Pow", {"kept", "p"}, {"powered"});
  test::add_node(m, "Not", {"below"}, {"above"});
  test::set_int(test::add_node(m, "Cast", {"above"}, {"above_d"}), "to", onnx::TensorProto::DOUBLE);
  test::add_node(m, "Add", {"powered", "above_d"}, {"y"});
  OnnxImportOptions o;
  o.inputs["x"] = OnnxTensor{"float64", xt::xarray<double>{0.5, 2.0, 2.0, 4.0}, {}};
  o.gradients = true;
  const auto g = import_onnx_bytes<double>(m.SerializeAsString(), "m.onnx", o);
  const xt::xarray<double> y = g->var(g->outputs().at("y")).value();
  const xt::xarray<double> want = {std::pow(0.5, 2.5), 1.0, std::pow(2.0, 2.5), 1.0};
  BOOST_TEST(y == want);
  const xt::xarray<double> gx = g->var(g->grads().at("x")).value();
  const xt::xarray<double> want_gx = {2.5 * std::pow(0.5, 1.5), 0.0, 2.5 * std::pow(2.0, 1.5), 0.0};
  BOOST_TEST(gx == want_gx);
  BOOST_TEST(g->grads().count("w") == 0u);  // read by the comparison only: a value, not a parameter
  bool has_less = false, has_pow = false;
  for (std::size_t id = 0; id < g->size(); ++id) {
    has_less = has_less || g->node(id).op_name() == "less";
    has_pow = has_pow || g->node(id).op_name() == "pow";
  }
  BOOST_TEST(has_less);
  BOOST_TEST(has_pow);
}

BOOST_AUTO_TEST_CASE(tile_of_a_run_time_value_repeats_it_and_sums_the_copies_gradients) {
  // x (2, 3) tiled (2, 2) -> (4, 6) as numpy.tile; each element is copied 4 times, so
  // d sum(y) / dx = 4 everywhere.
  auto m = test::empty_model({{"x", onnx::TensorProto::DOUBLE, {2, 3}}});
  test::add_int64_initializer(m, "repeats", {2, 2});
  test::add_node(m, "Tile", {"x", "repeats"}, {"y"});
  OnnxImportOptions o;
  o.inputs["x"] = OnnxTensor{"float64", xt::xarray<double>{{1, 2, 3}, {4, 5, 6}}, {}};
  o.gradients = true;
  const auto g = import_onnx_bytes<double>(m.SerializeAsString(), "m.onnx", o);
  const xt::xarray<double> y = g->var(g->outputs().at("y")).value();
  const xt::xarray<double> want = {{1, 2, 3, 1, 2, 3}, {4, 5, 6, 4, 5, 6}, {1, 2, 3, 1, 2, 3}, {4, 5, 6, 4, 5, 6}};
  BOOST_TEST(y == want);
  BOOST_TEST(g->var(g->grads().at("x")).value() == xt::xarray<double>(xt::ones<double>({2, 3}) * 4));
}

BOOST_AUTO_TEST_CASE(tile_and_split_of_values_known_at_import_are_computed_at_import) {
  // PyTorch's repeat_interleave exports the repeats as Split of an Expand of int64 constants:
  // computed at import, no node. Here: Tile of (1, 2) by (3) ... then Split into (2, 4), Cast.
  auto m = test::empty_model({});
  test::add_int64_initializer(m, "v", {7, 8});
  test::add_int64_initializer(m, "repeats", {3});
  test::add_int64_initializer(m, "sizes", {2, 4});
  test::add_node(m, "Tile", {"v", "repeats"}, {"tiled"});  // 7 8 7 8 7 8
  test::set_int(test::add_node(m, "Split", {"tiled", "sizes"}, {"a", "b"}), "axis", 0);
  test::set_int(test::add_node(m, "Cast", {"b"}, {"y"}), "to", onnx::TensorProto::FLOAT);
  const auto g = import_built(m);
  BOOST_TEST(g->size() == 1u);  // the output's constant leaf
  BOOST_TEST(g->var(g->outputs().at("y")).value() == (xt::xarray<float>{7, 8, 7, 8}));
}

BOOST_AUTO_TEST_CASE(tile_refuses_repeats_that_do_not_fit_the_shape) {
  auto m = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3}}});
  test::add_int64_initializer(m, "repeats", {2});
  test::add_node(m, "Tile", {"x", "repeats"}, {"y"});
  check_error([&] { import_built(m); }, {"(Tile, domain ai.onnx, opset 17): repeats [2] does not have one entry per axis of (2, 3)"});
  auto n = test::empty_model({{"x", onnx::TensorProto::FLOAT, {2, 3}}});
  test::add_int64_initializer(n, "repeats", {2, -1});
  test::add_node(n, "Tile", {"x", "repeats"}, {"y"});
  check_error([&] { import_built(n); }, {"repeats [2, -1] has a negative entry"});
}

BOOST_AUTO_TEST_SUITE_END()
