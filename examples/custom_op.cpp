// examples/custom_op: a program's own op (examples/custom_op.hpp, docs/custom-ops.md) used in a
// graph, checked against finite differences to second order, saved as JSON and read back with
// its factory, and exported to ONNX. Prints PASS, or FAIL and exits 1.
#include <cstdio>

#include <xgrad/lib/onnx_export.hpp>

#include "custom_op.hpp"

int main() {
  using namespace xgrad;
  Graph<double> g;
  const auto x = g.input("x", {{-30.0, -1.0, 0.0}, {0.5, 2.0, 40.0}});
  const auto y = custom::softplus(x, 2.0);
  const auto loss = sum(mul(y, y));
  g.set_output("loss", loss);
  std::printf("softplus(x, beta = 2) = %s\n", format_array(y.value()).c_str());

  // First and second order against central differences in float64, where the curvature is
  // (at |beta x| of 60 or 80 the differences would measure rounding, not the op).
  Graph<double> c;
  const auto u = c.input("u", {{-1.5, -0.3, 0.2}, {0.7, 1.1, 2.0}});
  const auto f = sum(mul(custom::softplus(u, 2.0), u));
  const GradcheckReport first = gradcheck(f, {u});
  const Var<double> gu = grad(f, {u})[0];
  const GradcheckReport second = gradcheck(sum(mul(gu, gu)), {u});
  std::printf("first order: %ssecond order: %s", first.str().c_str(), second.str().c_str());

  // JSON and back: the import needs the op's factory, and replays to the same bits.
  const std::string text = to_json(g, ExportValues::inputs).dump();
  ImportOptions options;
  options.ops = custom::make_softplus;
  const auto back = graph_from_json<double>(text, options);
  const bool same = back->node(y.id()).value() == y.value();
  std::printf("JSON round trip: %s\n", same ? "same values" : "values differ");

  // ONNX, through the op's lowering.
  const std::string onnx = to_onnx_bytes(g);
  std::printf("ONNX model: %zu bytes\n", onnx.size());

  const bool ok = first.passed && second.passed && same && !onnx.empty();
  std::printf("%s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
