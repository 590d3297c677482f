// docs/custom-ops.md's op (examples/custom_op.hpp) against its formula, finite differences to
// second order, the JSON round trip through ImportOptions::ops, the tool's and to_onnx's
// messages for an op they do not know, and its ONNX lowering.
#include "../check.hpp"
#include "../onnx/no_lowering_op.hpp"
#include "../tools/sandbox.hpp"

#include <onnx/onnx_pb.h>
#include <xgrad/lib/onnx_export.hpp>

#include "../../examples/custom_op.hpp"

BOOST_AUTO_TEST_SUITE(custom_op)

BOOST_AUTO_TEST_CASE(softplus_matches_its_formula_and_finite_differences) {
  Graph<double> g;
  const xt::xarray<double> xv{{-30.0, -1.0, 0.0}, {0.5, 2.0, 40.0}};
  const auto x = g.input("x", xv);
  const auto y = custom::softplus(x, 2.0);
  // log(1 + exp(2 x)) / 2, from its series where exp(2 x) is tiny or huge.
  const double expected[] = {std::exp(-60.0) / 2, std::log1p(std::exp(-2.0)) / 2, std::log(2.0) / 2,
                             std::log1p(std::exp(1.0)) / 2, std::log1p(std::exp(4.0)) / 2, 40 + std::exp(-80.0) / 2};
  for (std::size_t i = 0; i < 6; ++i) BOOST_TEST(y.value().data()[i] == expected[i], boost::test_tools::tolerance(1e-15));
  // Finite differences where the curvature is (at |2 x| of 60 they would measure rounding).
  const auto u = g.input("u", {{-1.5, -0.3, 0.2}, {0.7, 1.1, 2.0}});
  const auto loss = sum(mul(custom::softplus(u, 2.0), u));
  BOOST_TEST(gradcheck(loss, {u}).passed);
  const auto gu = grad(loss, {u})[0];
  BOOST_TEST(gradcheck(sum(mul(gu, gu)), {u}).passed);  // second order: the VJP is nodes
  // The gradient is sigmoid(2 x) where the loss is the sum of y.
  const auto gx = grad(sum(y), {x})[0];
  for (std::size_t i = 0; i < 6; ++i) {
    BOOST_TEST(gx.value().data()[i] == 1 / (1 + std::exp(-2 * xv.data()[i])), boost::test_tools::tolerance(1e-15));
  }
  // float32 runs the same template.
  Graph<float> f;
  const auto yf = custom::softplus(f.input("x", {{0.0f}}), 2.0);
  BOOST_TEST(yf.value()(0, 0) == std::log(2.0f) / 2, boost::test_tools::tolerance(1e-7f));
}

BOOST_AUTO_TEST_CASE(a_bad_beta_adds_no_node) {
  Graph<double> g;
  const auto x = g.input("x", {{1.0}});
  for (double beta : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    check_error([&] { custom::softplus(x, beta); }, {"softplus: beta must be finite and > 0, got "});
  }
  BOOST_TEST(g.size() == 1u);
}

BOOST_AUTO_TEST_CASE(json_reads_back_through_the_programs_factory_only) {
  Graph<double> g;
  const auto x = g.input("x", {{-1.0, 0.5}});
  g.set_output("y", custom::softplus(x, 3.0));
  const Json j = to_json(g, ExportValues::all);
  BOOST_TEST(j["nodes"][1]["op"] == "softplus");
  BOOST_TEST(j["nodes"][1]["attrs"]["beta"] == 3.0);
  ImportOptions options;
  options.ops = custom::make_softplus;
  const auto back = graph_from_json<double>(j.dump(), options);
  BOOST_TEST(to_json(*back, ExportValues::all).dump() == j.dump());
  // Without the factory, the library and the tool say where to look.
  check_error([&] { graph_from_json<double>(j.dump()); },
              {"graph JSON: nodes[1].op: unknown op \"softplus\"", "ImportOptions::ops: docs/custom-ops.md"});
  test::Sandbox s;
  test::write_text(s.dir / "g.json", j.dump());
  for (const char* command : {"replay g.json", "inspect g.json", "export --graph g.json --format dot"}) {
    const test::Run r = s.xgrad(command);
    BOOST_TEST(r.rc == 2, command);
    BOOST_TEST(r.err.find("unknown op \"softplus\" (a program's own op reads back through ImportOptions::ops: "
                          "docs/custom-ops.md)") != std::string::npos, r.err);
  }
}

BOOST_AUTO_TEST_CASE(its_onnx_lowering_is_used_and_an_op_without_one_says_what_to_do) {
  Graph<double> g;
  g.set_output("y", custom::softplus(g.input("x", {{1.0}}), 2.0));
  onnx::ModelProto model;
  BOOST_TEST_REQUIRE(model.ParseFromString(to_onnx_bytes(g)));
  std::vector<std::string> ops;
  for (const auto& n : model.graph().node()) ops.push_back(n.op_type());
  BOOST_TEST((std::find(ops.begin(), ops.end(), "Softplus") != ops.end()));
  BOOST_TEST((std::find(ops.begin(), ops.end(), "Div") != ops.end()));
  // An op that keeps Op's default to_onnx.
  Graph<double> h;
  h.set_output("y", h.apply(std::make_shared<test::NoLoweringOp>(), {h.input("x", {{1.0}})}));
  check_error([&] { to_onnx_bytes(h); },
              {"node 1 (frobnicate): has no ONNX lowering (an op's to_onnx writes one, or says why there is none: "
               "docs/custom-ops.md)"});
}

BOOST_AUTO_TEST_SUITE_END()
