#include <cstdio>
#include <xgrad/xgrad.hpp>

int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  xgrad::Graph<double> g;
  auto x = g.input("x", xgrad::he_normal<double>({8, 5, 16}, 0));  // stand-in data: (B, T, d_model)
  auto mask = xgrad::causal_mask(5, 5);                             // each token sees itself and its past
  auto teacher = xgrad::multi_head_attention(x, x, xgrad::attention_params(g, 16, 1, "teacher"), 4, mask);
  auto p = xgrad::attention_params(g, 16, 2, "student");            // W_q, W_k, W_v, W_o and biases
  auto loss = xgrad::mse_loss(xgrad::multi_head_attention(x, x, p, 4, mask), teacher);
  std::vector<xgrad::Var<double>> params = {p.w_q, p.b_q, p.w_k, p.b_k, p.w_v, p.b_v, p.w_o, p.b_o};
  auto grads = xgrad::grad(loss, params);                           // backward nodes, built once
  xgrad::Adam<double> adam(params, 0.01);
  for (int step = 0; step <= 300; ++step) {
    if (step % 100 == 0) std::printf("step %d  loss %.2e\n", step, loss.value()());
    adam.step(grads);  // parameters move in place ...
    g.replay();        // ... and the same graph recomputes the loss and its gradients
  }
}
