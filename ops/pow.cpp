// forward: y = x^p                             x (...) -> y (...), p a finite number
// VJP:     grad_x = grad_out * scale(pow(x, p - 1), p); 0 (zeros) for p = 0, grad_out for p = 1
// saves:   p.
#include <xgrad/ops/pow.hpp>

#include <cmath>

#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad {

namespace {

class PowOp final : public AttrOp<PowOp, double> {
 public:
  static constexpr const char* key = "exponent";
  explicit PowOp(double p) : AttrOp(p) {
    if (!std::isfinite(p)) throw error("pow: the exponent must be finite, got " + number_str(p));
  }

  std::string name() const override { return "pow"; }
  // ONNX: Pow of x and the exponent, a scalar initializer of the graph's float type.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Pow", {n.inputs[0], e.scalar(m_value)})};
  }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element
  // A libm call an element (std::pow: about as long as tanh here), none for PyTorch's forms.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + (special() ? 0 : 12) * element_count(y[0]);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    const T p = static_cast<T>(m_value);
    const double e = m_value;
    // PyTorch's forms (torch.pow(x, p), aten/src/ATen/native/cpu/PowKernel.cpp): the same bits
    // as torch, and a pass at memory speed rather than a libm call an element.
    detail::parallel_rows(y.size(), 16, [src, dst, p, e](std::size_t begin, std::size_t end) {
      const auto each = [&](auto f) {
        for (std::size_t i = begin; i < end; ++i) dst[i] = f(src[i]);
      };
      if (e == 2) each([](T v) { return v * v; });
      else if (e == 3) each([](T v) { return v * v * v; });
      else if (e == -2) each([](T v) { return T(1) / (v * v); });
      else if (e == 0.5) each([](T v) { return std::sqrt(v); });
      else if (e == -0.5) each([](T v) { return T(1) / std::sqrt(v); });
      else if (e == -1) each([](T v) { return T(1) / v; });
      else each([p](T v) { return std::pow(v, p); });
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& x = v.x[0];
    if (m_value == 0) return {zeros_like(x)};
    if (m_value == 1) return {v.grad_out};
    return {mul(v.grad_out, scale(pow(x, m_value - 1), m_value))};
  }

 private:
  // The exponent is one of those PyTorch computes without pow: 2, 3, -2, 0.5, -0.5, -1.
  bool special() const {
    for (const double e : {2.0, 3.0, -2.0, 0.5, -0.5, -1.0}) {
      if (m_value == e) return true;
    }
    return false;
  }
};

}  // namespace

template <class T>
Var<T> pow(const Var<T>& x, double p) {
  return x.graph().apply(std::make_shared<PowOp>(p), {x});
}

std::shared_ptr<const Op> make_pow_op(const JsonCursor& attrs) {
  attrs.check_object({PowOp::key});
  const JsonCursor c = attrs[PowOp::key];
  const double p = c.number();
  if (!std::isfinite(p)) c.fail("expected a finite number, got " + number_str(p));
  return std::make_shared<PowOp>(p);
}

template Var<float> pow(const Var<float>&, double);
template Var<double> pow(const Var<double>&, double);

}  // namespace xgrad
