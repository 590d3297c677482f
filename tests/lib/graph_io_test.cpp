#include "../check.hpp"
#include "../graph_json_v1.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

using xgrad::test::as_version_1;

namespace {

// q, k, v with the awkward values a round trip must keep: NaN, +-inf, -0.0, subnormals.
template <class T>
void build_attention(Graph<T>& g, bool backward, bool awkward) {
  xt::xarray<T> q = random_array<T>({2, 3, 4}, 1), k = random_array<T>({2, 5, 4}, 2), v = random_array<T>({2, 5, 3}, 3);
  if (awkward) {
    q(0, 0, 0) = std::numeric_limits<T>::quiet_NaN();
    q(0, 1, 0) = std::numeric_limits<T>::infinity();
    q(0, 2, 0) = -std::numeric_limits<T>::infinity();
    k(1, 0, 0) = T(-0.0);
    v(1, 0, 0) = std::numeric_limits<T>::denorm_min();
    v(1, 1, 1) = -std::numeric_limits<T>::min() / 3;
  }
  const auto qv = g.input("q", q), kv = g.input("k", k), vv = g.parameter("v", v);
  const auto out = attention(qv, kv, vv);
  g.set_output("out", out);
  if (backward) {
    const auto grads = grad(out, {qv, kv, vv});
    g.set_grad("q", grads[0]);
    g.set_grad("k", grads[1]);
    g.set_grad("v", grads[2]);
  }
}

template <class T>
void check_round_trip(bool backward, bool awkward) {
  Graph<T> g;
  build_attention(g, backward, awkward);
  const std::string text = to_json(g, ExportValues::all).dump();
  const auto back = graph_from_json<T>(text);
  back->replay();
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
  BOOST_TEST_REQUIRE(back->size() == g.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    BOOST_TEST(same_bits_any_nan(back->node(i).value(), g.node(i).value()), "node " << i);
    BOOST_TEST(back->node(i).op_name() == g.node(i).op_name());
    BOOST_TEST((back->node(i).grad_of() == g.node(i).grad_of()));
  }
  BOOST_TEST((back->outputs() == g.outputs()));
  BOOST_TEST((back->grads() == g.grads()));
  // Values of leaves only are enough to replay.
  const auto from_inputs = graph_from_json<T>(to_json(g, ExportValues::inputs).dump());
  BOOST_TEST(to_json(*from_inputs, ExportValues::all).dump() == text);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A valid export of a small graph to corrupt: x (input), y = scale(x), z = softmax(y).
Json small_export() {
  Graph<double> g;
  const auto x = g.input("x", {{1, 2}});
  const auto z = softmax(scale(x, 0.5));
  g.set_output("z", z);
  return to_json(g, ExportValues::all);
}

// Imports small_export(), in version 1 (the format's first layout) or 2, after `corrupt`.
void check_import_error(const std::function<void(Json&)>& corrupt, std::initializer_list<std::string> parts,
                        int version = 1) {
  Json j = version == 1 ? as_version_1(small_export()) : small_export();
  corrupt(j);
  check_error([&] { graph_from_json<double>(j.dump()); }, parts);
}
void check_v2_import_error(const std::function<void(Json&)>& corrupt, std::initializer_list<std::string> parts) {
  check_import_error(corrupt, parts, 2);
}

// An op of a program's own, 2 x, that the registry does not know.
struct Twice final : OpFor<Twice> {
  std::string name() const override { return "my_twice"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const { y = 2 * *x[0]; }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const { return {scale(a.grad_out, 2.0)}; }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(graph_io)

BOOST_AUTO_TEST_CASE(round_trip_is_string_and_bit_identical) {
  for (bool backward : {false, true}) {
    for (bool awkward : {false, true}) {
      BOOST_TEST_CONTEXT("backward " << backward << ", awkward values " << awkward) {
        check_round_trip<float>(backward, awkward);
        check_round_trip<double>(backward, awkward);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(second_order_graph_round_trips) {
  Graph<double> g;
  const auto x = g.input("x", random_array<double>({2, 3}, 4));
  const auto gx = grad(softmax(x), {x}, xt::xarray<double>(random_array<double>({2, 3}, 5)))[0];
  grad(gx, {x});
  const std::string text = to_json(g, ExportValues::all).dump();
  BOOST_TEST(to_json(*graph_from_json<double>(text), ExportValues::all).dump() == text);
}

BOOST_AUTO_TEST_CASE(documented_example_matches_the_golden_file) {
  // tests/data/documented_example.json: `xgrad export --q q.json --k k.json --v v.json
  // --dtype float32` for the spec's example (values all, backward included).
  Graph<float> g;
  const auto q = g.input("q", {{std::log(2.0f)}, {0.0f}});
  const auto k = g.input("k", {{1.0f}, {0.0f}});
  const auto v = g.input("v", {{3.0f, 0.0f}, {0.0f, 6.0f}});
  const auto out = attention(q, k, v);
  g.set_output("out", out);
  const auto grads = grad(out, {q, k, v});
  g.set_grad("q", grads[0]);
  g.set_grad("k", grads[1]);
  g.set_grad("v", grads[2]);
  const std::string golden = read_text(XGRAD_TEST_DATA "/documented_example.json");
  BOOST_TEST(to_json(g, ExportValues::all).dump() + "\n" == golden);
  const auto back = graph_from_json<float>(golden);
  back->replay();
  BOOST_TEST(to_json(*back, ExportValues::all).dump() + "\n" == golden);
}

BOOST_AUTO_TEST_CASE(version_1_files_import_and_replay_bit_for_bit) {
  // The golden file as version 1 wrote it (xgrad before version 2): it imports, its stored
  // values are reproduced bit for bit, and it exports as the version 2 golden file.
  const std::string v1 = read_text(XGRAD_TEST_DATA "/documented_example_v1.json");
  const auto g = graph_from_json<float>(v1);
  const auto stored = stored_values<float>(Json::parse(v1));
  BOOST_TEST_REQUIRE(stored.size() == g->size());
  for (std::size_t i = 0; i < g->size(); ++i) {
    BOOST_TEST_REQUIRE(stored[i].size() == 1u);
    BOOST_TEST_REQUIRE(stored[i][0].has_value());
    BOOST_TEST(same_bits_any_nan(*stored[i][0], g->node(i).value()), "node " << i);
  }
  BOOST_TEST(to_json(*g, ExportValues::all).dump() + "\n" == read_text(XGRAD_TEST_DATA "/documented_example.json"));
  // And the test's version 1 writer writes that file.
  BOOST_TEST(as_version_1(to_json(*g, ExportValues::all)).dump() + "\n" == v1);
}

BOOST_AUTO_TEST_CASE(nodes_with_several_outputs_round_trip) {
  // The fused attention's node has out and lse, its VJP three gradients: inputs and names
  // refer to outputs, each output keeps its grad_of.
  Graph<double> g;
  const auto [q, k, v] = random_qkv(g, {2, 3, 2}, {2, 4, 2}, {2, 4, 3}, 1);
  const auto [out, lse] = flash_attention(q, k, v, 0.7);
  g.set_output("out", out);
  g.set_output("lse", lse);
  const auto grads = grad(add(sum(out, {-1}), lse), {q, k, v});
  g.set_grad("k", grads[1]);
  const Json j = to_json(g, ExportValues::all);
  BOOST_TEST(j["outputs"]["lse"] == Json::parse("[3, 1]"));
  BOOST_TEST(j["nodes"][3]["outputs"].size() == 2u);
  const std::string text = j.dump();
  const auto back = graph_from_json<double>(text);
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
  for (std::size_t i = 0; i < g.size(); ++i) {
    BOOST_TEST_REQUIRE(back->node(i).output_count() == g.node(i).output_count());
    for (std::size_t o = 0; o < g.node(i).output_count(); ++o) {
      BOOST_TEST(same_bits_any_nan(back->node(i).value(o), g.node(i).value(o)), "node " << i << " output " << o);
      BOOST_TEST((back->node(i).grad_of(o) == g.node(i).grad_of(o)));
    }
  }
  BOOST_TEST((back->outputs() == g.outputs()));
}

BOOST_AUTO_TEST_CASE(index_leaves_export_as_integers) {
  Graph<double> g;
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{{3, -1}, {9007199254740993, 0}});
  const auto x = g.input("x", {{1.0}});
  g.set_output("x", scale(x, 2.0));
  const Json j = to_json(g, ExportValues::inputs);
  const Json& n = j["nodes"][ids.id()];
  BOOST_TEST(n["op"] == "indices");
  BOOST_TEST(n["role"] == "input");
  BOOST_TEST(n["outputs"][0]["data"].dump() == "[3,-1,9007199254740993,0]");  // integers, exact past 2^53
  const auto back = graph_from_json<double>(j.dump());
  BOOST_TEST(back->node(0).index_leaf);
  BOOST_TEST((back->var(0).indices() == ids.indices()));
  BOOST_TEST(to_json(*back, ExportValues::inputs).dump() == j.dump());
  check_v2_import_error([&](Json& k) { k = j; k["nodes"][0]["outputs"][0]["data"][1] = 1.5; },
                        {"nodes[0].outputs[0].data[1]: expected an integer, got 1.5"});
  check_v2_import_error([&](Json& k) { k = j; k["nodes"][0]["role"] = "parameter"; },
                        {"nodes[0].role: a leaf \"indices\" has role \"parameter\""});
  check_v2_import_error([&](Json& k) { k = j; k["nodes"][2]["inputs"][0] = {0, 0}; },
                        {"nodes[2].inputs[0]: node 0 is an index leaf; scale takes float64 values there"});
}

// The streamed export writes to_json's dump() byte for byte, whatever the graph holds: values
// with the awkward numbers, diagnostics, several outputs, index and mask leaves, scopes, the run
// state, an empty value and one of more numbers than a chunk (4096).
template <class T>
void check_streamed_export() {
  Graph<T> g;
  build_attention(g, true, true);
  g.set_step(7);
  g.set_training(false);
  g.indices("ids", xt::xarray<std::int64_t>{{3, -1}, {9007199254740993, 0}});  // its ids are integers, exact past 2^53
  const auto m = g.mask("m", xt::xarray<bool>{true, false, true, true});
  const auto big = g.parameter("big", random_array<T>({3, 4097}, 9));
  const auto empty = g.input("empty", xt::xarray<T>(xt::zeros<T>({2, 0})));
  {
    const auto scope = g.scope("block");
    const auto parts = split(big, {1, 2}, 0);
    g.set_output("part", add(parts[1], parts[1]));
    g.set_output("sum", sum(scale(empty, 2.0)));
  }
  g.set_output("masked", where(m, g.var(0), scale(g.var(0), 0.5)));
  for (const ExportValues values : {ExportValues::none, ExportValues::inputs, ExportValues::all}) {
    BOOST_TEST_CONTEXT(values_name(values)) {
      std::ostringstream streamed;
      write_json(streamed, g, values);
      BOOST_TEST(streamed.str() == to_json(g, values).dump());
    }
  }
  const std::string path = (std::filesystem::temp_directory_path() / "xgrad_save_json_test.json").string();
  save_json(path, g, ExportValues::all);
  const std::string text = read_text(path);
  std::filesystem::remove(path);
  BOOST_TEST(text == to_json(g, ExportValues::all).dump() + "\n");
  const auto back = graph_from_json<T>(text);
  BOOST_TEST(to_json(*back, ExportValues::all).dump() + "\n" == text);
}

BOOST_AUTO_TEST_CASE(the_streamed_export_writes_the_same_bytes) {
  check_streamed_export<double>();
  check_streamed_export<float>();
}

BOOST_AUTO_TEST_CASE(save_json_refuses_what_write_file_atomically_refuses) {
  Graph<double> g;
  g.set_output("x", scale(g.input("x", {{1.0}}), 2.0));
  check_error([&] { save_json("/nonexistent-dir/g.json", g); },
              {"/nonexistent-dir/g.json: cannot create a temporary file in its directory: No such file or directory"});
}

BOOST_AUTO_TEST_CASE(a_programs_own_op_exports_and_imports_through_its_factory) {
  // An op the registry does not know, built with Graph::apply: exported by its name and
  // attrs, imported again with ImportOptions::ops; without the factory it is unknown.
  Graph<double> g;
  const auto x = g.input("x", {{1.5, -2}});
  const auto y = g.apply(std::make_shared<Twice>(), {x});
  grad(y, {x});
  const std::string text = to_json(g, ExportValues::all).dump();
  check_error([&] { graph_from_json<double>(text); }, {"graph JSON: nodes[1].op: unknown op \"my_twice\""});
  ImportOptions options;
  options.ops = [](const std::string& name, const JsonCursor& attrs) -> std::shared_ptr<const Op> {
    if (name != "my_twice") return nullptr;
    attrs.check_object({});
    return std::make_shared<Twice>();
  };
  const auto back = graph_from_json<double>(text, options);
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == text);
  BOOST_TEST(back->node(1).value()(0, 1) == -4.0);
  // The registry comes first: the factory is not asked for a known op.
  options.ops = [](const std::string&, const JsonCursor&) -> std::shared_ptr<const Op> { throw error("asked"); };
  BOOST_CHECK_NO_THROW(graph_from_json<double>(small_export().dump(), options));
  check_error([&] { graph_from_json<double>(text, options); }, {"graph JSON: asked"});
}

BOOST_AUTO_TEST_CASE(export_holds_what_a_person_needs) {
  Graph<double> g;
  build_attention(g, true, false);
  const Json j = to_json(g, ExportValues::none);
  BOOST_TEST(j["format"] == "xgrad-graph");
  BOOST_TEST(j["version"] == 2);
  BOOST_TEST(j["dtype"] == "float64");
  for (const auto& n : j["nodes"]) {
    for (const char* key : {"id", "op", "name", "role", "inputs", "attrs", "outputs"}) BOOST_TEST(n.contains(key), key);
    BOOST_TEST(n.size() == 7u);
    BOOST_TEST(n["outputs"].size() == 1u);
    BOOST_TEST(!n["outputs"][0].contains("data"));
    BOOST_TEST(n["outputs"][0].contains("grad_of") == (n["role"] == "backward" || n["op"] == "constant"));
  }
  BOOST_TEST(j["nodes"][3]["op"] == "scale");
  BOOST_TEST(j["nodes"][3]["attrs"]["alpha"] == 0.5);  // 1 / sqrt(d_k = 4), on q
  BOOST_TEST(j["nodes"][3]["inputs"] == Json::parse("[[0, 0]]"));
  BOOST_TEST(j["outputs"]["out"] == Json::parse("[7, 0]"));
  BOOST_TEST(j["grads"].size() == 3u);
  const Json inputs = to_json(g, ExportValues::inputs);
  for (const auto& n : inputs["nodes"]) {
    BOOST_TEST(n["outputs"][0].contains("data") == (n["role"] == "input" || n["role"] == "parameter" || n["role"] == "constant"));
  }
}

BOOST_AUTO_TEST_CASE(non_finite_numbers_are_strings) {
  Graph<double> g;
  const auto x = g.input("x", xt::xarray<double>{{std::nan(""), -std::numeric_limits<double>::infinity()}});
  scale(x, std::numeric_limits<double>::infinity());
  const std::string text = to_json(g, ExportValues::all).dump();
  BOOST_TEST(text.find("\"data\":[\"nan\",\"-inf\"]") != std::string::npos, text);
  BOOST_TEST(text.find("\"alpha\":\"inf\"") != std::string::npos, text);
  BOOST_TEST(text.find("null") == std::string::npos);
  BOOST_TEST(to_json(*graph_from_json<double>(text), ExportValues::all).dump() == text);
}

BOOST_AUTO_TEST_CASE(import_names_the_json_path_of_the_first_problem) {
  const std::string ok = small_export().dump();
  BOOST_REQUIRE_NO_THROW(graph_from_json<double>(ok));
  check_error([&] { graph_from_json<double>("{\"format\": "); }, {"graph JSON", "not JSON"});
  check_error([&] { graph_from_json<double>(ok.substr(0, ok.size() / 2)); }, {"graph JSON", "not JSON"});
  check_error([&] { graph_from_json<double>("[1, 2]"); }, {"graph JSON: top level: expected an object, got array"});
  check_error([&] { graph_from_json<double>(std::string(100000, '[') + std::string(100000, ']')); },
              {"nested deeper than 6 levels"});
  check_error([&] { graph_from_json<double>("{\"a\": [[[[[[1]]]]]]}"); }, {"nested deeper than 6 levels"});
  check_error([&] { graph_from_json<float>(ok); }, {"dtype: the graph is float64, asked to read it as float32"});
  check_import_error([](Json& j) { j["format"] = "onnx"; }, {"format: expected \"xgrad-graph\", got \"onnx\""});
  check_import_error([](Json& j) { j["version"] = 3; }, {"version: version 3 is not supported (this is version 2, and reads version 1 too)"});
  check_import_error([](Json& j) { j["version"] = "1"; }, {"version: expected an integer, got string"});
  check_import_error([](Json& j) { j["dtype"] = "int8"; }, {"dtype: expected \"float32\" or \"float64\""});
  check_import_error([](Json& j) { j.erase("grads"); }, {"top level: missing key \"grads\""});
  check_import_error([](Json& j) { j["extra"] = 1; }, {"extra: unknown key"});
  check_import_error([](Json& j) { j["nodes"][1]["colour"] = "red"; }, {"nodes[1].colour: unknown key"});
  check_import_error([](Json& j) { j["nodes"][2].erase("op"); }, {"nodes[2]: missing key \"op\""});
  check_import_error([](Json& j) { j["nodes"][1]["op"] = "frobnicate"; }, {"nodes[1].op: unknown op \"frobnicate\""});
  check_import_error([](Json& j) { j["nodes"][1]["id"] = 0; }, {"nodes[1].id: duplicate id 0"});
  check_import_error([](Json& j) { j["nodes"][1]["id"] = 5; }, {"nodes[1].id: id 5 out of order"});
  check_import_error([](Json& j) { j["nodes"][1]["inputs"][0] = 2; }, {"nodes[1].inputs[0]: refers to node 2, which is not before node 1"});
  check_import_error([](Json& j) { j["nodes"][1]["inputs"][0] = 99; }, {"nodes[1].inputs[0]: refers to node 99"});
  check_import_error([](Json& j) { j["nodes"][1]["inputs"][0] = -1; }, {"nodes[1].inputs[0]: expected a non-negative integer"});
  check_import_error([](Json& j) { j["nodes"][1]["inputs"].push_back(0); }, {"nodes[1].inputs: scale takes 1 inputs, got 2"});
  check_import_error([](Json& j) { j["nodes"][1]["attrs"] = Json::object(); }, {"nodes[1].attrs: missing key \"alpha\""});
  check_import_error([](Json& j) { j["nodes"][1]["attrs"]["alpha"] = true; }, {"nodes[1].attrs.alpha: expected a number, got boolean"});
  check_import_error([](Json& j) { j["nodes"][1]["attrs"]["beta"] = 1; }, {"nodes[1].attrs.beta: unknown key"});
  check_import_error([](Json& j) { j["nodes"][2]["attrs"]["axis"] = 1.5; }, {"nodes[2].attrs.axis: expected an integer, got 1.5"});
  check_import_error([](Json& j) { j["nodes"][2]["attrs"]["axis"] = 7; }, {"nodes[2]: softmax: axis 7 is out of range"});
  check_import_error([](Json& j) { j["nodes"][1].erase("value"); j["nodes"][1]["shape"] = {2, 1}; }, {"nodes[1].shape: declared (2, 1), but scale of its inputs gives (1, 2)"});
  check_import_error([](Json& j) { j["nodes"][0]["shape"] = {1, -2}; }, {"nodes[0].shape[1]: expected a non-negative integer"});
  check_import_error([](Json& j) { j["nodes"][0]["shape"] = {1u << 30, 1u << 30}; }, {"nodes[0].shape: more than 268435456 elements"});
  check_import_error([](Json& j) { j["nodes"][0]["value"]["data"].push_back(3.0); }, {"nodes[0].value.data: holds 3 numbers, but shape (1, 2) needs 2"});
  check_import_error([](Json& j) { j["nodes"][0]["value"]["data"][1] = "NaN"; }, {"nodes[0].value.data[1]: expected a number or \"nan\""});
  check_import_error([](Json& j) { j["nodes"][0]["value"]["data"][1] = nullptr; }, {"nodes[0].value.data[1]: expected a number, got null"});
  check_import_error([](Json& j) { j["nodes"][0]["value"]["shape"] = {2}; }, {"nodes[0].value.shape: is (2,), the node's shape is (1, 2)"});
  check_import_error([](Json& j) { j["nodes"][0]["value"]["shape"] = {2, 1}; j["nodes"][0]["value"]["data"] = {1, 2}; },
                     {"nodes[0].value.shape: is (2, 1), the node's shape is (1, 2)"});
  check_import_error([](Json& j) { j["nodes"][0]["role"] = "forward"; }, {"nodes[0].role: a leaf \"input\" has role \"forward\""});
  check_import_error([](Json& j) { j["nodes"][0]["role"] = "hero"; }, {"nodes[0].role: unknown role \"hero\""});
  check_import_error([](Json& j) { j["nodes"][1]["grad_of"] = 0; }, {"nodes[1].grad_of: a forward node is no gradient"});
  check_import_error([](Json& j) { j["nodes"][1]["role"] = "backward"; j["nodes"][1]["grad_of"] = 1; },
                     {"nodes[1].grad_of: refers to node 1, which is not before node 1"});
  check_import_error([](Json& j) { j["nodes"][0]["inputs"] = {0}; }, {"nodes[0].inputs[0]: refers to node 0, which is not before node 0"});
  check_import_error([](Json& j) { j["outputs"]["z"] = 9; }, {"outputs.z: refers to node 9 of a graph of 3"});
  check_import_error([](Json& j) { j["nodes"] = Json::object(); }, {"nodes: expected an array, got object"});
  check_import_error([](Json& j) { j["nodes"][0]["op"] = "indices"; }, {"nodes[0].op: version 1 has no index leaves"});
}

BOOST_AUTO_TEST_CASE(import_names_the_json_path_in_version_2) {
  // The same checks where version 2 moved the keys: inputs and names as [node, output], each
  // output its shape, grad_of and data.
  BOOST_REQUIRE_NO_THROW(graph_from_json<double>(small_export().dump()));
  check_v2_import_error([](Json& j) { j["nodes"][1]["inputs"][0][0] = 2; }, {"nodes[1].inputs[0][0]: refers to node 2, which is not before node 1"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["inputs"][0][1] = 1; }, {"nodes[1].inputs[0]: refers to output 1 of node 0, which has 1"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["inputs"][0] = 0; }, {"nodes[1].inputs[0]: expected an array, got number"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["inputs"][0] = {0}; }, {"nodes[1].inputs[0]: expected [node, output], an array of 2 integers"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["outputs"][0]["shape"] = {2, 1}; }, {"nodes[1].outputs[0].shape: declared (2, 1), but scale of its inputs gives (1, 2)"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["outputs"].push_back(j["nodes"][1]["outputs"][0]); }, {"nodes[1].outputs: scale has 1 outputs, got 2"});
  check_v2_import_error([](Json& j) { j["nodes"][0]["outputs"] = Json::array(); }, {"nodes[0].outputs: a leaf has 1 output, not 0"});
  check_v2_import_error([](Json& j) { j["nodes"][0]["outputs"][0]["data"].push_back(3.0); }, {"nodes[0].outputs[0].data: holds 3 numbers, but shape (1, 2) needs 2"});
  check_v2_import_error([](Json& j) { j["nodes"][0]["outputs"][0]["value"] = 1; }, {"nodes[0].outputs[0].value: unknown key"});
  check_v2_import_error([](Json& j) { j["nodes"][0]["shape"] = {1, 2}; }, {"nodes[0].shape: unknown key"});
  check_v2_import_error([](Json& j) { j["nodes"][1]["outputs"][0]["grad_of"] = {0, 0}; }, {"nodes[1].outputs[0].grad_of: a forward node is no gradient"});
  check_v2_import_error([](Json& j) { j["outputs"]["z"] = {9, 0}; }, {"outputs.z[0]: refers to node 9 of a graph of 3"});
  check_v2_import_error([](Json& j) { j["outputs"]["z"] = {2, 1}; }, {"outputs.z: refers to output 1 of node 2, which has 1"});
  check_v2_import_error([](Json& j) { j["outputs"]["z"] = 2; }, {"outputs.z: expected an array, got number"});
}

BOOST_AUTO_TEST_CASE(import_bounds_what_a_small_file_can_allocate) {
  // Two value-less leaves of 2^27 + 1 elements each: past the 2^28 budget of a whole import,
  // refused before the second is allocated.
  Json j = small_export();
  j["nodes"] = Json::array();
  for (std::size_t i = 0; i < 2; ++i) {
    j["nodes"].push_back({{"id", i}, {"op", "input"}, {"name", ""}, {"role", "input"}, {"inputs", Json::array()},
                          {"attrs", Json::object()}, {"outputs", {{{"shape", {(1u << 27) + 1}}}}}});
  }
  j["outputs"] = Json::object();
  check_error([&] { graph_from_json<double>(j.dump()); }, {"nodes[1]: the graph holds more than 268435456 elements"});
  // An empty array cannot carry an absurd axis.
  check_import_error([](Json& k) { k["nodes"][0]["shape"] = {0, 1u << 30}; }, {"nodes[0].shape: more than 268435456 elements"});
}

// A graph of value-less leaves and op nodes, from (op, inputs, attrs, shape) rows after the
// leaves' shapes: the files of the reports, a few hundred bytes each (version 1).
std::string crafted_graph(const std::vector<Shape>& leaves,
                          const std::vector<std::tuple<std::string, std::vector<std::size_t>, Json, Shape>>& ops) {
  Json j = as_version_1(small_export());
  j["nodes"] = Json::array();
  for (const auto& shape : leaves) {
    j["nodes"].push_back({{"id", j["nodes"].size()}, {"op", "input"}, {"name", ""}, {"role", "input"},
                          {"inputs", Json::array()}, {"attrs", Json::object()}, {"shape", shape}});
  }
  for (const auto& [op, inputs, attrs, shape] : ops) {
    j["nodes"].push_back({{"id", j["nodes"].size()}, {"op", op}, {"name", ""}, {"role", "forward"},
                          {"inputs", inputs}, {"attrs", attrs}, {"shape", shape}});
  }
  j["outputs"] = Json::object();
  j["grads"] = Json::object();
  j.erase("diagnostics");
  return j.dump();
}

BOOST_AUTO_TEST_CASE(import_bounds_what_a_small_file_can_compute) {
  // Regression (issue 15): one matmul of (4096, 8192) by (8192, 4096) zero leaves, 414 bytes,
  // ran 13-19 s. 2^37 multiply-adds are 2^34 element visits: refused before any node runs (the
  // leaves, 2^26 elements together, are not even allocated: tests/resources checks that).
  const Json flags{{"transpose_a", false}, {"transpose_b", false}};
  const std::string big = crafted_graph({{4096, 8192}, {8192, 4096}}, {{"matmul", {0, 1}, flags, {4096, 4096}}});
  BOOST_TEST(big.size() < 500u);
  check_error([&] { graph_from_json<double>(big); },
              {"graph JSON: nodes[2]: computing the graph takes more than 4294967296 element visits (Op::work), "
               "the most this import runs: 17263755280 in all, this matmul 17263755280"});
  // Regression: 200 sums of one 2^27-element leaf ran for minutes; each visits 2^27 + 1
  // elements, so the 32nd passes 2^32.
  std::vector<std::tuple<std::string, std::vector<std::size_t>, Json, Shape>> sums;
  for (int i = 0; i < 200; ++i) sums.emplace_back("sum", std::vector<std::size_t>{0}, Json{{"axes", {0}}, {"keepdims", false}}, Shape{});
  check_error([&] { graph_from_json<double>(crafted_graph({{1u << 27}}, sums)); }, {"nodes[32]: computing the graph takes more than"});
  // The limit is a parameter: small_export's scale visits 4 elements, its softmax 4 and a row.
  const std::string ok = small_export().dump();
  BOOST_REQUIRE_NO_THROW(graph_from_json<double>(ok));
  check_error([&] { graph_from_json<double>(ok, max_array_elements, 5.0); }, {"nodes[2]: computing the graph takes more than 5 element visits"});
}

BOOST_AUTO_TEST_CASE(ops_state_their_work) {
  // The default: the elements of the inputs and the output.
  const auto scale = make_op("scale", JsonCursor(Json{{"alpha", 2.0}}, "attrs"));
  BOOST_TEST(scale->work({{2, 3}}, {{2, 3}}) == 12.0);
  // matmul adds its multiply-adds, 8 to an element visit, and 16 per product: (2, 3) @ (3, 4)
  // has 6 + 12 + 8 elements and 2 x 4 x 3 = 24 multiply-adds.
  const auto matmul = make_op("matmul", JsonCursor(Json{{"transpose_a", false}, {"transpose_b", false}}, "attrs"));
  BOOST_TEST(matmul->work({{2, 3}, {3, 4}}, {{2, 4}}) == 26.0 + 3.0 + 16.0);
  BOOST_TEST(matmul->work({{5, 2, 3}, {5, 3, 4}}, {{5, 2, 4}}) == 5 * 45.0);
  // Row passes add 64 a row, and 32 an element along another axis than the last: softmax of
  // (3, 4) has 3 rows of 4 along -1, 4 rows of 3 along 0.
  const auto softmax_last = make_op("softmax", JsonCursor(Json{{"axis", -1}}, "attrs"));
  const auto softmax_first = make_op("softmax", JsonCursor(Json{{"axis", 0}}, "attrs"));
  BOOST_TEST(softmax_last->work({{3, 4}}, {{3, 4}}) == 24.0 + 3 * 64);
  BOOST_TEST(softmax_first->work({{3, 4}}, {{3, 4}}) == 24.0 + 4 * 64 + 32 * 12);
  // Reductions 8 an output element; broadcast_to 4.
  const auto sum = make_op("sum", JsonCursor(Json{{"axes", {1}}, {"keepdims", false}}, "attrs"));
  BOOST_TEST(sum->work({{3, 4}}, {{3}}) == 15.0 + 8 * 3);
  const auto broadcast = make_op("broadcast_to", JsonCursor(Json{{"shape", {5, 4}}}, "attrs"));
  BOOST_TEST(broadcast->work({{4}}, {{5, 4}}) == 24.0 + 4 * 20);
  // The fused attention: q (4, 2), k and v (6, 2), out (4, 2) and lse (4): 24 weights of 4
  // multiply-adds forward, each written and read once; 3 x 2 + 2 x 2 = 10 multiply-adds and 4
  // visits in the VJP, whose inputs add grad_out and grad_lse and whose outputs are q, k, v.
  const auto flash = make_op("flash_attention", JsonCursor(Json{{"scale", 1.0}}, "attrs"));
  BOOST_TEST(flash->work({{4, 2}, {6, 2}, {6, 2}}, {{4, 2}, {4}}) == 8 + 12 + 12 + 8 + 4 + 2 * 24 + 24 * 4 / 8.0);
  const auto flash_vjp = make_op("flash_attention_vjp", JsonCursor(Json{{"scale", 1.0}}, "attrs"));
  BOOST_TEST(flash_vjp->work({{4, 2}, {6, 2}, {6, 2}, {4, 2}, {4}, {4, 2}, {4}}, {{4, 2}, {6, 2}, {6, 2}}) ==
             32 + 24 + 32 + 4 * 24 + 24 * 10 / 8.0);
}

BOOST_AUTO_TEST_CASE(import_refuses_duplicate_keys) {
  // Regression (issue 15): nlohmann's DOM keeps one of two equal keys silently, so a graph whose
  // top level had "dtype" twice (float32, then float64) replayed as float64.
  const std::string ok = small_export().dump();
  const auto twice = [&](const std::string& first, const std::string& insert) {
    std::string text = ok;
    text.insert(text.find(first), insert);
    return text;
  };
  check_error([&] { graph_from_json<double>(twice("\"dtype\"", "\"dtype\":\"float32\",")); },
              {"graph JSON: top level: the key \"dtype\" appears twice"});
  check_error([&] { graph_from_json<double>(twice("\"id\":0", "\"id\":0,")); }, {"graph JSON: nodes[0]: the key \"id\" appears twice"});
  check_error([&] { graph_from_json<double>(twice("\"alpha\"", "\"alpha\":1,")); },
              {"graph JSON: nodes[1].attrs: the key \"alpha\" appears twice"});
  check_error([&] { graph_from_json<double>(twice("\"z\"", "\"z\":0,")); }, {"graph JSON: outputs: the key \"z\" appears twice"});
  // Equal keys in different objects are fine: every node has an "id".
  BOOST_REQUIRE_NO_THROW(graph_from_json<double>(ok));
}

BOOST_AUTO_TEST_CASE(float32_import_rejects_values_out_of_range) {
  Graph<float> g;
  g.input("x", {{1.0f}});
  Json j = to_json(g, ExportValues::all);
  j["nodes"][0]["outputs"][0]["data"][0] = 1e300;
  check_error([&] { graph_from_json<float>(j.dump()); }, {"nodes[0].outputs[0].data[0]: out of the range of float32"});
}

BOOST_AUTO_TEST_CASE(dot_shows_nodes_edges_and_backward_apart) {
  Graph<double> g;
  build_attention(g, true, false);
  const std::string dot = to_dot(g);
  BOOST_TEST(dot.rfind("digraph xgrad {", 0) == 0u);
  BOOST_TEST(dot.find("subgraph cluster_forward") != std::string::npos);
  BOOST_TEST(dot.find("subgraph cluster_backward") != std::string::npos);
  BOOST_TEST(dot.find("n0 [label=\"input\\nq\\n(2, 3, 4)\"") != std::string::npos, dot);
  BOOST_TEST(dot.find("n4 -> n5;") != std::string::npos);  // k^T feeds the scores' matmul
  BOOST_TEST(dot.find("style=dashed") != std::string::npos);
  BOOST_TEST(dot.find("\"grad q\"") != std::string::npos);
  // Every node has its box.
  for (std::size_t i = 0; i < g.size(); ++i) BOOST_TEST(dot.find("  n" + std::to_string(i) + " [label=") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
