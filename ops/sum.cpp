// sum  forward: y = sum of x over axes                  x.shape -> x.shape without axes (or as 1)
//      VJP:     grad_x = broadcast_to(reshape(grad_out, kept), x.shape), kept = x.shape, axes as 1
// mean forward: y = (sum of x over axes) / n             n = the number of elements each y averages
//      VJP:     grad_x = broadcast_to(reshape(grad_out, kept), x.shape) / n
// saves:   the axes and keepdims.
// One class for both (ReduceOp): they differ in the factor 1 / n and their ONNX op.
#include <xgrad/ops/sum.hpp>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factories of sum and mean alike.
constexpr const char* key_axes = "axes";
constexpr const char* key_keepdims = "keepdims";

class ReduceOp final : public OpFor<ReduceOp> {
 public:
  ReduceOp(std::vector<long> axes, bool keepdims, bool mean) : m_axes(std::move(axes)), m_keepdims(keepdims), m_mean(mean) {}

  std::string name() const override { return m_mean ? "mean" : "sum"; }
  // ONNX: ReduceSum over the axes, an input at opset 17; ReduceMean, whose axes are still an
  // attribute there. Identity for no axes (ReduceSum without axes sums them all).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    if (m_axes.empty()) return {e.op("Identity", {n.inputs[0]})};
    std::vector<std::int64_t> axes;
    for (long a : m_axes) axes.push_back(onnx_axis(a, n.input_shapes[0].size()));
    const OnnxAttr keepdims{"keepdims", std::int64_t{m_keepdims}};
    if (m_mean) return {e.op("ReduceMean", {n.inputs[0]}, {{"axes", axes}, keepdims})};
    return {e.op("ReduceSum", {n.inputs[0], e.int64s(axes)}, {keepdims})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_axes, m_axes}, {key_keepdims, m_keepdims}}; }
  // Each output element also costs 8 visits (its reduction's setup): sum over rows of 1 took
  // 3.3 ns a visit here, 0.4-0.8 over long rows.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override { return Op::work(x, y) + 8 * element_count(y[0]); }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    return detail::reduction(m_axes, m_keepdims, x[0]).out;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const detail::Reduction r = detail::reduction(m_axes, m_keepdims, shape_of(*x[0]));
    detail::sum_axes(*x[0], r.axes, m_mean ? T(1) / static_cast<T>(r.count) : T(1), y);
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const auto& s = v.x[0].value().shape();
    const Shape shape(s.begin(), s.end());
    const detail::Reduction r = detail::reduction(m_axes, m_keepdims, shape);
    const Var<T> g = spread_back(v.grad_out, r.kept, shape);
    return {m_mean ? scale(g, 1.0 / static_cast<double>(r.count)) : g};
  }

 private:
  std::vector<long> m_axes;
  bool m_keepdims;
  bool m_mean;
};

template <class T>
Var<T> reduce(const Var<T>& x, const std::vector<long>& axes, bool keepdims, bool mean) {
  return x.graph().apply(std::make_shared<ReduceOp>(axes, keepdims, mean), {x});
}

// The op from its exported attributes {"axes": [...], "keepdims": bool}.
std::shared_ptr<const Op> reduce_from_attrs(const JsonCursor& attrs, bool mean) {
  attrs.check_object({key_axes, key_keepdims});
  const JsonCursor list = attrs[key_axes];
  std::vector<long> axes;
  for (std::size_t i = 0, n = list.array_size(); i < n; ++i) axes.push_back(list[i].integer());
  return std::make_shared<ReduceOp>(std::move(axes), attrs[key_keepdims].boolean(), mean);
}

}  // namespace

template <class T>
Var<T> sum(const Var<T>& x, const std::vector<long>& axes, bool keepdims) {
  return reduce(x, axes, keepdims, false);
}

template <class T>
Var<T> sum(const Var<T>& x) {
  return reduce(x, detail::all_axes(shape_of(x)), false, false);
}

template <class T>
Var<T> mean(const Var<T>& x, const std::vector<long>& axes, bool keepdims) {
  return reduce(x, axes, keepdims, true);
}

template <class T>
Var<T> mean(const Var<T>& x) {
  return reduce(x, detail::all_axes(shape_of(x)), false, true);
}

template <class T>
Var<T> spread_back(const Var<T>& g, const Shape& kept, const Shape& x_shape) {
  const Var<T> k = shapes_equal(g.value().shape(), kept) ? g : reshape(g, kept);
  return shapes_equal(kept, x_shape) ? k : broadcast_to(k, x_shape);
}

std::shared_ptr<const Op> make_sum_op(const JsonCursor& attrs) { return reduce_from_attrs(attrs, false); }
std::shared_ptr<const Op> make_mean_op(const JsonCursor& attrs) { return reduce_from_attrs(attrs, true); }

template Var<float> sum(const Var<float>&, const std::vector<long>&, bool);
template Var<double> sum(const Var<double>&, const std::vector<long>&, bool);
template Var<float> sum(const Var<float>&);
template Var<double> sum(const Var<double>&);
template Var<float> mean(const Var<float>&, const std::vector<long>&, bool);
template Var<double> mean(const Var<double>&, const std::vector<long>&, bool);
template Var<float> mean(const Var<float>&);
template Var<double> mean(const Var<double>&);
template Var<float> spread_back(const Var<float>&, const Shape&, const Shape&);
template Var<double> spread_back(const Var<double>&, const Shape&, const Shape&);

}  // namespace xgrad
