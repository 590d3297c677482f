#include <xgrad/lib/variants.hpp>

#include <cmath>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/concat.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/slice.hpp>

namespace xgrad {

template <class T>
Var<T> rope(const Var<T>& x, const Var<T>& positions, double base) {
  const Shape xs = x.shape(), ps = positions.shape();
  const auto shapes = [&] { return "x is " + shape_str(xs) + ", positions " + shape_str(ps); };
  if (xs.size() < 2) throw error("rope: x must be (..., T, d), of rank >= 2: " + shapes());
  const std::size_t d = xs.back();
  if (d == 0 || d % 2 != 0) {
    throw error("rope: the last axis of x must be even and non-empty (the half-split pairs dimension i with i + d/2): " +
                shapes());
  }
  if (!(std::isfinite(base) && base > 0)) throw error("rope: base must be finite and > 0, got " + std::to_string(base));
  const Shape lead(xs.begin(), xs.end() - 1);
  const auto b = detail::broadcast_shapes(lead, ps);
  if (!b || *b != lead) {
    throw error("rope: positions must broadcast against x's shape without its last axis, " + shape_str(lead) +
                ", by numpy's rules ((T), or (B, 1, T) for (B, H, T, d)): " + shapes());
  }
  const std::size_t h = d / 2;
  xt::xarray<T> inv = xt::xarray<T>::from_shape({h});
  for (std::size_t i = 0; i < h; ++i) inv(i) = static_cast<T>(std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(d)));
  const Var<T> freq = x.graph().constant("", std::move(inv));
  Shape column = ps;
  column.push_back(1);
  const Var<T> angle = mul(reshape(positions, column), freq);  // (P..., T, h)
  const Var<T> c = cos(angle), s = sin(angle);
  const Var<T> x1 = slice(x, -1, 0, h), x2 = slice(x, -1, h, d);
  return concat(std::vector<Var<T>>{sub(mul(x1, c), mul(x2, s)), add(mul(x2, c), mul(x1, s))}, -1);
}

template <class T>
Var<T> rope_positions(Graph<T>& g, std::size_t t) {
  xt::xarray<T> p = xt::xarray<T>::from_shape({t});
  for (std::size_t i = 0; i < t; ++i) p(i) = static_cast<T>(i);
  return g.constant("positions", std::move(p));
}

template Var<float> rope(const Var<float>&, const Var<float>&, double);
template Var<double> rope(const Var<double>&, const Var<double>&, double);
template Var<float> rope_positions(Graph<float>&, std::size_t);
template Var<double> rope_positions(Graph<double>&, std::size_t);

}  // namespace xgrad
