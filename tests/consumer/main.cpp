// Built against the installed package: exits 0 iff the documented example comes out right.
#include <cmath>
#include <cstdio>

#include <xgrad/xgrad.hpp>

int main() {
  xgrad::Graph<double> g;
  const auto q = g.input("q", {{std::log(2.0)}, {0.0}});
  const auto k = g.input("k", {{1.0}, {0.0}});
  const auto v = g.input("v", {{3.0, 0.0}, {0.0, 6.0}});
  const auto out = xgrad::attention(q, k, v);
  const auto grad_q = xgrad::grad(out, {q})[0];
  std::printf("out = %s, grad_q = %s\n", xgrad::format_array(out.value()).c_str(),
              xgrad::format_array(grad_q.value()).c_str());
  const bool ok = std::abs(out.value()(1, 0) - 1.5) < 1e-12 && std::abs(grad_q.value()(1, 0) + 0.75) < 1e-12;
  // A checkpoint through libzip, which the installed package finds for the consumer.
  const std::map<std::string, xt::xarray<double>> tensors = {{"v", v.value()}};
  xgrad::save_tensors("consumer.npz", tensors, {{"from", "consumer"}});
  const auto back = xgrad::load_tensors<double>("consumer.npz");
  const bool ckpt_ok = back.metadata.at("from") == "consumer" && *back.find("v") == v.value();
  std::printf("checkpoint: %s\n", ckpt_ok ? "read back" : "differs");
  return ok && ckpt_ok ? 0 : 1;
}
