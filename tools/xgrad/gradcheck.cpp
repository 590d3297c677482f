// xgrad gradcheck: attention's VJPs against finite differences, for files or random inputs.
#include <cstdio>
#include <string>

#include <xgrad/xgrad.hpp>

#include "cli.hpp"

namespace xgrad::tool {

namespace {

// A tolerance for the help, in short scientific notation: "1e-7", "2.5e-4".
std::string scientific(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6e", x);  // "1.000000e-07"
  std::string s = text;
  const std::size_t e = s.find('e');
  std::size_t end = e;
  while (s[end - 1] == '0') --end;
  if (s[end - 1] == '.') --end;
  std::string exponent = s.substr(e + 1);  // "-07"
  const std::size_t digits = exponent.find_first_not_of("+-0");
  exponent = (exponent[0] == '-' ? "-" : "") + (digits == std::string::npos ? "0" : exponent.substr(digits));
  return s.substr(0, end) + "e" + exponent;
}

// The defaults come from lib/gradcheck.hpp, where they are defined.
std::string help_text() {
  const GradcheckOptions defaults;
  const GradcheckTolerance f64 = gradcheck_float64_tolerance, f32 = gradcheck_float32_tolerance;
  return "usage: xgrad gradcheck (--q Q --k K --v V | --shape TQ,TK,DK,DV [--seed N]) [--dtype float32|float64]\n"
         "                       [--impl composed|fused]\n"
         "\n"
         "Checks the gradients of attention w.r.t. q, k and v (the VJPs of the graph) against central\n"
         "finite differences in float64, and prints the worst entry of each input and PASS or FAIL.\n"
         "Every Jacobian entry is compared when out.size * (q.size + k.size + v.size) <= " +
         std::to_string(defaults.full_limit) + ", else\n" + std::to_string(defaults.projections) +
         " random projections v^T J u per input. Tolerance |numeric - analytic| <= atol + rtol |analytic|:\n"
         "float64 atol " + scientific(f64.atol) + ", rtol " + scientific(f64.rtol) + "; float32 atol " + scientific(f32.atol) +
         ", rtol " + scientific(f32.rtol) + ".\n"
         "\n" +
         input_options_help +
         "\n"
         "exit status: 0 PASS, 1 FAIL, 2 bad usage or input or out of memory (one line on stderr)\n";
}

const std::string help = help_text();

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

const Command gradcheck_command = {"gradcheck", "check attention's gradients against finite differences", help.c_str(),
                                   run};

}  // namespace xgrad::tool
