// forward: y = sum of x over axes                   x.shape -> x.shape without axes (or as 1)
// VJP:     grad_x = broadcast_to(reshape(grad_out, kept), x.shape), kept = x.shape, axes as 1
// saves:   the axes and keepdims.
#include <xgrad/ops/sum.hpp>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/reshape.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factories of sum and mean alike.
constexpr const char* key_axes = "axes";
constexpr const char* key_keepdims = "keepdims";

class SumOp final : public OpFor<SumOp> {
 public:
  SumOp(std::vector<long> axes, bool keepdims) : m_axes(std::move(axes)), m_keepdims(keepdims) {}

  std::string name() const override { return "sum"; }
  // ONNX: ReduceSum over the axes (Identity for none: ReduceSum without axes sums them all).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    if (m_axes.empty()) return {e.op("Identity", {n.inputs[0]})};
    std::vector<std::int64_t> axes;
    for (long a : m_axes) axes.push_back(onnx_axis(a, n.input_shapes[0].size()));
    return {e.op("ReduceSum", {n.inputs[0], e.int64s(axes)}, {{"keepdims", std::int64_t{m_keepdims}}})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return detail::reduction_attrs(m_axes, m_keepdims); }
  // Each output element also costs 8 visits (its reduction's setup): sum over rows of 1 took
  // 3.3 ns a visit here, 0.4-0.8 over long rows.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override { return Op::work(x, y) + 8 * element_count(y[0]); }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    return detail::reduction(m_axes, m_keepdims, x[0]).out;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const Shape shape = shape_of(*x[0]);
    detail::sum_axes(*x[0], detail::reduction(m_axes, m_keepdims, shape).axes, T(1), y);
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const auto& s = v.x[0].value().shape();
    const Shape shape(s.begin(), s.end());
    return {spread_back(v.grad_out, detail::reduction(m_axes, m_keepdims, shape).kept, shape)};
  }

 private:
  std::vector<long> m_axes;
  bool m_keepdims;
};

}  // namespace

template <class T>
Var<T> sum(const Var<T>& x, const std::vector<long>& axes, bool keepdims) {
  return x.graph().apply(std::make_shared<SumOp>(axes, keepdims), {x});
}

template <class T>
Var<T> sum(const Var<T>& x) {
  return sum(x, detail::all_axes(shape_of(x)));
}

template <class T>
Var<T> spread_back(const Var<T>& g, const Shape& kept, const Shape& x_shape) {
  const Var<T> k = shapes_equal(g.value().shape(), kept) ? g : reshape(g, kept);
  return shapes_equal(kept, x_shape) ? k : broadcast_to(k, x_shape);
}

Json detail::reduction_attrs(const std::vector<long>& axes, bool keepdims) {
  return {{key_axes, axes}, {key_keepdims, keepdims}};
}

std::pair<std::vector<long>, bool> detail::reduction_attrs(const JsonCursor& attrs) {
  attrs.check_object({key_axes, key_keepdims});
  const JsonCursor list = attrs[key_axes];
  std::vector<long> axes;
  for (std::size_t i = 0, n = list.array_size(); i < n; ++i) axes.push_back(list[i].integer());
  return {axes, attrs[key_keepdims].boolean()};
}

std::shared_ptr<const Op> make_sum_op(const JsonCursor& attrs) {
  auto [axes, keepdims] = detail::reduction_attrs(attrs);
  return std::make_shared<SumOp>(std::move(axes), keepdims);
}

template Var<float> sum(const Var<float>&, const std::vector<long>&, bool);
template Var<double> sum(const Var<double>&, const std::vector<long>&, bool);
template Var<float> sum(const Var<float>&);
template Var<double> sum(const Var<double>&);
template Var<float> spread_back(const Var<float>&, const Shape&, const Shape&);
template Var<double> spread_back(const Var<double>&, const Shape&, const Shape&);

}  // namespace xgrad
