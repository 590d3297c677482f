// gelu
// forward: y = 0.5 x (1 + erf(x / sqrt 2))                               (none)
//          y = 0.5 x (1 + tanh(u)), u = c (x + k x^3), c = sqrt(2 / pi), k = 0.044715   (tanh)
// VJP:     grad_x = gelu_vjp(x, g)
// saves:   nothing beyond x.
//
// gelu_vjp (x, g of one shape)
// forward: z = g gelu'(x) = g (Phi(x) + x phi(x)), Phi the normal CDF, phi its density    (none)
//            = g (0.5 (1 + t) + 0.5 x (1 - t^2) u'), t = tanh(u), u' = c (1 + 3 k x^2)   (tanh)
// VJP:     grad_g = gelu_vjp(x, G)
//          grad_x = G g gelu''(x) = G g phi(x) (2 - x^2)                                   (none)
//                 = G g (1 - t^2) (u' - x t u'^2 + 3 c k x^2)                              (tanh)
//          as nodes of x, g and G, so derivatives of every order exist
// saves:   nothing beyond x and g.
#include <xgrad/ops/gelu.hpp>

#include <algorithm>
#include <cmath>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/kernels/vector_math.hpp>
#include <xgrad/ops/registry.hpp>
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

// Element visits of one element beyond reading the inputs and writing the output
// (bench/work_bench.cpp): an erf or a tanh and a few multiplies; the VJP's adds an exp.
constexpr double cost = 8;
constexpr double vjp_cost = 12;

// Elements a block of the erf form works on at once, in arrays on the stack (vector_erf, row_exp).
constexpr std::size_t block = 256;

// f(begin, n, scratch) on blocks of at most `block` elements covering [0, count), spread over the
// thread pool; scratch holds `block` T for f's use.
template <class T, class F>
void in_blocks(std::size_t count, F f) {
  detail::parallel_for((count + block - 1) / block, 8 * block, [&](std::size_t first, std::size_t last) {
    for (std::size_t b = first; b < last; ++b) {
      T scratch[block];
      const std::size_t begin = b * block;
      f(begin, std::min(block, count - begin), scratch);
    }
  });
}

class GeluOp final : public OpFor<GeluOp> {
 public:
  explicit GeluOp(GeluApprox approx) : m_approx(approx) {}

  std::string name() const override { return "gelu"; }
  // ONNX: the forward's formula in Mul, Add, erf (elementwise::onnx_erf) or Tanh nodes, its roundings in its order.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string& x = n.inputs[0];
    const std::string half_x = e.op("Mul", {x, e.scalar(0.5)});
    if (m_approx == GeluApprox::none) {
      const std::string t = elementwise::onnx_erf(e, e.op("Mul", {x, e.factor(sqrt_half, n.input_shapes[0])}));
      return {e.op("Mul", {half_x, e.op("Add", {e.scalar(1), t})})};
    }
    const std::string cubic = e.op("Mul", {e.op("Mul", {e.op("Mul", {e.factor(kappa, n.input_shapes[0]), x}), x}), x});
    const std::string t = e.op("Tanh", {e.op("Mul", {e.scalar(sqrt_2_over_pi), e.op("Add", {x, cubic})})});
    return {e.op("Mul", {e.op("Mul", {e.scalar(0.5), x}), e.op("Add", {e.scalar(1), t})})};
  }
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
    // As PyTorch's GeluKernel.cpp (scalar path), in T; erf over blocks (vector_erf).
    if (m_approx == GeluApprox::none) {
      in_blocks<T>(y.size(), [&](std::size_t i, std::size_t n, T* t) {
        for (std::size_t j = 0; j < n; ++j) t[j] = src[i + j] * T(sqrt_half);
        detail::vector_erf(t, t, n);
        for (std::size_t j = 0; j < n; ++j) dst[i + j] = src[i + j] * T(0.5) * (T(1) + t[j]);
      });
      return;
    }
    detail::parallel_for(y.size(), 8, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const T v = src[i];
        dst[i] = T(0.5) * v * (T(1) + std::tanh(T(sqrt_2_over_pi) * (v + T(kappa) * v * v * v)));
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {gelu_vjp(v.x[0], v.grad_out, m_approx)};
  }

 private:
  GeluApprox m_approx;
};

class GeluVjpOp final : public OpFor<GeluVjpOp> {
 public:
  explicit GeluVjpOp(GeluApprox approx) : m_approx(approx) {}

  std::string name() const override { return "gelu_vjp"; }
  // ONNX: run_forward's formula in Mul, Add, Sub, erf (elementwise::onnx_erf), Exp or Tanh nodes, in its order.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string& x = n.inputs[0];
    const std::string& g = n.inputs[1];
    const auto mul = [&](const std::string& a, const std::string& b) { return e.op("Mul", {a, b}); };
    const auto add = [&](const std::string& a, const std::string& b) { return e.op("Add", {a, b}); };
    const std::string x2 = mul(x, x);
    if (m_approx == GeluApprox::none) {
      const std::string erf = elementwise::onnx_erf(e, mul(x, e.factor(sqrt_half, n.input_shapes[0])));
      const std::string q = e.op("Exp", {mul(x2, e.scalar(-0.5))});
      const std::string cdf_part = mul(add(g, mul(g, erf)), e.scalar(0.5));
      return {add(cdf_part, mul(mul(g, x), mul(q, e.scalar(inv_sqrt_2pi))))};
    }
    const std::string t =
        e.op("Tanh", {mul(add(x, mul(mul(x, x2), e.scalar(kappa))), e.scalar(sqrt_2_over_pi))});
    const std::string gx = mul(g, x);
    const std::string h = e.op("Sub", {gx, mul(gx, mul(t, t))});
    const std::string inner = mul(add(h, mul(mul(h, x2), e.scalar(3 * kappa))), e.scalar(0.5 * sqrt_2_over_pi));
    return {add(mul(add(g, mul(g, t)), e.scalar(0.5)), inner)};
  }
  std::size_t arity() const override { return 2; }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element
  Json attrs() const override { return {{key_approximate, approx_names[static_cast<int>(m_approx)]}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!shapes_equal(x[0], x[1])) {
      throw error("x and grad_out differ in shape: x is " + shape_str(x[0]) + ", grad_out is " + shape_str(x[1]));
    }
    return x[0];
  }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + vjp_cost * element_count(y[0]);
  }

  // Each element with the roundings, in the order, of the nodes gelu's VJP was built of before it
  // was one node (scale, erf, exp, mul, add; tanh), erf and exp over blocks: vector_erf and
  // row_exp (ops/kernels/vexp.hpp) where the nodes had std::erf and std::exp.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* xs = x[0]->data();
    const T* gs = x[1]->data();
    T* dst = y.data();
    if (m_approx == GeluApprox::none) {
      in_blocks<T>(y.size(), [&](std::size_t i, std::size_t n, T* e) {
        T q[block];
        for (std::size_t j = 0; j < n; ++j) {
          const T v = xs[i + j];
          e[j] = v * T(sqrt_half);
          q[j] = (v * v) * T(-0.5);
        }
        detail::vector_erf(e, e, n);
        detail::row_exp(q, T(0), q, n, 1);
        for (std::size_t j = 0; j < n; ++j) {
          const T v = xs[i + j], g = gs[i + j];
          const T cdf_part = (g + g * e[j]) * T(0.5);  // g Phi(x)
          const T density = q[j] * T(inv_sqrt_2pi);    // phi(x)
          dst[i + j] = cdf_part + (g * v) * density;
        }
      });
      return;
    }
    detail::parallel_for(y.size(), 16, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        const T v = xs[i], g = gs[i];
        const T x2 = v * v;
        const T t = std::tanh((v + (v * x2) * T(kappa)) * T(sqrt_2_over_pi));
        const T gx = g * v;
        const T h = gx - gx * (t * t);  // g x (1 - t^2)
        const T inner = (h + (h * x2) * T(3 * kappa)) * T(0.5 * sqrt_2_over_pi);
        dst[i] = (g + g * t) * T(0.5) + inner;
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& x = v.x[0];
    const Var<T>& g = v.x[1];
    const Var<T>& gz = v.grad_out;
    std::vector<Var<T>> grads(2);
    if (v.wanted[1]) grads[1] = gelu_vjp(x, gz, m_approx);
    if (!v.wanted[0]) return grads;
    const Var<T> x2 = mul(x, x);
    const Var<T> m = mul(gz, g);
    if (m_approx == GeluApprox::none) {
      const Var<T> h = mul(m, scale(exp(scale(x2, -0.5)), inv_sqrt_2pi));  // G g phi(x)
      grads[0] = sub(scale(h, 2), mul(h, x2));                                // G g phi(x) (2 - x^2)
      return grads;
    }
    const Var<T> t = tanh(scale(add(x, scale(mul(x, x2), kappa)), sqrt_2_over_pi));
    const Var<T> ms = sub(m, mul(m, mul(t, t)));                               // G g (1 - t^2)
    const auto times_du = [&](const Var<T>& a) {                              // a u'
      return scale(add(a, scale(mul(a, x2), 3 * kappa)), sqrt_2_over_pi);
    };
    const Var<T> a = times_du(ms);
    grads[0] = add(sub(a, mul(mul(times_du(a), x), t)), scale(mul(ms, x2), 3 * kappa * sqrt_2_over_pi));
    return grads;
  }

 private:
  GeluApprox m_approx;
};

}  // namespace

template <class T>
Var<T> gelu(const Var<T>& x, GeluApprox approx) {
  return x.graph().apply(std::make_shared<GeluOp>(approx), {x});
}

template <class T>
Var<T> gelu_vjp(const Var<T>& x, const Var<T>& grad_out, GeluApprox approx) {
  return x.graph().apply(std::make_shared<GeluVjpOp>(approx), {x, grad_out});
}

namespace {
GeluApprox approx_from(const JsonCursor& attrs) {
  attrs.check_object({key_approximate});
  const JsonCursor c = attrs[key_approximate];
  const std::string name = c.string();
  for (int i = 0; i < 2; ++i) {
    if (name == approx_names[i]) return static_cast<GeluApprox>(i);
  }
  c.fail("expected \"none\" or \"tanh\", got \"" + name + "\"");
}
}  // namespace

std::shared_ptr<const Op> make_gelu_op(const JsonCursor& attrs) { return std::make_shared<GeluOp>(approx_from(attrs)); }
std::shared_ptr<const Op> make_gelu_vjp_op(const JsonCursor& attrs) {
  return std::make_shared<GeluVjpOp>(approx_from(attrs));
}

template Var<float> gelu(const Var<float>&, GeluApprox);
template Var<double> gelu(const Var<double>&, GeluApprox);
template Var<float> gelu_vjp(const Var<float>&, const Var<float>&, GeluApprox);
template Var<double> gelu_vjp(const Var<double>&, const Var<double>&, GeluApprox);

}  // namespace xgrad
