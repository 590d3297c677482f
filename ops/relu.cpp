// forward: y = max(x, 0)                        same shape; NaN -> NaN
// VJP:     grad_x = apply_mask(grad_out, y, 0)  (y != 0 exactly where x > 0, or x is NaN)
// saves:   its output y (the VJP reads y, never x).
#include <xgrad/ops/relu.hpp>

#include <cmath>

#include <xgrad/ops/apply_mask.hpp>

namespace xgrad {

namespace {

class ReluOp final : public OpFor<ReluOp> {
 public:
  std::string name() const override { return "relu"; }
  std::size_t arity() const override { return 1; }
  bool overwrites_input(std::size_t) const override { return true; }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) {
      dst[i] = src[i] > T(0) || std::isnan(src[i]) ? src[i] : T(0);
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {apply_mask(v.grad_out, v.y, 0.0)};
  }
};

}  // namespace

template <class T>
Var<T> relu(const Var<T>& x) {
  return x.graph().apply(std::make_shared<ReluOp>(), {x});
}

std::shared_ptr<const Op> make_relu_op(const JsonCursor& attrs) {
  attrs.check_object({});
  return std::make_shared<ReluOp>();
}

template Var<float> relu(const Var<float>&);
template Var<double> relu(const Var<double>&);

}  // namespace xgrad
