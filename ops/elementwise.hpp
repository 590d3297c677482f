// The elementwise ops (relu, neg, exp, log, sqrt, tanh, erf, sin, cos, sigmoid, abs,
// reciprocal, rsqrt, logical_not; add, sub, mul, div, maximum, minimum, the comparisons equal,
// less, less_equal, greater, greater_equal, and logical_and, logical_or): one row each in
// ops/elementwise.def, which states each op's forward, VJP, shapes and errors; and silu, their
// composition.
//
// The names of the comparisons and the logic are numpy's. With `using namespace xgrad;` they
// are called unqualified (less(a, b)); where `using namespace std;` is in force as well, the
// function objects std::less, std::less_equal, std::greater, std::greater_equal,
// std::logical_and, std::logical_or and std::logical_not make such a call ambiguous: write
// xgrad::less(a, b) there. (xtensor's xt::less and the like take only xtensor expressions.)
#pragma once

#include <cmath>
#include <memory>

#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/json.hpp>

namespace xgrad {

// For each row XGRAD_UNARY(name, ...):
//   template <class T> Var<T> name(const Var<T>& x);            y = forward(x) element by element
// For each row XGRAD_BINARY(name, ...):
//   template <class T> Var<T> name(const Var<T>& a, const Var<T>& b);   a and b broadcast to y
// and for both the op from its exported attributes, {} (ops/registry):
//   std::shared_ptr<const Op> make_<name>_op(const JsonCursor& attrs);
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                  \
  template <class T>                                                   \
  Var<T> NAME(const Var<T>& x);                                        \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs);
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)        \
  template <class T>                                                   \
  Var<T> NAME(const Var<T>& a, const Var<T>& b);                       \
  std::shared_ptr<const Op> make_##NAME##_op(const JsonCursor& attrs);
#include <xgrad/ops/elementwise.def>

// silu(x) = x sigmoid(x) (Hendrycks and Gimpel 2016; Ramachandran et al. 2017's swish with
// beta = 1; torch.nn.functional.silu): a composition of the mul and sigmoid rows, so its VJP is
// theirs, g (y_s + x y_s (1 - y_s)) with y_s = sigmoid(x), and its export the two ONNX nodes.
template <class T>
Var<T> silu(const Var<T>& x) {
  return mul(x, sigmoid(x));
}

// How gradient contributions to one output combine, for grad() and for the VJP rules that run
// backward() (graph/backward.hpp's Accumulate): with add.
template <class T>
Var<T> sum_contributions(const Var<T>& a, const Var<T>& b) {
  return add(a, b);
}

// The forward of each row on one element: elementwise::relu(-2.0) == 0.0, elementwise::add(a, b).
// The ops run these; tests take them as the reference of a row.
namespace elementwise {
// Where the property tests draw a row's inputs (ops/elementwise.def, the column domain).
enum class Domain { real, positive, mask };
// The logistic function 1 / (1 + e^-x) without overflow on either side: e^x / (1 + e^x) for
// x < 0 (the sigmoid row's forward). NaN gives NaN.
template <class T>
T logistic(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
inline constexpr double two_over_sqrt_pi = 1.12837916709551257390;  // 2 / sqrt(pi), erf's slope at 0
// The ONNX lowering of erf, for the erf row and gelu: Erf in float32; in float64, where ONNX
// Runtime has no Erf kernel, a series of standard ops (ops/elementwise.cpp).
std::string onnx_erf(OnnxEmitter& e, const std::string& x);
// The ONNX lowering of mul and div: `op` (Mul, Div) of the node's inputs. In a float64 graph an
// operand of one element beside a larger one is first expanded to a row of the other's last
// axes: ONNX Runtime fuses a MatMul and a Mul or Div by a one-element constant into FusedMatMul,
// whose float attribute would round the factor to float32 (OnnxEmitter::factor).
std::string onnx_product(OnnxEmitter& e, const OnnxNode& n, const std::string& op);
// The lowering of a comparison or of logic: ONNX's `op` (Less, Equal, And, Not, ...) of the
// named values, whose bool result is cast to the graph's float type (1 and 0).
std::string onnx_logic(OnnxEmitter& e, const std::string& op, const std::vector<std::string>& inputs);
// Input i of node n as an ONNX bool, true where it is nonzero (NaN included): a mask leaf's bool
// input as it is, any other value cast to bool.
std::string onnx_bool(OnnxEmitter& e, const OnnxNode& n, std::size_t i);
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX) \
  template <class T>                                  \
  T NAME(T x) {                                       \
    return FORWARD;                                   \
  }
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX) \
  template <class T>                                            \
  T NAME(T a, T b) {                                            \
    return FORWARD;                                             \
  }
#include <xgrad/ops/elementwise.def>
}  // namespace elementwise

}  // namespace xgrad
