// Built against the installed package: exits 0 iff the documented example comes out right, and
// the transformer building blocks, by their public names, in float32 and float64.
#include <cmath>
#include <cstdio>

#include <xgrad/lib/onnx_export.hpp>
#include <xgrad/lib/onnx_import.hpp>
#include <xgrad/xgrad.hpp>

// Every block of a pre-LN transformer layer once, checked on hand values; true if all agree.
template <class T>
bool building_blocks(const char* file) {
  using namespace xgrad;
  const double tol = sizeof(T) == 4 ? 1e-6 : 1e-12;
  const auto near = [&](double a, double b) { return std::abs(a - b) <= tol * (1 + std::abs(b)); };
  Graph<T> g;
  const auto table = g.parameter("table", xt::xarray<T>{{1, 2, 3}, {4, 5, 6}});
  const auto ids = g.indices("ids", xt::xarray<std::int64_t>{{1, 0}, {1, 1}});      // (2, 2)
  const auto fids = g.input("fids", xt::xarray<T>{1, 0});                        // ids as values
  const auto x = embedding(table, ids);                                          // (2, 2, 3)
  const auto gamma = g.parameter("gamma", xt::xarray<T>{1, 1, 1});
  const auto beta = g.parameter("beta", xt::xarray<T>{0, 0, 0});
  const auto w = g.parameter("w", xt::xarray<T>{{1, 0}, {0, 1}, {1, 1}});        // (3, 2)
  const auto h = layer_norm(x, gamma, beta, 0.0);                               // rows (4, 5, 6): -r, 0, r
  const auto y = matmul(h, w);                                                  // (2, 2, 3) @ (3, 2)
  const auto z = gelu(y) + gelu(y, GeluApprox::tanh) * 0.5 - tanh(y) / 2.0 + exp(neg(sqrt(y * y + 1.0))) - log(2.0 + y);
  const auto d = dropout(z, 0.5, 7);
  const auto loss = mean(d) + mean(sub(embedding(table, fids), div(table, table)));
  const double r = std::sqrt(1.5);
  bool ok = near(h.value()(0, 0, 0), -r) && near(h.value()(0, 0, 2), r) && near(y.value()(0, 0, 1), r);
  ok = ok && embedding(table, fids).value()(0, 2) == T(6);
  g.set_training(false);
  g.replay();
  ok = ok && d.value() == z.value();  // evaluation: the identity
  g.set_training(true);
  g.set_step(1);
  g.replay();
  const auto params = g.parameters();
  const auto grads = grad(loss, params);
  AdamW<T> opt(params, 1e-3);
  opt.set_lr(5e-4);
  const double norm = clip_grad_norm(grads, 1e9);
  opt.step(grads);
  save_parameters(g, file, {{"dtype", sizeof(T) == 4 ? "float32" : "float64"}});
  const auto meta = load_parameters(g, file);
  ok = ok && params.size() == 4 && norm > 0 && opt.lr() == 5e-4 && meta.at("dtype") == (sizeof(T) == 4 ? "float32" : "float64");
  std::printf("building blocks (%s, %s): %s\n", sizeof(T) == 4 ? "float32" : "float64", file, ok ? "as expected" : "differ");
  return ok;
}

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
  const bool blocks_ok = building_blocks<float>("consumer.safetensors") && building_blocks<double>("consumer_f64.npz");
  // The ONNX importer: PyTorch's encoder layer, its input shape fixed by the model.
  const auto layer = xgrad::import_onnx<float>(XGRAD_ONNX_MODEL);
  const bool onnx_ok = layer->outputs().count("y") == 1 && layer->var(layer->outputs().at("y")).shape() == xgrad::Shape{2, 5, 16};
  std::printf("onnx import: %s\n", onnx_ok ? "as expected" : "differs");
  // And out again, forward and backward, then back in: the same output.
  const auto again = xgrad::import_onnx_bytes<float>(xgrad::to_onnx_bytes(*layer), "exported");
  const bool export_ok = again->outputs().count("y") == 1 &&
                         again->var(again->outputs().at("y")).value() == layer->var(layer->outputs().at("y")).value();
  std::printf("onnx export: %s\n", export_ok ? "as expected" : "differs");
  return ok && ckpt_ok && blocks_ok && onnx_ok && export_ok ? 0 : 1;
}
