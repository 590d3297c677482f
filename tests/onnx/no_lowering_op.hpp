// An op without a proper ONNX lowering, for the tests of to_onnx's refusals (suites onnx_export
// and errors): every op of the registry has one.
#pragma once

#include <xgrad/graph/graph.hpp>

namespace xgrad::test {

// y = x; its VJP passes grad_out through. As "frobnicate" it has no lowering (Op's default
// refuses); as "two_names" its lowering breaks the contract: two values for one output.
class NoLoweringOp final : public OpFor<NoLoweringOp> {
 public:
  explicit NoLoweringOp(bool two_names = false) : m_two_names(two_names) {}
  std::string name() const override { return m_two_names ? "two_names" : "frobnicate"; }
  std::size_t arity() const override { return 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    if (!m_two_names) return Op::to_onnx(e, n);
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

 private:
  bool m_two_names;
};

}  // namespace xgrad::test
