// forward: y = a * b                      a, b, y of one shape
// VJP:     grad_a = grad_out * b, grad_b = grad_out * a
// saves:   nothing beyond its inputs a and b.
#include <xgrad/ops/mul.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/common.hpp>

namespace xgrad {

namespace {

class MulOp final : public OpFor<MulOp> {
 public:
  std::string name() const override { return "mul"; }
  std::size_t arity() const override { return 2; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0] != x[1]) {
      throw error("shapes differ: a is " + shape_str(x[0]) + ", b is " + shape_str(x[1]) +
                  " (mul does not broadcast; use broadcast_to)");
    }
    return x[0];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* a = x[0]->data();
    const T* b = x[1]->data();
    T* dst = y.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) dst[i] = a[i] * b[i];
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    Var<T> grad_a, grad_b;
    if (v.wanted[0]) grad_a = mul(v.grad_out, v.x[1]);
    if (v.wanted[1]) grad_b = mul(v.grad_out, v.x[0]);
    return {grad_a, grad_b};
  }
};

}  // namespace

template <class T>
Var<T> mul(const Var<T>& a, const Var<T>& b) {
  return a.graph().apply(std::make_shared<MulOp>(), {a, b});
}

std::shared_ptr<const Op> make_mul_op(const JsonCursor& attrs) {
  attrs.check_object({});
  return std::make_shared<MulOp>();
}

template Var<float> mul(const Var<float>&, const Var<float>&);
template Var<double> mul(const Var<double>&, const Var<double>&);

}  // namespace xgrad
