// forward: y = a + b                      a and b broadcast to y's shape (numpy's rules)
// VJP:     grad_a = sum_to(grad_out, a.shape), grad_b = sum_to(grad_out, b.shape)
//          (grad_out itself, no node, where the shapes agree)
// saves:   nothing.
#include <xgrad/ops/add.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

class AddOp final : public OpFor<AddOp> {
 public:
  std::string name() const override { return "add"; }
  std::size_t arity() const override { return 2; }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element

  Shape infer_shape(const std::vector<Shape>& x) const override {
    return detail::broadcast_or_throw(x[0], x[1]);  // within max_array_elements
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    detail::broadcast_binary(*x[0], *x[1], y, [](T a, T b) { return a + b; });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    Var<T> grad_a, grad_b;
    if (v.wanted[0]) grad_a = sum_to_shape_of(v.grad_out, v.x[0]);
    if (v.wanted[1]) grad_b = sum_to_shape_of(v.grad_out, v.x[1]);
    return {grad_a, grad_b};
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
