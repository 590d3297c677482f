// The spec's documented example through xgrad: the output of softmax(q k^T / sqrt(d_k)) v and
// the gradients of sum(output) w.r.t. q, k and v, in float32 as in the spec.
//
//   q = [[ln 2], [0]], k = [[1], [0]], v = [[3, 0], [0, 6]]  ->  [[2, 2], [1.5, 3]]
#include <cmath>
#include <iostream>

#include <xgrad/xgrad.hpp>

int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  xgrad::Graph<float> g;
  const auto q = g.input("q", {{std::log(2.0f)}, {0.0f}});  // (T_q, d_k) = (2, 1)
  const auto k = g.input("k", {{1.0f}, {0.0f}});            // (T_k, d_k) = (2, 1)
  const auto v = g.input("v", {{3.0f, 0.0f}, {0.0f, 6.0f}});  // (T_k, d_v) = (2, 2)

  // The closed form of each array printed is in <xgrad/lib/documented_example.hpp>;
  // `xgrad example` prints them side by side.
  const auto a = xgrad::attention_nodes(q, k, v);
  std::cout << "weights = " << xgrad::format_array(a.weights.value()) << "\n";
  std::cout << "output  = " << xgrad::format_array(a.output.value()) << "\n";

  // Gradients of sum(output): grad_out defaults to ones. Each is a Var, a node of the same graph.
  const auto grads = xgrad::grad(a.output, {q, k, v});
  std::cout << "grad_q  = " << xgrad::format_array(grads[0].value()) << "\n";
  std::cout << "grad_k  = " << xgrad::format_array(grads[1].value()) << "\n";
  std::cout << "grad_v  = " << xgrad::format_array(grads[2].value()) << "\n";
  std::cout << "graph: " << g.size() << " nodes (forward and backward)\n";
}
