// The machinery of the elementwise ops, written once over the rows of ops/elementwise.def.
// forward: y = forward(x) element by element, or y = forward(a, b) with a and b broadcast to y
// VJP:     the row's nodes; a binary row's grad_a and grad_b summed to a's and b's shapes
// saves:   nothing beyond the inputs and the output the row's VJP reads.
#include <xgrad/ops/elementwise.hpp>

#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace elementwise {

// erf(x) = 2/sqrt(pi) x exp(-x^2) sum_n (2 x^2)^n / (1 3 5 ... (2n + 1)), a series of positive
// terms (no cancellation), as a polynomial of degree 100 in z = x^2 / 32 (Horner's scheme) after
// x is clamped to [-6, 6] (erf rounds to +-1 beyond 5.93 in float64). In z, not x^2, the
// coefficients stay within [3e-9, 9e11]: ONNX Runtime's optimizer drops an Add of a constant that
// is 0 in float32 (1e-160 is), also in a float64 graph. Within 2e-15 relative of std::erf on
// [-7, 7] (numpy, the same steps); NaN stays NaN (ONNX's Min and Max propagate it).
std::string onnx_erf(OnnxEmitter& e, const std::string& x) {
  if (e.float32()) return e.op("Erf", {x});
  constexpr int degree = 100;
  const std::string clamped = e.op("Max", {e.op("Min", {x, e.scalar(6)}), e.scalar(-6)});
  const std::string y = e.op("Mul", {clamped, clamped});
  const std::string z = e.op("Mul", {y, e.scalar(1.0 / 32)});
  std::vector<long double> c(degree + 1);  // c_n = 2^n 32^n / (1 3 5 ... (2n + 1))
  c[0] = 1;
  for (int n = 0; n < degree; ++n) c[n + 1] = c[n] * 64 / (2 * n + 3);
  std::string p = e.scalar(static_cast<double>(c[degree]));
  for (int n = degree - 1; n >= 0; --n) p = e.op("Add", {e.op("Mul", {p, z}), e.scalar(static_cast<double>(c[n]))});
  const std::string scaled = e.op("Mul", {clamped, e.scalar(two_over_sqrt_pi)});
  return e.op("Mul", {e.op("Mul", {scaled, e.op("Exp", {e.op("Neg", {y})})}), p});
}

std::string onnx_logic(OnnxEmitter& e, const std::string& op, const std::vector<std::string>& inputs) {
  const std::int64_t to = e.float32() ? 1 : 11;  // ONNX's FLOAT, DOUBLE
  return e.op("Cast", {e.op(op, inputs)}, {{"to", to}});
}

std::string onnx_bool(OnnxEmitter& e, const OnnxNode& n, std::size_t i) {
  if (!n.bool_input(i).empty()) return n.bool_input(i);   // a mask leaf's bool input
  return e.op("Cast", {n.inputs[i]}, {{"to", std::int64_t{9}}});  // 9: BOOL, true where nonzero
}

std::string onnx_product(OnnxEmitter& e, const OnnxNode& n, const std::string& op) {
  std::vector<std::string> in = n.inputs;
  for (std::size_t i = 0; i < 2 && !e.float32(); ++i) {
    const Shape& other = n.input_shapes[1 - i];
    if (shape_size(n.input_shapes[i]) != 1 || shape_size(other) < 2) continue;
    Shape row;
    for (auto d = other.rbegin(); d != other.rend() && shape_size(row) < 2; ++d) row.insert(row.begin(), *d);
    in[i] = e.op("Expand", {in[i], e.int64s(onnx_dims(row))});
  }
  return e.op(op, in);
}

}  // namespace elementwise

namespace {

// What the op of a row of either arity is: the row's name, its cost a y element, and y may
// take an input's buffer (element by element).
template <class Derived, class Rule, std::size_t Arity>
class RowOfTable : public OpFor<Derived> {
 public:
  std::string name() const override { return Rule::name; }
  std::size_t arity() const override { return Arity; }
  bool overwrites_input(std::size_t) const override { return true; }
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + Rule::cost * Op::element_count(y[0]);
  }
};

// A row as a type, one per row (below): its name, forward(element) and VJP.
template <class Rule>
class UnaryOp final : public RowOfTable<UnaryOp<Rule>, Rule, 1> {
 public:
  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

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

  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {Rule::onnx(e, n, n.inputs[0])};
  }
};

template <class Rule>
class BinaryOp final : public RowOfTable<BinaryOp<Rule>, Rule, 2> {
 public:
  Shape infer_shape(const std::vector<Shape>& x) const override {
    return detail::broadcast_or_throw(x[0], x[1]);  // within max_array_elements
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

  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {Rule::onnx(e, n, n.inputs[0], n.inputs[1])};
  }
};

// The rows as types: NAME_rule::name, forward (elementwise::NAME) and the VJP as written in the
// row (x or a, b; y; g = grad_out), each variable used or not.
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                                     \
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
    static std::string onnx(OnnxEmitter& e, [[maybe_unused]] const OnnxNode& n,           \
                            [[maybe_unused]] const std::string& x) {                      \
      return ONNX;                                                                        \
    }                                                                                     \
  };
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                               \
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
    static std::string onnx(OnnxEmitter& e, [[maybe_unused]] const OnnxNode& n,                        \
                            [[maybe_unused]] const std::string& a, [[maybe_unused]] const std::string& b) { \
      return ONNX;                                                                                    \
    }                                                                                                 \
  };
#include <xgrad/ops/elementwise.def>

}  // namespace

// Each row's function, factory and instantiations.
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                      \
  template <class T>                                                       \
  Var<T> NAME(const Var<T>& x) {                                           \
    return x.graph().apply(std::make_shared<UnaryOp<NAME##_rule>>(), {x}); \
  }                                                                        \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs) {    \
    return from_no_attrs<UnaryOp<NAME##_rule>>(attrs);                     \
  }                                                                        \
  template Var<float> NAME(const Var<float>&);                             \
  template Var<double> NAME(const Var<double>&);
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                \
  template <class T>                                                           \
  Var<T> NAME(const Var<T>& a, const Var<T>& b) {                              \
    return a.graph().apply(std::make_shared<BinaryOp<NAME##_rule>>(), {a, b}); \
  }                                                                            \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs) {        \
    return from_no_attrs<BinaryOp<NAME##_rule>>(attrs);                        \
  }                                                                            \
  template Var<float> NAME(const Var<float>&, const Var<float>&);              \
  template Var<double> NAME(const Var<double>&, const Var<double>&);
#include <xgrad/ops/elementwise.def>

}  // namespace xgrad
