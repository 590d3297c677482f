// Operators on Var<T>: arithmetic written as arithmetic. Each builds exactly the nodes of the
// named function (docs/api.md, "Operators"):
//   a + b  add(a, b)      a - b  sub(a, b)      a * b  mul(a, b)      a / b  div(a, b)      -a  neg(a)
// with numpy broadcasting between a and b. A double on either side:
//   x * s, s * x      scale(x, s): no constant node
//   x + s, s + x      add(x, c), add(c, x)      c a constant leaf of shape () holding s rounded to T
//   x - s, s - x      sub(x, c), sub(c, x)      (unnamed; one per use, exported with the graph)
//   x / s, s / x      div(x, c), div(c, x)      (x / s divides, as PyTorch: not scale(x, 1 / s))
#pragma once

#include <xgrad/graph/graph.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad {

// The constant leaf a double becomes beside x (shape (), unnamed, s rounded to T).
template <class T>
Var<T> scalar_constant(const Var<T>& x, double s) {
  xt::xarray<T> value = xt::xarray<T>::from_shape({});
  value() = static_cast<T>(s);
  return x.graph().constant("", std::move(value));
}

template <class T>
Var<T> operator+(const Var<T>& a, const Var<T>& b) { return add(a, b); }
template <class T>
Var<T> operator-(const Var<T>& a, const Var<T>& b) { return sub(a, b); }
template <class T>
Var<T> operator*(const Var<T>& a, const Var<T>& b) { return mul(a, b); }
template <class T>
Var<T> operator/(const Var<T>& a, const Var<T>& b) { return div(a, b); }
template <class T>
Var<T> operator-(const Var<T>& a) { return neg(a); }

template <class T>
Var<T> operator*(const Var<T>& x, double s) { return scale(x, s); }
template <class T>
Var<T> operator*(double s, const Var<T>& x) { return scale(x, s); }
template <class T>
Var<T> operator+(const Var<T>& x, double s) { return add(x, scalar_constant(x, s)); }
template <class T>
Var<T> operator+(double s, const Var<T>& x) { return add(scalar_constant(x, s), x); }
template <class T>
Var<T> operator-(const Var<T>& x, double s) { return sub(x, scalar_constant(x, s)); }
template <class T>
Var<T> operator-(double s, const Var<T>& x) { return sub(scalar_constant(x, s), x); }
template <class T>
Var<T> operator/(const Var<T>& x, double s) { return div(x, scalar_constant(x, s)); }
template <class T>
Var<T> operator/(double s, const Var<T>& x) { return div(scalar_constant(x, s), x); }

}  // namespace xgrad
