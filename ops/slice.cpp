// forward: y = x[..., begin:end, ...] along axis          (..., n, ...) -> (..., end - begin, ...)
// VJP:     grad_x = pad(grad_out, axis, begin, n - end)   (..., end - begin, ...) -> (..., n, ...)
// saves:   the axis, begin and end.
#include <xgrad/ops/slice.hpp>

#include <algorithm>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axis = "axis";
constexpr const char* key_begin = "begin";
constexpr const char* key_end = "end";

class SliceOp final : public OpFor<SliceOp> {
 public:
  SliceOp(long axis, std::size_t begin, std::size_t end) : m_axis(axis), m_begin(begin), m_end(end) {}

  std::string name() const override { return "slice"; }
  // ONNX: Slice of [begin, end) along the axis.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::int64_t axis = onnx_axis(m_axis, n.input_shapes[0].size());
    return {e.op("Slice", {n.inputs[0], e.int64s({static_cast<std::int64_t>(m_begin)}),
                           e.int64s({static_cast<std::int64_t>(m_end)}), e.int64s({axis})})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_axis, m_axis}, {key_begin, m_begin}, {key_end, m_end}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const std::size_t a = detail::normalize_axis(m_axis, x[0]);
    if (m_begin > m_end) {
      throw error("begin " + std::to_string(m_begin) + " is after end " + std::to_string(m_end) + " on axis " +
                  std::to_string(m_axis) + " of x " + shape_str(x[0]));
    }
    if (m_end > x[0][a]) {
      throw error("end " + std::to_string(m_end) + " is past axis " + std::to_string(m_axis) + " of x " +
                  shape_str(x[0]) + ", of length " + std::to_string(x[0][a]));
    }
    Shape y = x[0];
    y[a] = m_end - m_begin;
    return y;
  }

  // Each of the outer blocks of y is one contiguous run of x: rows begin .. end of its block.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const Shape shape = shape_of(*x[0]);
    const detail::Rows r = detail::rows_along(shape, detail::normalize_axis(m_axis, shape));
    if (y.size() == 0) return;  // then x may be empty too: no pointer arithmetic on its data
    const std::size_t run = (m_end - m_begin) * r.inner, block = r.n * r.inner;
    const T* src = x[0]->data();
    T* dst = y.data();
    for (std::size_t o = 0; o < r.outer; ++o) {
      const T* first = src + o * block + m_begin * r.inner;
      dst = std::copy(first, first + run, dst);
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Shape s = shape_of(v.x[0]);
    const std::size_t n = s[detail::normalize_axis(m_axis, s)];
    return {pad(v.grad_out, m_axis, m_begin, n - m_end)};
  }

 private:
  long m_axis;
  std::size_t m_begin, m_end;
};

}  // namespace

template <class T>
Var<T> slice(const Var<T>& x, long axis, std::size_t begin, std::size_t end) {
  return x.graph().apply(std::make_shared<SliceOp>(axis, begin, end), {x});
}

std::shared_ptr<const Op> make_slice_op(const JsonCursor& attrs) {
  attrs.check_object({key_axis, key_begin, key_end});
  return std::make_shared<SliceOp>(attrs[key_axis].integer(), attrs[key_begin].index(), attrs[key_end].index());
}

template Var<float> slice(const Var<float>&, long, std::size_t, std::size_t);
template Var<double> slice(const Var<double>&, long, std::size_t, std::size_t);

}  // namespace xgrad
