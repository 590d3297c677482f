// forward: y = 0.5 x (1 + erf(x / sqrt 2))                               (none)
//          y = 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3)   (tanh)
// VJP:     grad_x = g (Phi(x) + x phi(x)), Phi the normal CDF, phi its density      (none)
//          grad_x = g (0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 0.044715 x^2)),
//          t = tanh(u)                                                             (tanh)
//          both as nodes of x and g, so the VJP has a VJP
// saves:   nothing beyond x.
#include <xgrad/ops/gelu.hpp>

#include <cmath>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad {

namespace {

// Attribute keys and values, for attrs() and the factory alike.
constexpr const char* key_approximate = "approximate";
constexpr const char* approx_names[] = {"none", "tanh"};

constexpr double sqrt_half = 0.70710678118654752440;       // 1 / sqrt(2)
constexpr double inv_sqrt_2pi = 0.39894228040143267794;    // 1 / sqrt(2 pi), the normal density at 0
constexpr double sqrt_2_over_pi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kappa = 0.044715;

// Element visits of one element beyond reading x and writing y: an erf or a tanh and a few
// multiplies (bench/work_bench.cpp).
constexpr double cost = 8;

class GeluOp final : public OpFor<GeluOp> {
 public:
  explicit GeluOp(GeluApprox approx) : m_approx(approx) {}

  std::string name() const override { return "gelu"; }
  std::size_t arity() const override { return 1; }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element
  Json attrs() const override { return {{key_approximate, approx_names[static_cast<int>(m_approx)]}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + cost * element_count(y[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    // As PyTorch's GeluKernel.cpp (scalar path), in T.
    const auto run = [&](auto f) {
      detail::parallel_for(y.size(), 8, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) dst[i] = f(src[i]);
      });
    };
    if (m_approx == GeluApprox::none) {
      run([](T v) { return v * T(0.5) * (T(1) + std::erf(v * T(sqrt_half))); });
    } else {
      run([](T v) { return T(0.5) * v * (T(1) + std::tanh(T(sqrt_2_over_pi) * (v + T(kappa) * v * v * v))); });
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& x = v.x[0];
    const Var<T>& g = v.grad_out;
    if (m_approx == GeluApprox::none) {
      const Var<T> cdf_part = scale(add(g, mul(g, erf(scale(x, sqrt_half)))), 0.5);  // g Phi(x)
      const Var<T> density = scale(exp(scale(mul(x, x), -0.5)), inv_sqrt_2pi);     // phi(x)
      return {add(cdf_part, mul(mul(g, x), density))};
    }
    const Var<T> x2 = mul(x, x);
    const Var<T> t = tanh(scale(add(x, scale(mul(x, x2), kappa)), sqrt_2_over_pi));
    const Var<T> gx = mul(g, x);
    const Var<T> h = sub(gx, mul(gx, mul(t, t)));  // g x (1 - t^2)
    const Var<T> inner = scale(add(h, scale(mul(h, x2), 3 * kappa)), 0.5 * sqrt_2_over_pi);
    return {add(scale(add(g, mul(g, t)), 0.5), inner)};
  }

 private:
  GeluApprox m_approx;
};

}  // namespace

template <class T>
Var<T> gelu(const Var<T>& x, GeluApprox approx) {
  return x.graph().apply(std::make_shared<GeluOp>(approx), {x});
}

std::shared_ptr<const Op> make_gelu_op(const JsonCursor& attrs) {
  attrs.check_object({key_approximate});
  const JsonCursor c = attrs[key_approximate];
  const std::string name = c.string();
  for (int i = 0; i < 2; ++i) {
    if (name == approx_names[i]) return std::make_shared<GeluOp>(static_cast<GeluApprox>(i));
  }
  c.fail("expected \"none\" or \"tanh\", got \"" + name + "\"");
}

template Var<float> gelu(const Var<float>&, GeluApprox);
template Var<double> gelu(const Var<double>&, GeluApprox);

}  // namespace xgrad
