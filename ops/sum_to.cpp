// forward: y = sum of x over the broadcast axes          x.shape -> shape
// VJP:     grad_x = broadcast_to(grad_out, x.shape)       shape -> x.shape
// saves:   the target shape.
#include <xgrad/ops/sum_to.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

class SumToOp final : public AttrOp<SumToOp, Shape> {
 public:
  static constexpr const char* key = "shape";
  using AttrOp::AttrOp;

  std::string name() const override { return "sum_to"; }
  // ONNX: ReduceSum (keepdims) over the leading axes x has beyond the target and the axes where
  // the target has 1, then Reshape to the target.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const Shape& x = n.input_shapes[0];
    const std::size_t extra = x.size() - m_value.size();
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (i < extra || (m_value[i - extra] == 1 && x[i] != 1)) axes.push_back(static_cast<std::int64_t>(i));
    }
    std::string y = n.inputs[0];
    if (!axes.empty()) y = e.op("ReduceSum", {y, e.int64s(axes)}, {{"keepdims", std::int64_t{1}}});
    return {e.op("Reshape", {y, e.int64s(onnx_dims(m_value))}, {{"allowzero", std::int64_t{1}}})};
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!detail::broadcastable(m_value, x[0])) {
      throw error("cannot sum x " + shape_str(x[0]) + " to " + shape_str(m_value) +
                  ": the target does not broadcast to x");
    }
    // Larger than x only where x has an axis of 0 that the target has as 1.
    detail::check_elements(m_value, [&] { return "summing x " + shape_str(x[0]) + " to " + shape_str(m_value); });
    return m_value;
  }

  // A row loop over x in memory order: each row of x's last axis is added into its row of y
  // (the last axis kept) or summed into its element (the last axis summed), y's offset for the
  // row following x's axes with stride 0 along the summed ones. Each element of y so adds its
  // terms in x's memory order, starting from -0.0 (which keeps a sum of only -0.0 at -0.0, as
  // numpy's, which starts from the first term). xtensor's reducer, which sum_to ran before,
  // adds in another order in some shapes: results a rounding apart there.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& a = *x[0];
    const std::size_t rank = a.dimension(), lead = rank - m_value.size();
    std::fill(y.begin(), y.end(), T(a.size() == 0 ? 0.0 : -0.0));  // a sum of nothing is +0
    if (a.size() == 0) return;
    if (rank == 0) {
      y.data()[0] += a.data()[0];
      return;
    }
    std::vector<std::size_t> stride(rank, 0);  // y's stride along each axis of x, 0 where summed
    for (std::size_t i = rank, s = 1; i-- > lead;) {
      const std::size_t d = m_value[i - lead];
      if (!(d == 1 && a.shape()[i] != 1)) stride[i] = s;
      s *= d;
    }
    const std::size_t len = a.shape()[rank - 1], rows = a.size() / len;
    const bool keep_last = stride[rank - 1] != 0;
    std::vector<std::size_t> index(rank - 1, 0);
    const T* in = a.data();
    for (std::size_t r = 0, out = 0; r < rows; ++r, in += len) {
      T* row = y.data() + out;
      if (keep_last) {
        for (std::size_t j = 0; j < len; ++j) row[j] += in[j];
      } else {
        T sum = row[0];
        for (std::size_t j = 0; j < len; ++j) sum += in[j];
        row[0] = sum;
      }
      for (std::size_t i = rank - 1; i-- > 0;) {  // the next row, row-major
        out += stride[i];
        if (++index[i] < a.shape()[i]) break;
        out -= stride[i] * a.shape()[i];
        index[i] = 0;
      }
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {broadcast_to(v.grad_out, shape_of(v.x[0]))};
  }
};

}  // namespace

template <class T>
Var<T> sum_to(const Var<T>& x, const Shape& shape) {
  return x.graph().apply(std::make_shared<SumToOp>(shape), {x});
}

std::shared_ptr<const Op> make_sum_to_op(const JsonCursor& attrs) { return SumToOp::from_attrs(attrs); }

template Var<float> sum_to(const Var<float>&, const Shape&);
template Var<double> sum_to(const Var<double>&, const Shape&);

}  // namespace xgrad
