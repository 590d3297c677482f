// xgrad example: the documented example of the spec, its gradients and a gradcheck verdict.
#include <cstdio>

#include <xtensor/xmath.hpp>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad example [--dtype float32|float64]\n"
    "\n"
    "Runs the spec's documented example through the graph,\n"
    "  q = [[ln 2], [0]], k = [[1], [0]], v = [[3, 0], [0, 6]],\n"
    "  out = softmax(q k^T / sqrt(d_k)) v = [[2, 2], [1.5, 3]],\n"
    "prints the output and the gradients of sum(out) beside their closed forms, then checks\n"
    "every Jacobian entry against central finite differences in float64 (gradcheck).\n"
    "\n"
    "  --dtype D   float32 (default, as in the spec) or float64\n"
    "\n"
    "exit status: 0 all values match and gradcheck passes, 1 a check failed, 2 bad usage\n";

// Prints `name = value`, its closed form, and whether they agree within tol; returns that.
template <class T>
bool show(const char* name, const xt::xarray<T>& value, const ClosedForm& closed_form, double tol) {
  const double diff = xt::amax(xt::abs(xt::cast<double>(value) - closed_form.value))();
  const bool ok = diff <= tol;
  std::printf("  %-8s = %-28s closed form %s: %s (max abs diff %.2g)\n", name, format_array(value).c_str(),
              closed_form.formula, ok ? "ok" : "MISMATCH", diff);
  return ok;
}

template <class T>
int run_example() {
  const DocumentedExample e = documented_example();
  Graph<T> g;
  const Var<T> q = g.input("q", xt::cast<T>(e.q));
  const Var<T> k = g.input("k", xt::cast<T>(e.k));
  const Var<T> v = g.input("v", xt::cast<T>(e.v));
  const AttentionNodes<T> a = attention_nodes(q, k, v);
  const std::vector<Var<T>> grads = grad(a.output, {q, k, v});

  // float32 results are compared within a few float32 ulp of the exact values.
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  std::printf("Documented example (spec), %s:\n", dtype_name<T>());
  std::printf("  q = %s, k = %s, v = %s\n", format_array(q.value()).c_str(),
              format_array(k.value()).c_str(), format_array(v.value()).c_str());
  bool ok = show("weights", a.weights.value(), e.weights, tol);
  ok &= show("output", a.output.value(), e.output, tol);
  std::printf("Gradients of sum(output):\n");
  ok &= show("grad_q", grads[0].value(), e.grad_q, tol);
  ok &= show("grad_k", grads[1].value(), e.grad_k, tol);
  ok &= show("grad_v", grads[2].value(), e.grad_v, tol);
  const GradcheckReport report = gradcheck(a.output, {q, k, v});
  std::printf("%s", report.str().c_str());
  return ok && report.passed ? 0 : 1;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, {{"--dtype", true}});
  const std::string dtype = o.choice("--dtype", {"float32", "float64"}, "float32");
  return with_dtype(dtype, [](auto tag) { return run_example<decltype(tag)>(); });
}

}  // namespace

const Command example_command = {"example", "the spec's documented example, its gradients and a gradcheck",
                                 help, run};

}  // namespace xgrad::tool
