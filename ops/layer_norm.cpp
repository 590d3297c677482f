// forward: mean = sum(x) / d, var = sum((x - mean)^2) / d, rstd = 1 / sqrt(var + eps) per row;
//          y = (x - mean) rstd gamma + beta                     (..., d) -> (..., d), (..., 1), (..., 1)
// VJP:     xhat = (x - mean) rstd, gy = grad_y gamma, means over the last axis:
//          grad_x = rstd (gy - mean(gy) - xhat mean(gy xhat))
//                   + grad_mean / d - grad_rstd rstd^2 xhat / d
//          grad_gamma = sum over rows of grad_y xhat, grad_beta = sum over rows of grad_y
// saves:   the mean and rstd (outputs 1 and 2).
#include <xgrad/ops/layer_norm.hpp>

#include <cmath>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/mean.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_eps = "eps";

void check_eps(double eps) {
  if (!(eps >= 0) || !std::isfinite(eps)) {
    throw error("layer_norm: eps must be finite and >= 0, got " + number_str(eps));
  }
}

class LayerNormOp final : public OpFor<LayerNormOp, 3> {
 public:
  explicit LayerNormOp(double eps) : m_eps(eps) { check_eps(eps); }

  std::string name() const override { return "layer_norm"; }
  std::size_t arity() const override { return 3; }
  Json attrs() const override { return {{key_eps, m_eps}}; }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    const Shape& s = x[0];
    if (s.empty() || s.back() == 0) {
      throw error("normalises the last axis, of at least 1 element: x is " + shape_str(s));
    }
    const Shape d = {s.back()};
    if (x[1] != d || x[2] != d) {
      throw error("gamma " + shape_str(x[1]) + " and beta " + shape_str(x[2]) + " must be " + shape_str(d) +
                  ", the last axis of x " + shape_str(s));
    }
    Shape stats = s;
    stats.back() = 1;
    return {s, stats, stats};
  }

  // Three passes over x (mean, variance, y) and the reads of gamma and beta per row.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 2 * element_count(x[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const T* src = x[0]->data();
    const T* gamma = x[1]->data();
    const T* beta = x[2]->data();
    T* out = y[0]->data();
    T* mean = y[1]->data();
    T* rstd = y[2]->data();
    const std::size_t d = x[0]->shape().back(), rows = y[1]->size();
    const T eps = static_cast<T>(m_eps);
    detail::parallel_for(rows, 3 * d, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const T* row = src + r * d;
        T sum = 0;
        for (std::size_t j = 0; j < d; ++j) sum += row[j];
        const T mu = sum / static_cast<T>(d);
        T squares = 0;
        for (std::size_t j = 0; j < d; ++j) squares += (row[j] - mu) * (row[j] - mu);
        const T inv = T(1) / std::sqrt(squares / static_cast<T>(d) + eps);
        T* o = out + r * d;
        for (std::size_t j = 0; j < d; ++j) o[j] = (row[j] - mu) * inv * gamma[j] + beta[j];
        mean[r] = mu;
        rstd[r] = inv;
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& x = v.x[0];
    const Var<T>& gamma = v.x[1];
    const Var<T>& mu = v.ys[1];
    const Var<T>& rstd = v.ys[2];
    const Var<T>& g = v.grad_outs[0];
    const Var<T>& g_mean = v.grad_outs[1];
    const Var<T>& g_rstd = v.grad_outs[2];
    const double inv_d = 1.0 / static_cast<double>(x.shape().back());
    // (x - mean) rstd, built once and only if a gradient reads it (not for beta's alone).
    Var<T> xhat_node;
    const auto xhat = [&] { return xhat_node.valid() ? xhat_node : (xhat_node = mul(sub(x, mu), rstd)); };
    Var<T> grad_x, grad_gamma, grad_beta;
    const auto accumulate = [&](const Var<T>& term) { grad_x = grad_x.valid() ? add(grad_x, term) : term; };
    if (g.valid()) {
      if (v.wanted[0]) {
        const Var<T> gy = mul(g, gamma);
        const Var<T> centred = sub(gy, mean(gy, {-1}, true));
        accumulate(mul(rstd, sub(centred, mul(xhat(), mean(mul(gy, xhat()), {-1}, true)))));
      }
      if (v.wanted[1]) grad_gamma = sum_to_shape_of(mul(g, xhat()), gamma);
      if (v.wanted[2]) grad_beta = sum_to_shape_of(g, v.x[2]);
    }
    if (v.wanted[0] && g_mean.valid()) accumulate(scale(g_mean, inv_d));
    if (v.wanted[0] && g_rstd.valid()) accumulate(scale(mul(mul(g_rstd, mul(rstd, rstd)), xhat()), -inv_d));
    // Only the mean's gradient reached x: spread it over the row.
    if (grad_x.valid() && !shapes_equal(grad_x.value().shape(), x.value().shape())) grad_x = broadcast_to(grad_x, x.shape());
    // Only the mean's or the rstd's gradient flows: gamma and beta do not move them.
    if (v.wanted[1] && !grad_gamma.valid()) grad_gamma = zeros_like(gamma);
    if (v.wanted[2] && !grad_beta.valid()) grad_beta = zeros_like(v.x[2]);
    return {grad_x, grad_gamma, grad_beta};
  }

 private:
  double m_eps;
};

}  // namespace

template <class T>
Var<T> layer_norm(const Var<T>& x, const Var<T>& gamma, const Var<T>& beta, double eps) {
  return x.graph().apply_outputs(std::make_shared<LayerNormOp>(eps), {x, gamma, beta})[0];
}

std::shared_ptr<const Op> make_layer_norm_op(const JsonCursor& attrs) {
  attrs.check_object({key_eps});
  const JsonCursor c = attrs[key_eps];
  const double eps = c.number();
  if (!(eps >= 0) || !std::isfinite(eps)) c.fail("expected a finite number >= 0, got " + number_str(eps));
  return std::make_shared<LayerNormOp>(eps);
}

template Var<float> layer_norm(const Var<float>&, const Var<float>&, const Var<float>&, double);
template Var<double> layer_norm(const Var<double>&, const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
