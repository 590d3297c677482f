// forward: y_i = x_i c_i - x_{i+h} s_i, y_{i+h} = x_{i+h} c_i + x_i s_i,     (..., T, d), P -> (..., T, d)
//          c_i, s_i = cos, sin(p theta_i), theta_i = base^(-2i/d), p of the row (broadcast from P)
// VJP:     grad_x = rope(grad_out, -p)                                          (the inverse rotation)
//          grad_p = sum_to(sum_i theta_i (g_{i+h} y_i - g_i y_{i+h}), P)       (nodes, when wanted)
// saves:   nothing (y is the output).
#include <xgrad/ops/rope.hpp>

#include <cmath>

#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/kernels/vector_math.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/sum.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_base = "base";

void check_base(double base) {
  if (!(std::isfinite(base) && base > 0)) throw error("rope: base must be finite and > 0, got " + number_str(base));
}

// theta_i = base^(-2i/d), i < d/2, rounded to T once: the composition's constant of frequencies.
template <class T>
std::vector<T> frequencies(double base, std::size_t d) {
  std::vector<T> f(d / 2);
  for (std::size_t i = 0; i < f.size(); ++i) {
    f[i] = static_cast<T>(std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  }
  return f;
}

class RopeOp final : public OpFor<RopeOp> {
 public:
  explicit RopeOp(double base) : m_base(base) { check_base(base); }

  std::string name() const override { return "rope"; }
  // ONNX has no rotary op below opset 23 (RotaryEmbedding, which takes cos and sin caches): the
  // composition, angles = Reshape(p, (P..., 1)) theta, then the two halves and Concat.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const Shape& xs = n.input_shapes[0];
    const std::size_t d = xs.back(), h = d / 2;
    std::vector<double> theta;
    for (double f : frequencies<double>(m_base, d)) theta.push_back(e.float32() ? double(float(f)) : f);
    std::vector<std::int64_t> column;
    for (std::size_t a : n.input_shapes[1]) column.push_back(static_cast<std::int64_t>(a));
    column.push_back(1);
    const std::string angle = e.op("Mul", {e.op("Reshape", {n.inputs[1], e.int64s(column)}), e.floats(theta, Shape{h})});
    const std::string c = e.op("Cos", {angle}), s = e.op("Sin", {angle});
    const auto half = [&](std::size_t begin, std::size_t end) {
      return e.op("Slice", {n.inputs[0], e.int64s({static_cast<std::int64_t>(begin)}),
                            e.int64s({static_cast<std::int64_t>(end)}), e.int64s({-1})});
    };
    const std::string x1 = half(0, h), x2 = half(h, d);
    const std::string y1 = e.op("Sub", {e.op("Mul", {x1, c}), e.op("Mul", {x2, s})});
    const std::string y2 = e.op("Add", {e.op("Mul", {x2, c}), e.op("Mul", {x1, s})});
    return {e.op("Concat", {y1, y2}, {{"axis", std::int64_t{-1}}})};
  }
  std::size_t arity() const override { return 2; }
  Json attrs() const override { return {{key_base, m_base}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const Shape &xs = x[0], &ps = x[1];
    const auto shapes = [&] { return "x is " + shape_str(xs) + ", positions " + shape_str(ps); };
    if (xs.size() < 2) throw error("x must be (..., T, d), of rank >= 2: " + shapes());
    if (xs.back() == 0 || xs.back() % 2 != 0) {
      throw error("the last axis of x must be even and non-empty (the half-split pairs dimension i with i + d/2): " +
                  shapes());
    }
    const Shape lead(xs.begin(), xs.end() - 1);
    if (!detail::broadcastable(ps, lead)) {
      throw error("positions must broadcast against x's shape without its last axis, " + shape_str(lead) +
                  ", by numpy's rules ((T), or (B, 1, T) for (B, H, T, d)): " + shapes());
    }
    return xs;
  }

  // A pass over x and y, and a sine and a cosine (about 8 visits each, as the rows of
  // ops/elementwise.def count them) per position and frequency.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 16 * element_count(x[1]) * static_cast<double>(x[0].back() / 2);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& in = *x[0];
    const xt::xarray<T>& pos = *x[1];
    const std::size_t d = in.shape().back(), h = d / 2;
    if (in.size() == 0) return;
    const std::vector<T> theta = frequencies<T>(m_base, d);
    // Position by position: the rows of x at one position (its base row, then an offset over
    // the axes positions broadcast along) share a row of h cosines and sines, computed into a
    // buffer that stays in L1 while those rows are rotated. No table of all positions is made
    // (at GPT-2 small's (8, 256, 768) in float64 it was 1.5 MiB, read from L3 once per batch).
    const Shape lead(in.shape().begin(), in.shape().end() - 1);
    const std::vector<std::size_t> steps = detail::broadcast_steps(pos.shape(), lead.size());
    std::vector<std::size_t> bases{0}, offsets{0};  // row indices, in positions' row-major order
    for (std::size_t a = 0, stride = in.size() / d; a < lead.size(); ++a) {
      stride /= lead[a];
      std::vector<std::size_t>& rows = steps[a] != 0 ? bases : offsets;
      std::vector<std::size_t> next;
      next.reserve(rows.size() * lead[a]);
      for (const std::size_t r : rows) {
        for (std::size_t i = 0; i < lead[a]; ++i) next.push_back(r + i * stride);
      }
      rows = std::move(next);
    }
    const T* src = in.data();
    T* out = y.data();
    detail::parallel_for(bases.size(), offsets.size() * 2 * d + 16 * h, [&](std::size_t p0, std::size_t p1) {
      std::vector<T> c(h), s(h);
      for (std::size_t p = p0; p < p1; ++p) {
        for (std::size_t i = 0; i < h; ++i) c[i] = pos.data()[p] * theta[i];
        detail::vector_sin(c.data(), s.data(), h);
        detail::vector_cos(c.data(), c.data(), h);
        for (const std::size_t o : offsets) {
          const std::size_t r = bases[p] + o;
          detail::row_rotate(src + r * d, c.data(), s.data(), out + r * d, h);
        }
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& positions = v.x[1];
    const Var<T>& g = v.grad_out;
    Var<T> grad_x, grad_p;
    if (v.wanted[0]) grad_x = rope(g, neg(positions), m_base);
    if (v.wanted[1]) {
      const std::size_t d = v.x[0].shape().back(), h = d / 2;
      const Var<T>& y = v.y;
      const std::vector<T> theta = frequencies<T>(m_base, d);
      xt::xarray<T> freq = xt::xarray<T>::from_shape({h});
      std::copy(theta.begin(), theta.end(), freq.begin());
      const Var<T> da = sub(mul(slice(g, -1, h, d), slice(y, -1, 0, h)), mul(slice(g, -1, 0, h), slice(y, -1, h, d)));
      grad_p = sum_to_shape_of(sum(mul(da, y.graph().constant("", std::move(freq))), {-1}), positions);
    }
    return {grad_x, grad_p};
  }

 private:
  double m_base;
};

}  // namespace

template <class T>
Var<T> rope(const Var<T>& x, const Var<T>& positions, double base) {
  check_base(base);
  return x.graph().apply(std::make_shared<RopeOp>(base), {x, positions});
}

std::shared_ptr<const Op> make_rope_op(const JsonCursor& attrs) {
  attrs.check_object({key_base});
  const JsonCursor c = attrs[key_base];
  const double base = c.number();
  if (!(std::isfinite(base) && base > 0)) c.fail("expected a finite number > 0, got " + number_str(base));
  return std::make_shared<RopeOp>(base);
}

template Var<float> rope(const Var<float>&, const Var<float>&, double);
template Var<double> rope(const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
