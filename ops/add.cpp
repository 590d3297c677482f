// forward: y = a + b                      a, b, y of one shape
// VJP:     grad_a = grad_out, grad_b = grad_out
// saves:   nothing.
#include <xgrad/ops/add.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/common.hpp>

namespace xgrad {

namespace {

class AddOp final : public OpFor<AddOp> {
 public:
  std::string name() const override { return "add"; }
  std::size_t arity() const override { return 2; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0] != x[1]) {
      throw error("shapes differ: a is " + shape_str(x[0]) + ", b is " + shape_str(x[1]) +
                  " (add does not broadcast; use broadcast_to)");
    }
    return x[0];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* a = x[0]->data();
    const T* b = x[1]->data();
    T* dst = y.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) dst[i] = a[i] + b[i];
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {v.wanted[0] ? v.grad_out : Var<T>(), v.wanted[1] ? v.grad_out : Var<T>()};
  }
};

}  // namespace

template <class T>
Var<T> add(const Var<T>& a, const Var<T>& b) {
  return a.graph().apply(std::make_shared<AddOp>(), {a, b});
}

std::shared_ptr<const Op> make_add_op(const JsonCursor& attrs) {
  attrs.check_object({});
  return std::make_shared<AddOp>();
}

template Var<float> add(const Var<float>&, const Var<float>&);
template Var<double> add(const Var<double>&, const Var<double>&);

}  // namespace xgrad
