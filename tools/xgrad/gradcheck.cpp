// xgrad gradcheck: attention's VJPs against finite differences, for files or random inputs.
#include <cstdio>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

const char* const help =
    "usage: xgrad gradcheck (--q Q --k K --v V | --shape TQ,TK,DK,DV [--seed N]) [--dtype float32|float64]\n"
    "                       [--impl composed|fused]\n"
    "\n"
    "Checks the gradients of attention w.r.t. q, k and v (the VJPs of the graph) against central\n"
    "finite differences in float64, and prints the worst entry of each input and PASS or FAIL.\n"
    "Every Jacobian entry is compared when out.size * (q.size + k.size + v.size) <= 10000, else\n"
    "8 random projections v^T J u per input. Tolerance |numeric - analytic| <= atol + rtol |analytic|:\n"
    "float64 atol 1e-7, rtol 1e-5; float32 atol 1e-4, rtol 1e-3.\n"
    "\n"
    "  --q Q --k K --v V   input arrays, .npy or .json\n"
    "  --shape TQ,TK,DK,DV random inputs q (TQ, DK), k (TK, DK), v (TK, DV), standard normal;\n"
    "                      each 0 to 65536\n"
    "  --seed N            seed of the random inputs, 0 to 2^64 - 1 (default 0)\n"
    "  --dtype D           float32 or float64 (default: the inputs' dtype; float64 for --shape)\n"
    "  --impl I            composed (default): the spec's nodes, every intermediate kept; fused: one\n"
    "                      flash_attention node, memory O((T_q + T_k) d), no scores or weights kept\n"
    "\n"
    "exit status: 0 PASS, 1 FAIL, 2 bad usage or input or out of memory (one line on stderr)\n";

template <class T>
int run_gradcheck(const AttentionInputs& in) {
  AttentionGraph<T> a;
  build_attention(in, a);
  const GradcheckReport report = gradcheck(a.out, {a.q, a.k, a.v});
  std::printf("%s", report.str().c_str());
  return report.passed ? 0 : 1;
}

int run(const std::vector<std::string>& args) {
  const Options o(args, input_options);
  const AttentionInputs in = attention_inputs(o, true);
  return with_dtype(in.dtype, [&](auto tag) { return run_gradcheck<decltype(tag)>(in); });
}

}  // namespace

const Command gradcheck_command = {"gradcheck", "check attention's gradients against finite differences", help, run};

}  // namespace xgrad::tool
