// forward: y = (before zeros, x, after zeros) along axis     (..., n, ...) -> (..., before + n + after, ...)
// VJP:     grad_x = slice(grad_out, axis, before, before + n) (..., before + n + after, ...) -> (..., n, ...)
// saves:   the axis, before and after.
#include <xgrad/ops/pad.hpp>

#include <algorithm>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/slice.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axis = "axis";
constexpr const char* key_before = "before";
constexpr const char* key_after = "after";

class PadOp final : public OpFor<PadOp> {
 public:
  PadOp(long axis, std::size_t before, std::size_t after) : m_axis(axis), m_before(before), m_after(after) {}

  std::string name() const override { return "pad"; }
  // ONNX: Pad with constant zeros, before and after the axis.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::size_t rank = n.input_shapes[0].size();
    const auto axis = static_cast<std::size_t>(onnx_axis(m_axis, rank));
    std::vector<std::int64_t> pads(2 * rank, 0);
    pads[axis] = static_cast<std::int64_t>(m_before);
    pads[rank + axis] = static_cast<std::int64_t>(m_after);
    return {e.op("Pad", {n.inputs[0], e.int64s(pads)}, {{"mode", std::string("constant")}})};  // value 0 by default
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_axis, m_axis}, {key_before, m_before}, {key_after, m_after}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const std::size_t a = detail::normalize_axis(m_axis, x[0]);
    const std::size_t n = x[0][a], limit = max_array_elements;
    // before + n + after without overflow, then the whole of y within the limit.
    Shape y = x[0];
    const bool fits = n <= limit && m_before <= limit - n && m_after <= limit - n - m_before;
    if (fits) y[a] = m_before + n + m_after;
    if (!fits || !bounded_size(y)) {
      throw error("padding axis " + std::to_string(m_axis) + " of x " + shape_str(x[0]) + " by " +
                  std::to_string(m_before) + " before and " + std::to_string(m_after) + " after makes more than " +
                  std::to_string(max_array_elements) + " elements");
    }
    return y;
  }

  // Each of the outer blocks of y is a run of zeros, x's block, a run of zeros.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const Shape shape = shape_of(*x[0]);
    const detail::Rows r = detail::rows_along(shape, detail::normalize_axis(m_axis, shape));
    const std::size_t head = m_before * r.inner, body = r.n * r.inner, tail = m_after * r.inner;
    const T* src = x[0]->data();
    T* dst = y.data();
    for (std::size_t o = 0; o < r.outer; ++o, src += body) {
      dst = std::fill_n(dst, head, T(0));
      dst = std::copy(src, src + body, dst);
      dst = std::fill_n(dst, tail, T(0));
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Shape s = shape_of(v.x[0]);
    const std::size_t n = s[detail::normalize_axis(m_axis, s)];
    return {slice(v.grad_out, m_axis, m_before, m_before + n)};
  }

 private:
  long m_axis;
  std::size_t m_before, m_after;
};

}  // namespace

template <class T>
Var<T> pad(const Var<T>& x, long axis, std::size_t before, std::size_t after) {
  return x.graph().apply(std::make_shared<PadOp>(axis, before, after), {x});
}

std::shared_ptr<const Op> make_pad_op(const JsonCursor& attrs) {
  attrs.check_object({key_axis, key_before, key_after});
  return std::make_shared<PadOp>(attrs[key_axis].integer(), attrs[key_before].index(), attrs[key_after].index());
}

template Var<float> pad(const Var<float>&, long, std::size_t, std::size_t);
template Var<double> pad(const Var<double>&, long, std::size_t, std::size_t);

}  // namespace xgrad
