// forward: y = x where mask != 0, else fill          x (...), mask broadcast to x's shape
// VJP:     grad_x = apply_mask(grad_out, mask, 0)     (forbidden entries get exactly 0)
//          grad_mask = 0                               (y is piecewise constant in the mask)
// saves:   fill.
#include <xgrad/ops/apply_mask.hpp>

#include <xtensor/xbuilder.hpp>

#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

class ApplyMaskOp final : public AttrOp<ApplyMaskOp, double, 2> {
 public:
  static constexpr const char* key = "fill";
  using AttrOp::AttrOp;

  std::string name() const override { return "apply_mask"; }
  // ONNX: Where(Cast(mask, bool), x, fill), the cast true where mask != 0 (NaN included), the
  // fill (-inf for attention) a scalar initializer; a mask leaf's bool input is the condition.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string allowed = !n.bool_input(1).empty() ? n.bool_input(1)  // a mask leaf: the bool input
                                                           : e.op("Cast", {n.inputs[1]}, {{"to", std::int64_t{9}}});  // 9: BOOL
    return {e.op("Where", {allowed, n.inputs[0], e.scalar(m_value)})};
  }
  // Element by element over x (the mask, broadcast, is never y's buffer unless it is x).
  bool overwrites_input(std::size_t i) const override { return i == 0; }
  // Each output element also costs 4 visits (an odometer step over the axes: a broadcast mask took 4 ns a visit here without it).
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override { return Op::work(x, y) + 4 * element_count(y[0]); }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!detail::broadcastable(x[1], x[0])) {
      throw error("the mask " + shape_str(x[1]) + " does not broadcast to x " + shape_str(x[0]));
    }
    return x[0];
  }

  // A broadcast mask is read in place, row by row (no array of x's shape is made of it).
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T fill = static_cast<T>(m_value);
    detail::broadcast_binary(*x[0], *x[1], y, [fill](T a, T m) { return m != 0 ? a : fill; });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& mask = v.x[1];
    Var<T> grad_x, grad_mask;
    if (v.wanted[0]) grad_x = apply_mask(v.grad_out, mask, 0.0);
    if (v.wanted[1]) grad_mask = zeros_like(mask);
    return {grad_x, grad_mask};
  }
};

}  // namespace

template <class T>
Var<T> apply_mask(const Var<T>& x, const Var<T>& mask, double fill) {
  return x.graph().apply(std::make_shared<ApplyMaskOp>(fill), {x, mask});
}

std::shared_ptr<const Op> make_apply_mask_op(const JsonCursor& attrs) { return ApplyMaskOp::from_attrs(attrs); }

template Var<float> apply_mask(const Var<float>&, const Var<float>&, double);
template Var<double> apply_mask(const Var<double>&, const Var<double>&, double);

}  // namespace xgrad
