// forward: y = cond != 0 ? a : b               cond, a, b broadcast together -> y
// VJP:     grad_a = sum_to(apply_mask(grad_out, cond, 0), a.shape)
//          grad_b = sum_to(apply_mask(grad_out, logical_not(cond), 0), b.shape)
//          grad_cond = 0                       (y is piecewise constant in cond)
// saves:   nothing beyond cond.
#include <xgrad/ops/where.hpp>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

class WhereOp final : public OpFor<WhereOp> {
 public:
  std::string name() const override { return "where"; }
  // ONNX: Where(Cast(cond, bool), a, b), the cast true where cond != 0 (NaN included); a mask
  // leaf's bool input is the condition itself. ONNX's Where broadcasts as numpy's.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Where", {elementwise::onnx_bool(e, n, 0), n.inputs[1], n.inputs[2]})};
  }
  std::size_t arity() const override { return 3; }
  // Element by element: an input of y's shape is read at each element before y's is written.
  bool overwrites_input(std::size_t) const override { return true; }
  // Each output element also costs 4 visits (the odometer of a broadcast input, as apply_mask).
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 4 * element_count(y[0]);
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const std::optional<Shape> ca = detail::broadcast_shapes(x[0], x[1]);
    const std::optional<Shape> y = ca ? detail::broadcast_shapes(*ca, x[2]) : std::nullopt;
    const auto shapes = [&] { return "cond " + shape_str(x[0]) + ", a " + shape_str(x[1]) + " and b " + shape_str(x[2]); };
    if (!y) {
      throw error(shapes() + " do not broadcast together (aligned on the right, each pair of axes must be equal or one of them 1)");
    }
    detail::check_elements(*y, [&] { return "broadcasting " + shapes() + " to " + shape_str(*y); });
    return *y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    detail::broadcast_ternary(*x[0], *x[1], *x[2], y, [](T c, T a, T b) { return c != T(0) ? a : b; });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& cond = v.x[0];
    Var<T> grad_cond, grad_a, grad_b;
    if (v.wanted[0]) grad_cond = zeros_like(cond);
    if (v.wanted[1]) grad_a = sum_to_shape_of(apply_mask(v.grad_out, cond, 0.0), v.x[1]);
    if (v.wanted[2]) grad_b = sum_to_shape_of(apply_mask(v.grad_out, logical_not(cond), 0.0), v.x[2]);
    return {grad_cond, grad_a, grad_b};
  }
};

}  // namespace

template <class T>
Var<T> where(const Var<T>& cond, const Var<T>& a, const Var<T>& b) {
  return cond.graph().apply(std::make_shared<WhereOp>(), {cond, a, b});
}

std::shared_ptr<const Op> make_where_op(const JsonCursor& attrs) { return from_no_attrs<WhereOp>(attrs); }

template Var<float> where(const Var<float>&, const Var<float>&, const Var<float>&);
template Var<double> where(const Var<double>&, const Var<double>&, const Var<double>&);

}  // namespace xgrad
