// The machinery of the elementwise ops, written once over the rows of ops/elementwise.def.
// forward: y = forward(x) element by element, or y = forward(a, b) with a and b broadcast to y
// VJP:     the row's nodes; a binary row's grad_a and grad_b summed to a's and b's shapes
// saves:   nothing beyond the inputs and the output the row's VJP reads.
#include <xgrad/ops/elementwise.hpp>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

// A row as a type, one per row (below): its name, forward(element) and VJP.
template <class Rule>
class UnaryOp final : public OpFor<UnaryOp<Rule>> {
 public:
  std::string name() const override { return Rule::name; }
  std::size_t arity() const override { return 1; }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + Rule::cost * Op::element_count(y[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) dst[i] = Rule::forward(src[i]);
  }

  // Called only when grad_x is wanted (the graph skips a node none of whose inputs needs one).
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {Rule::vjp(v.x[0], v.y, v.grad_out)};
  }
};

template <class Rule>
class BinaryOp final : public OpFor<BinaryOp<Rule>> {
 public:
  std::string name() const override { return Rule::name; }
  std::size_t arity() const override { return 2; }
  bool overwrites_input(std::size_t) const override { return true; }  // element by element

  Shape infer_shape(const std::vector<Shape>& x) const override {
    return detail::broadcast_or_throw(x[0], x[1]);  // within max_array_elements
  }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + Rule::cost * Op::element_count(y[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    detail::broadcast_binary(*x[0], *x[1], y, [](T a, T b) { return Rule::forward(a, b); });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& a = v.x[0];
    const Var<T>& b = v.x[1];
    Var<T> grad_a, grad_b;
    if (v.wanted[0]) grad_a = sum_to_shape_of(Rule::vjp_a(a, b, v.y, v.grad_out), a);
    if (v.wanted[1]) grad_b = sum_to_shape_of(Rule::vjp_b(a, b, v.y, v.grad_out), b);
    return {grad_a, grad_b};
  }
};

// The rows as types: NAME_rule::name, forward (elementwise::NAME) and the VJP as written in the
// row (x or a, b; y; g = grad_out), each variable used or not.
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP)                                     \
  struct NAME##_rule {                                                                    \
    static constexpr const char* name = #NAME;                                            \
    static constexpr double cost = COST;                                                  \
    template <class T>                                                                    \
    static T forward(T x) {                                                               \
      return elementwise::NAME(x);                                                        \
    }                                                                                     \
    template <class T>                                                                    \
    static Var<T> vjp([[maybe_unused]] const Var<T>& x, [[maybe_unused]] const Var<T>& y, \
                      [[maybe_unused]] const Var<T>& g) {                                 \
      return VJP;                                                                         \
    }                                                                                     \
  };
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B)                               \
  struct NAME##_rule {                                                                        \
    static constexpr const char* name = #NAME;                                                \
    static constexpr double cost = COST;                                                      \
    template <class T>                                                                        \
    static T forward(T a, T b) {                                                              \
      return elementwise::NAME(a, b);                                                         \
    }                                                                                         \
    template <class T>                                                                        \
    static Var<T> vjp_a([[maybe_unused]] const Var<T>& a, [[maybe_unused]] const Var<T>& b,   \
                        [[maybe_unused]] const Var<T>& y, [[maybe_unused]] const Var<T>& g) { \
      return VJP_A;                                                                           \
    }                                                                                         \
    template <class T>                                                                        \
    static Var<T> vjp_b([[maybe_unused]] const Var<T>& a, [[maybe_unused]] const Var<T>& b,   \
                        [[maybe_unused]] const Var<T>& y, [[maybe_unused]] const Var<T>& g) { \
      return VJP_B;                                                                           \
    }                                                                                         \
  };
#include <xgrad/ops/elementwise.def>

}  // namespace

// Each row's function, factory and instantiations.
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP)                      \
  template <class T>                                                       \
  Var<T> NAME(const Var<T>& x) {                                           \
    return x.graph().apply(std::make_shared<UnaryOp<NAME##_rule>>(), {x}); \
  }                                                                        \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs) {    \
    attrs.check_object({});                                                \
    return std::make_shared<UnaryOp<NAME##_rule>>();                       \
  }                                                                        \
  template Var<float> NAME(const Var<float>&);                             \
  template Var<double> NAME(const Var<double>&);
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B)                \
  template <class T>                                                           \
  Var<T> NAME(const Var<T>& a, const Var<T>& b) {                              \
    return a.graph().apply(std::make_shared<BinaryOp<NAME##_rule>>(), {a, b}); \
  }                                                                            \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs) {        \
    attrs.check_object({});                                                    \
    return std::make_shared<BinaryOp<NAME##_rule>>();                          \
  }                                                                            \
  template Var<float> NAME(const Var<float>&, const Var<float>&);              \
  template Var<double> NAME(const Var<double>&, const Var<double>&);
#include <xgrad/ops/elementwise.def>

}  // namespace xgrad
