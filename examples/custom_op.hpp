// A program's own op, end to end (docs/custom-ops.md): softplus with a slope,
//   y = log(1 + exp(beta x)) / beta        (torch.nn.functional.softplus(x, beta), threshold off)
// its VJP built of existing ops (so second order works), its attribute in JSON, its factory for
// graph_from_json, and its ONNX lowering.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include <xgrad/graph/json.hpp>
#include <xgrad/xgrad.hpp>

namespace custom {

class Softplus final : public xgrad::OpFor<Softplus> {
 public:
  explicit Softplus(double beta) : m_beta(beta) {
    if (!(beta > 0) || !std::isfinite(beta)) {
      throw xgrad::error("softplus: beta must be finite and > 0, got " + xgrad::number_str(beta));
    }
  }
  double beta() const { return m_beta; }

  // What the graph asks of every op: its name in JSON, its input count, its output's shape (or
  // an error naming the shapes, which the graph prefixes with "softplus (node N): ").
  std::string name() const override { return "softplus"; }
  std::size_t arity() const override { return 1; }
  xgrad::Shape infer_shape(const std::vector<xgrad::Shape>& x) const override { return x[0]; }

  // The forward, for float and double alike: y already has the shape infer_shape gave.
  // log1p(exp(-|z|)) + max(z, 0) is log(1 + exp(z)) without overflow for large z.
  template <class T>
  void run_forward(const xgrad::Args<T>& x, xt::xarray<T>& y) const {
    const T beta = static_cast<T>(m_beta);
    const T* in = x[0]->data();
    T* out = y.data();
    for (std::size_t i = 0; i < y.size(); ++i) {
      const T z = beta * in[i];
      out[i] = (std::log1p(std::exp(-std::abs(z))) + std::max(z, T(0))) / beta;
    }
  }

  // The VJP as graph nodes: dy/dx = sigmoid(beta x), so grad_x = grad_out * sigmoid(beta x).
  // Made of nodes, it is differentiable again (second order).
  template <class T>
  std::vector<xgrad::Var<T>> run_vjp(const xgrad::VjpArgs<T>& a) const {
    return {xgrad::mul(a.grad_out, xgrad::sigmoid(xgrad::scale(a.x[0], m_beta)))};
  }

  // Its attributes, for the JSON export; make_softplus reads them back.
  xgrad::Json attrs() const override { return {{"beta", m_beta}}; }

  // Its ONNX lowering: Softplus(beta x) / beta (ONNX's Softplus has no beta).
  std::vector<std::string> to_onnx(xgrad::OnnxEmitter& e, const xgrad::OnnxNode& n) const override {
    const std::string z = e.op("Mul", {n.inputs[0], e.scalar(m_beta)});
    return {e.op("Div", {e.op("Softplus", {z}), e.scalar(m_beta)})};
  }

 private:
  double m_beta;
};

// The function a program calls: one node in x's graph.
template <class T>
xgrad::Var<T> softplus(const xgrad::Var<T>& x, double beta = 1.0) {
  return x.graph().apply(std::make_shared<Softplus>(beta), {x});
}

// The factory graph_from_json uses for the ops xgrad does not know (ImportOptions::ops):
// nullptr for a name that is not ours, so the import says "unknown op".
inline std::shared_ptr<const xgrad::Op> make_softplus(const std::string& op, const xgrad::JsonCursor& attrs) {
  if (op != "softplus") return nullptr;
  return std::make_shared<Softplus>(attrs["beta"].number());
}

}  // namespace custom
