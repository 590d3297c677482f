// Ops without a proper ONNX lowering, for the tests of to_onnx's refusals (suites onnx_export
// and errors): every op of the registry has one.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad::test {

// y = x, named "frobnicate"; its VJP passes grad_out through.
class NoLoweringOp final : public OpFor<NoLoweringOp> {
 public:
  std::string name() const override { return "frobnicate"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    y = *x[0];
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {v.grad_out};
  }
};

// The same op, named "two_names", whose lowering breaks the contract: two values for one output.
class TwoNamesOp final : public OpFor<TwoNamesOp> {
 public:
  std::string name() const override { return "two_names"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Identity", {n.inputs[0]}), e.op("Identity", {n.inputs[0]})};
  }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    y = *x[0];
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {v.grad_out};
  }
};

}  // namespace xgrad::test
