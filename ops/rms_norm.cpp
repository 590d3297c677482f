// forward: rstd = 1 / sqrt(sum(x^2) / d + eps) per row; y = x rstd gamma   (..., d) -> (..., d), (..., 1)
// VJP:     grad_x, grad_gamma = rms_norm_vjp(x, gamma, rstd, grad_y)
//          grad_x += -grad_rstd rstd^2 xhat / d, xhat = x rstd              (nodes, when it flows)
// saves:   rstd (output 1).
//
// rms_norm_vjp (x (..., d), gamma (d), rstd (..., 1), g (..., d))
// forward: xhat = x rstd, gy = g gamma, the mean over the last axis:
//          grad_x = rstd (gy - xhat mean(gy xhat)), grad_gamma = sum over rows of g xhat
// VJP:     that composition's, of nodes (mul, sub, mean, sum_to), by the backward pass
// saves:   nothing beyond its inputs.
#include <xgrad/ops/rms_norm.hpp>

#include <cmath>

#include <xgrad/graph/backward.hpp>
#include <xgrad/graph/json.hpp>
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

class RmsNormOp final : public OpFor<RmsNormOp, 2> {
 public:
  explicit RmsNormOp(double eps) : m_eps(eps) { detail::check_norm_eps(eps, "rms_norm"); }

  std::string name() const override { return "rms_norm"; }
  // ONNX: RMSNormalization is opset 23, above the export's 17: its expanded form, rstd =
  // 1 / sqrt(ReduceMean(x x) + eps) and y = x rstd gamma, rstd the second output.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string& x = n.inputs[0];
    const std::string ms = e.op("ReduceMean", {e.op("Mul", {x, x})}, detail::onnx_last_axis());
    const std::string rstd = e.op("Div", {e.scalar(1), e.op("Sqrt", {e.op("Add", {ms, e.scalar(m_eps)})})});
    return {e.op("Mul", {e.op("Mul", {x, rstd}), n.inputs[1]}), rstd};
  }
  std::size_t arity() const override { return 2; }
  Json attrs() const override { return {{detail::norm_key_eps, m_eps}}; }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    return {x[0], detail::norm_stats_shape(x[0], {{"gamma", x[1]}})};
  }

  // Two passes over x (the sum of squares, then y) and the read of gamma per row.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + element_count(x[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const T* src = x[0]->data();
    const T* gamma = x[1]->data();
    T* out = y[0]->data();
    T* rstd = y[1]->data();
    const std::size_t d = x[0]->shape().back(), rows = y[1]->size();
    const T eps = static_cast<T>(m_eps);
    detail::parallel_for(rows, 2 * d, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const T* row = src + r * d;
        T* o = out + r * d;
        const T inv = T(1) / std::sqrt(detail::row_dot(row, row, d, 1) / static_cast<T>(d) + eps);
        for (std::size_t j = 0; j < d; ++j) o[j] = row[j] * inv * gamma[j];
        rstd[r] = inv;
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& x = v.x[0];
    const Var<T>& gamma = v.x[1];
    const Var<T>& rstd = v.ys[1];
    const Var<T>& g = v.grad_outs[0];
    const Var<T>& g_rstd = v.grad_outs[1];
    Var<T> grad_x, grad_gamma;
    if (g.valid()) {
      const RmsNormGrads<T> parts = rms_norm_vjp(x, gamma, rstd, g);
      if (v.wanted[0]) grad_x = parts.grad_x;
      if (v.wanted[1]) grad_gamma = parts.grad_gamma;
    }
    if (v.wanted[0] && g_rstd.valid()) {
      const double inv_d = 1.0 / static_cast<double>(x.shape().back());
      const Var<T> term = scale(mul(mul(g_rstd, mul(rstd, rstd)), mul(x, rstd)), -inv_d);
      grad_x = grad_x.valid() ? add(grad_x, term) : term;
    }
    // Only the rstd's gradient flows: gamma does not move it.
    if (v.wanted[1] && !grad_gamma.valid()) grad_gamma = zeros_like(gamma);
    return {grad_x, grad_gamma};
  }

 private:
  double m_eps;
};

// The shapes rms_norm_vjp takes: x (..., d), gamma (d), rstd (..., 1), g as x.
void check_vjp_shapes(const std::vector<Shape>& x) {
  const Shape& s = x[0];
  const Shape stats = detail::norm_stats_shape(s);
  if (x[1] != Shape{s.back()} || x[2] != stats || x[3] != s) {
    throw error("x " + shape_str(s) + " needs gamma " + shape_str(Shape{s.back()}) + ", rstd " + shape_str(stats) +
                " and grad_y " + shape_str(s) + "; got gamma " + shape_str(x[1]) + ", rstd " + shape_str(x[2]) +
                ", grad_y " + shape_str(x[3]));
  }
}

class RmsNormVjpOp final : public OpFor<RmsNormVjpOp, 2> {
 public:
  std::string name() const override { return "rms_norm_vjp"; }
  // ONNX: run_forward's formulas: xhat, gy, the row mean (ReduceMean), and the sum over the rows
  // (ReduceSum over every axis but the last; none for a single row of rank 1).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string &x = n.inputs[0], &gamma = n.inputs[1], &rstd = n.inputs[2], &g = n.inputs[3];
    const auto mul = [&](const std::string& a, const std::string& b) { return e.op("Mul", {a, b}); };
    const std::string xhat = mul(x, rstd);
    const std::string gy = mul(g, gamma);
    const std::string b = e.op("ReduceMean", {mul(gy, xhat)}, detail::onnx_last_axis());
    const std::string grad_x = mul(rstd, e.op("Sub", {gy, mul(xhat, b)}));
    const std::size_t rank = n.input_shapes[0].size();
    const std::string gxhat = mul(g, xhat);
    if (rank == 1) return {grad_x, e.op("Identity", {gxhat})};
    std::vector<std::int64_t> rows;
    for (std::size_t i = 0; i + 1 < rank; ++i) rows.push_back(static_cast<std::int64_t>(i));
    return {grad_x, e.op("ReduceSum", {gxhat, e.int64s(rows)}, {{"keepdims", std::int64_t{0}}})};
  }
  std::size_t arity() const override { return 4; }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    check_vjp_shapes(x);
    return {x[0], x[1]};
  }
  // Two passes over x and grad_y for grad_x (the row sum, then the output), one for grad_gamma.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 3 * element_count(x[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const T* src = x[0]->data();
    const T* gamma = x[1]->data();
    const T* rstd = x[2]->data();
    const T* g = x[3]->data();
    T* gx = y[0]->data();
    const std::size_t d = x[0]->shape().back(), rows = x[2]->size();
    // grad_x, row by row, gy in grad_x's row: mean(gy xhat) = rstd mean(gy x).
    detail::parallel_for(rows, 3 * d, [&](std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) {
        const T* xr = src + r * d;
        const T* gr = g + r * d;
        T* out = gx + r * d;
        const T inv = rstd[r];
        for (std::size_t j = 0; j < d; ++j) out[j] = gr[j] * gamma[j];
        const T b = inv * detail::row_dot(out, xr, d, 1) / static_cast<T>(d);
        for (std::size_t j = 0; j < d; ++j) out[j] = inv * (out[j] - (xr[j] * inv) * b);
      }
    });
    // grad_gamma: columns over the threads, each summed over the rows in order, so that the
    // bits do not depend on the thread count.
    T* gg = y[1]->data();
    std::fill(gg, gg + d, T(0));
    detail::parallel_for(d, rows, [&](std::size_t c0, std::size_t c1) {
      for (std::size_t r = 0; r < rows; ++r) {
        const T* xr = src + r * d;
        const T* gr = g + r * d;
        for (std::size_t j = c0; j < c1; ++j) gg[j] += gr[j] * (xr[j] * rstd[r]);
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
    const Var<T> xhat = mul(in[0], in[2]);
    const Var<T> gy = mul(in[3], in[1]);
    const Var<T> gx = mul(in[2], sub(gy, mul(xhat, mean(mul(gy, xhat), {-1}, true))));
    const Var<T> gg = sum_to_shape_of(mul(in[3], xhat), a.x[1]);
    const std::vector<Var<T>> grads = backward({gx, gg}, in, a.grad_outs, sum, /*through_xs=*/false);
    std::vector<Var<T>> result(4);
    for (std::size_t slot = 0; slot < 4; ++slot) {
      if (a.wanted[slot]) result[slot] = grads[slot];
    }
    return result;
  }
};

}  // namespace

template <class T>
Var<T> rms_norm(const Var<T>& x, const Var<T>& gamma, double eps) {
  return x.graph().apply_outputs(std::make_shared<RmsNormOp>(eps), {x, gamma})[0];
}

std::shared_ptr<const Op> make_rms_norm_op(const JsonCursor& attrs) {
  return std::make_shared<RmsNormOp>(detail::read_norm_eps(attrs));
}

template <class T>
RmsNormGrads<T> rms_norm_vjp(const Var<T>& x, const Var<T>& gamma, const Var<T>& rstd, const Var<T>& grad_y) {
  const auto outs = x.graph().apply_outputs(std::make_shared<RmsNormVjpOp>(), {x, gamma, rstd, grad_y});
  return {outs[0], outs[1]};
}

std::shared_ptr<const Op> make_rms_norm_vjp_op(const JsonCursor& attrs) { return from_no_attrs<RmsNormVjpOp>(attrs); }

template Var<float> rms_norm(const Var<float>&, const Var<float>&, double);
template Var<double> rms_norm(const Var<double>&, const Var<double>&, double);
template RmsNormGrads<float> rms_norm_vjp(const Var<float>&, const Var<float>&, const Var<float>&, const Var<float>&);
template RmsNormGrads<double> rms_norm_vjp(const Var<double>&, const Var<double>&, const Var<double>&,
                                           const Var<double>&);

}  // namespace xgrad
