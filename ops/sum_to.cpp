// forward: y = sum of x over the broadcast axes          x.shape -> shape
// VJP:     grad_x = broadcast_to(grad_out, x.shape)       shape -> x.shape
// saves:   the target shape.
#include <xgrad/ops/sum_to.hpp>

#include <algorithm>
#include <vector>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/kernels/common.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_shape = "shape";

class SumToOp final : public OpFor<SumToOp> {
 public:
  explicit SumToOp(Shape shape) : m_shape(std::move(shape)) {}

  std::string name() const override { return "sum_to"; }
  // ONNX: ReduceSum (keepdims) over the leading axes x has beyond the target and the axes where
  // the target has 1, then Reshape to the target.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const Shape& x = n.input_shapes[0];
    const std::size_t extra = x.size() - m_shape.size();
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i < extra || (m_shape[i - extra] == 1 && x[i] != 1)) axes.push_back(static_cast<std::int64_t>(i));
    }
    std::string y = n.inputs[0];
    if (!axes.empty()) y = e.op("ReduceSum", {y, e.int64s(axes)}, {{"keepdims", std::int64_t{1}}});
    return {e.op("Reshape", {y, e.int64s(onnx_dims(m_shape))}, {{"allowzero", std::int64_t{1}}})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_shape, m_shape}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!detail::broadcastable(m_shape, x[0])) {
      throw error("cannot sum x " + shape_str(x[0]) + " to " + shape_str(m_shape) +
                  ": the target does not broadcast to x");
    }
    // Larger than x only where x has an axis of 0 that the target has as 1.
    detail::check_elements(m_shape, [&] { return "summing x " + shape_str(x[0]) + " to " + shape_str(m_shape); });
    return m_shape;
  }

  // Where y keeps x's last axis (a bias's gradient: (B, T, n) to (n)), one pass over x, each
  // row of it added into the row of y it broadcasts from: every element of y is 0 + the
  // elements that sum into it in x's row-major order, as xtensor's reducer adds them (the same
  // bits), with no temporary. Where the last axis is summed too, xtensor's reducer, whose order
  // of additions then is its own.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& a = *x[0];
    const std::size_t rank = a.dimension(), lead = rank - m_shape.size();
    std::vector<std::size_t> axes;  // the summed axes
    for (std::size_t i = 0; i < rank; ++i) {
      if (i < lead || (m_shape[i - lead] == 1 && a.shape()[i] != 1)) axes.push_back(i);
    }
    if (axes.empty() || a.size() == 0 || axes.back() == rank - 1) {
      detail::sum_axes(a, axes, T(1), y);
      return;
    }
    const std::vector<std::size_t> step = detail::broadcast_steps(m_shape, rank);
    std::fill(y.begin(), y.end(), T(0));
    const std::size_t n = a.shape()[rank - 1];
    const T* in = a.data();
    T* out = y.data();
    std::vector<std::size_t> index(rank, 0);
    std::size_t offset = 0;  // of the current row's first element in y
    for (std::size_t row = 0, rows = a.size() / n; row < rows; ++row, in += n) {
      T* o = out + offset;
      for (std::size_t j = 0; j < n; ++j) o[j] += in[j];
      // The next row: the index over the axes before the last, row-major, and y's offset.
      for (std::size_t i = rank - 1; i-- > 0;) {
        offset += step[i];
        if (++index[i] < a.shape()[i]) break;
        offset -= step[i] * index[i];
        index[i] = 0;
      }
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const auto& s = v.x[0].value().shape();
    return {broadcast_to(v.grad_out, Shape(s.begin(), s.end()))};
  }

 private:
  Shape m_shape;
};

}  // namespace

template <class T>
Var<T> sum_to(const Var<T>& x, const Shape& shape) {
  return x.graph().apply(std::make_shared<SumToOp>(shape), {x});
}

std::shared_ptr<const Op> make_sum_to_op(const JsonCursor& attrs) {
  attrs.check_object({key_shape});
  return std::make_shared<SumToOp>(attrs[key_shape].shape());
}

template Var<float> sum_to(const Var<float>&, const Shape&);
template Var<double> sum_to(const Var<double>&, const Shape&);

}  // namespace xgrad
