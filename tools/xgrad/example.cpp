// xgrad example: the documented example of the spec, its gradients and a gradcheck verdict.
#include <cmath>
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
bool show(const char* name, const xt::xarray<T>& value, const char* closed_form,
          std::initializer_list<std::initializer_list<double>> rows, double tol) {
  const double diff = xt::amax(xt::abs(xt::cast<double>(value) - matrix(rows)))();
  const bool ok = diff <= tol;
  std::printf("  %-8s = %-28s closed form %s: %s (max abs diff %.2g)\n", name, format_array(value).c_str(),
              closed_form, ok ? "ok" : "MISMATCH", diff);
  return ok;
}

template <class T>
int run_example() {
  const double ln2 = std::log(2.0);
  Graph<T> g;
  const Var<T> q = g.input("q", {{static_cast<T>(ln2)}, {T(0)}});
  const Var<T> k = g.input("k", {{T(1)}, {T(0)}});
  const Var<T> v = g.input("v", {{T(3), T(0)}, {T(0), T(6)}});
  const AttentionNodes<T> a = attention_nodes(q, k, v);
  const std::vector<Var<T>> grads = grad(a.output, {q, k, v});

  // float32 results are compared within a few float32 ulp of the exact values.
  const double tol = std::is_same_v<T, float> ? 1e-6 : 1e-14;
  std::printf("Documented example (spec), %s:\n", dtype_name<T>());
  std::printf("  q = %s, k = %s, v = %s\n", format_array(q.value()).c_str(),
              format_array(k.value()).c_str(), format_array(v.value()).c_str());
  bool ok = show("weights", a.weights.value(), "[[2/3, 1/3], [1/2, 1/2]]",
                 {{2.0 / 3, 1.0 / 3}, {0.5, 0.5}}, tol);
  ok &= show("output", a.output.value(), "[[2, 2], [1.5, 3]]", {{2.0, 2.0}, {1.5, 3.0}}, tol);
  std::printf("Gradients of sum(output):\n");
  ok &= show("grad_q", grads[0].value(), "[[-2/3], [-3/4]]", {{-2.0 / 3}, {-0.75}}, tol);
  ok &= show("grad_k", grads[1].value(), "[[-(2/3) ln 2], [(2/3) ln 2]]",
             {{-2.0 / 3 * ln2}, {2.0 / 3 * ln2}}, tol);
  ok &= show("grad_v", grads[2].value(), "[[7/6, 7/6], [5/6, 5/6]]",
             {{7.0 / 6, 7.0 / 6}, {5.0 / 6, 5.0 / 6}}, tol);
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
