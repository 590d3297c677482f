#include <cmath>
#include <iostream>
#include <xgrad/xgrad.hpp>

int main() {
  xgrad::Graph<double> g;
  auto q = g.input("q", {{std::log(2.0)}, {0.0}});  // (T_q, d_k)
  auto k = g.input("k", {{1.0}, {0.0}});            // (T_k, d_k)
  auto v = g.input("v", {{3.0, 0.0}, {0.0, 6.0}});  // (T_k, d_v)
  auto out = xgrad::attention(q, k, v);             // softmax(q k^T / sqrt(d_k)) v
  auto grads = xgrad::grad(out, {q, k, v});         // d sum(out) / d q, k, v: graph nodes too
  std::cout << xgrad::format_array(out.value()) << "\n"        // [[2, 2], [1.5, 3]]
            << xgrad::format_array(grads[0].value()) << "\n"   // [[-0.666667], [-0.75]]
            << xgrad::gradcheck(out, {q, k, v}).str();          // ...: PASS
}
