// forward: mean = sum(x) / d, var = sum((x - mean)^2) / d, rstd = 1 / sqrt(var + eps) per row;
//          y = (x - mean) rstd gamma + beta                     (..., d) -> (..., d), (..., 1), (..., 1)
// VJP:     grad_x, grad_gamma, grad_beta = layer_norm_vjp(x, gamma, mean, rstd, grad_y)
//          grad_x += grad_mean / d - grad_rstd rstd^2 xhat / d   (nodes, when those flow)
// saves:   the mean and rstd (outputs 1 and 2).
//
// layer_norm_vjp (x (..., d), gamma (d), mean and rstd (..., 1), g (..., d))
// forward: xhat = (x - mean) rstd, gy = g gamma, means over the last axis:
//          grad_x = rstd (gy - mean(gy) - xhat mean(gy xhat))
//          grad_gamma = sum over rows of g xhat, grad_beta = sum over rows of g
// VJP:     that composition's, of nodes (sub, mul, mean, sum_to), by the backward pass
// saves:   nothing beyond its inputs.
#include <xgrad/ops/layer_norm.hpp>

#include <cmath>

#include <xgrad/graph/backward.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/norm_rows.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

class LayerNormOp final : public OpFor<LayerNormOp, 3> {
 public:
  explicit LayerNormOp(double eps) : m_eps(eps) { detail::check_norm_eps(eps, "layer_norm"); }

  std::string name() const override { return "layer_norm"; }
  // ONNX: in float32 one LayerNormalization node (axis -1; Y, Mean, InvStdDev are the three
  // outputs); in float64 the composition, as LayerNormalization's epsilon attribute holds only
  // 32 bits (1e-5 would become 9.99999974738e-06).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string& x = n.inputs[0];
    if (e.float32()) {
      return e.emit("LayerNormalization", {x, n.inputs[1], n.inputs[2]},
                    {{"axis", std::int64_t{-1}}, {"epsilon", m_eps}}, 3);
    }
    const std::vector<OnnxAttr>& last = detail::onnx_last_axis();
    const std::string mean = e.op("ReduceMean", {x}, last);
    const std::string centred = e.op("Sub", {x, mean});
    const std::string var = e.op("ReduceMean", {e.op("Mul", {centred, centred})}, last);
    const std::string rstd = e.op("Div", {e.scalar(1), e.op("Sqrt", {e.op("Add", {var, e.scalar(m_eps)})})});
    const std::string y = e.op("Add", {e.op("Mul", {e.op("Mul", {centred, rstd}), n.inputs[1]}), n.inputs[2]});
    return {y, mean, rstd};
  }
  std::size_t arity() const override { return 3; }
  Json attrs() const override { return {{detail::norm_key_eps, m_eps}}; }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    const Shape stats = detail::norm_stats_shape(x[0], {{"gamma", x[1]}, {"beta", x[2]}});
    return {x[0], stats, stats};
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
        T* o = out + r * d;
        const T mu = detail::row_sum(row, d) / static_cast<T>(d);
        for (std::size_t j = 0; j < d; ++j) o[j] = row[j] - mu;
        const T inv = T(1) / std::sqrt(detail::row_dot(o, o, d, 1) / static_cast<T>(d) + eps);
        for (std::size_t j = 0; j < d; ++j) o[j] = o[j] * inv * gamma[j] + beta[j];
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
      const LayerNormGrads<T> parts = layer_norm_vjp(x, gamma, mu, rstd, g);
      if (v.wanted[0]) accumulate(parts.grad_x);
      if (v.wanted[1]) grad_gamma = parts.grad_gamma;
      if (v.wanted[2]) grad_beta = parts.grad_beta;
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

// The shapes layer_norm_vjp takes: x (..., d), gamma (d), mean and rstd (..., 1), g as x.
void check_vjp_shapes(const std::vector<Shape>& x) {
  const Shape& s = x[0];
  const Shape stats = detail::norm_stats_shape(s);
  if (x[1] != Shape{s.back()} || x[2] != stats || x[3] != stats || x[4] != s) {
    throw error("x " + shape_str(s) + " needs gamma " + shape_str(Shape{s.back()}) + ", mean and rstd " +
                shape_str(stats) + " and grad_y " + shape_str(s) + "; got gamma " + shape_str(x[1]) + ", mean " +
                shape_str(x[2]) + ", rstd " + shape_str(x[3]) + ", grad_y " + shape_str(x[4]));
  }
}

class LayerNormVjpOp final : public OpFor<LayerNormVjpOp, 3> {
 public:
  std::string name() const override { return "layer_norm_vjp"; }
  // ONNX: run_forward's formulas: xhat, gy, the two row means (ReduceMean), and the sums over
  // the rows (ReduceSum over every axis but the last; none for a single row of rank 1).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string &x = n.inputs[0], &gamma = n.inputs[1], &mean = n.inputs[2], &rstd = n.inputs[3],
                      &g = n.inputs[4];
    const auto mul = [&](const std::string& a, const std::string& b) { return e.op("Mul", {a, b}); };
    const auto sub = [&](const std::string& a, const std::string& b) { return e.op("Sub", {a, b}); };
    const std::vector<OnnxAttr>& last = detail::onnx_last_axis();
    const std::string xhat = mul(sub(x, mean), rstd);
    const std::string gy = mul(g, gamma);
    const std::string a = e.op("ReduceMean", {gy}, last);
    const std::string b = e.op("ReduceMean", {mul(gy, xhat)}, last);
    const std::string grad_x = mul(rstd, sub(sub(gy, a), mul(xhat, b)));
    const std::size_t rank = n.input_shapes[0].size();
    const auto over_rows = [&](const std::string& v) {
      if (rank == 1) return e.op("Identity", {v});
      std::vector<std::int64_t> rows;
      for (std::size_t i = 0; i + 1 < rank; ++i) rows.push_back(static_cast<std::int64_t>(i));
      return e.op("ReduceSum", {v, e.int64s(rows)}, {{"keepdims", std::int64_t{0}}});
    };
    return {grad_x, over_rows(mul(g, xhat)), over_rows(g)};
  }
  std::size_t arity() const override { return 5; }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    check_vjp_shapes(x);
    return {x[0], x[1], x[1]};
  }
  // Two passes over x and grad_y for grad_x (the row sums, then the output), one for grad_gamma
  // and grad_beta.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 4 * element_count(x[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const T* src = x[0]->data();
    const T* gamma = x[1]->data();
    const T* mean = x[2]->data();
    const T* rstd = x[3]->data();
    const T* g = x[4]->data();
    T* gx = y[0]->data();
    const std::size_t d = x[0]->shape().back(), rows = x[2]->size();
    // grad_x, row by row: gy in grad_x's row, xhat in a row of scratch.
    detail::parallel_for(rows, 4 * d, [&](std::size_t r0, std::size_t r1) {
      std::vector<T> xhat(d);
      for (std::size_t r = r0; r < r1; ++r) {
        const T* xr = src + r * d;
        const T* gr = g + r * d;
        T* out = gx + r * d;
        for (std::size_t j = 0; j < d; ++j) {
          xhat[j] = (xr[j] - mean[r]) * rstd[r];
          out[j] = gr[j] * gamma[j];
        }
        const T a = detail::row_sum(out, d) / static_cast<T>(d);
        const T b = detail::row_dot(out, xhat.data(), d, 1) / static_cast<T>(d);
        for (std::size_t j = 0; j < d; ++j) out[j] = rstd[r] * ((out[j] - a) - xhat[j] * b);
      }
    });
    // grad_gamma and grad_beta: columns over the threads, each summed over the rows in order,
    // so that the bits do not depend on the thread count.
    T* gg = y[1]->data();
    T* gb = y[2]->data();
    std::fill(gg, gg + d, T(0));
    std::fill(gb, gb + d, T(0));
    detail::parallel_for(d, 2 * rows, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = src + r * d;
        const T* gr = g + r * d;
        for (std::size_t j = c0; j < c1; ++j) {
          gg[j] += gr[j] * ((xr[j] - mean[r]) * rstd[r]);
          gb[j] += gr[j];
        }
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const {
    // The forward composed of ops, then its VJP for the seeds grad_outs by the ordinary backward
    // pass: each op's own VJP, no formula written again here. Each input enters through an
    // identity node of its own, where the walk stops: the results are this node's partial
    // derivatives, one per slot, even when one node fills several slots (the caller sums them).
    const Accumulate<T> sum = sum_contributions<T>;
    std::vector<Var<T>> in;
    for (const auto& x : a.x) in.push_back(scale(x, 1.0));
    const Var<T> xhat = mul(sub(in[0], in[2]), in[3]);
    const Var<T> gy = mul(in[4], in[1]);
    const Var<T> gx = mul(in[3], sub(sub(gy, mean(gy, {-1}, true)), mul(xhat, mean(mul(gy, xhat), {-1}, true))));
    const Var<T> gg = sum_to_shape_of(mul(in[4], xhat), a.x[1]);
    const Var<T> gb = sum_to_shape_of(in[4], a.x[1]);
    const std::vector<Var<T>> grads = backward({gx, gg, gb}, in, a.grad_outs, sum, /*through_xs=*/false);
    std::vector<Var<T>> result(5);
    for (std::size_t slot = 0; slot < 5; ++slot) {
      if (a.wanted[slot]) result[slot] = grads[slot];
    }
    return result;
  }
};

}  // namespace

template <class T>
Var<T> layer_norm(const Var<T>& x, const Var<T>& gamma, const Var<T>& beta, double eps) {
  return x.graph().apply_outputs(std::make_shared<LayerNormOp>(eps), {x, gamma, beta})[0];
}

std::shared_ptr<const Op> make_layer_norm_op(const JsonCursor& attrs) {
  return std::make_shared<LayerNormOp>(detail::read_norm_eps(attrs));
}

template <class T>
LayerNormGrads<T> layer_norm_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& mean, const Var<T>& rstd,
                                 const Var<T>& grad_y) {
  const auto outs = x.graph().apply_outputs(std::make_shared<LayerNormVjpOp>(), {x, gamma, mean, rstd, grad_y});
  return {outs[0], outs[1], outs[2]};
}

std::shared_ptr<const Op> make_layer_norm_vjp_op(const JsonCursor& attrs) { return from_no_attrs<LayerNormVjpOp>(attrs); }

template Var<float> layer_norm(const Var<float>&, const Var<float>&, const Var<float>&, double);
template Var<double> layer_norm(const Var<double>&, const Var<double>&, const Var<double>&, double);
template LayerNormGrads<float> layer_norm_vjp(const Var<float>&, const Var<float>&, const Var<float>&, const Var<float>&,
                                              const Var<float>&);
template LayerNormGrads<double> layer_norm_vjp(const Var<double>&, const Var<double>&, const Var<double>&,
                                               const Var<double>&, const Var<double>&);

}  // namespace xgrad
