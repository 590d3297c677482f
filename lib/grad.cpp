#include <xgrad/lib/grad.hpp>

#include <xtensor/xbuilder.hpp>

#include <xgrad/graph/backward.hpp>
#include <xgrad/ops/elementwise.hpp>

namespace xgrad {

template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs, const Var<T>& grad_out) {
  return backward<T>(y, xs, grad_out, sum_contributions<T>);
}

template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs, const xt::xarray<T>& grad_out) {
  return backward<T>(y, xs, grad_out, sum_contributions<T>);
}

template <class T>
std::vector<Var<T>> grad(const Var<T>& y, const std::vector<Var<T>>& xs) {
  if (!y.valid()) throw error("grad: y is an empty Var");
  return grad(y, xs, xt::xarray<T>(xt::ones<T>(y.value().shape())));
}

#define XGRAD_INSTANTIATE_GRAD(T)                                                                \
  template std::vector<Var<T>> grad(const Var<T>&, const std::vector<Var<T>>&);                  \
  template std::vector<Var<T>> grad(const Var<T>&, const std::vector<Var<T>>&, const xt::xarray<T>&); \
  template std::vector<Var<T>> grad(const Var<T>&, const std::vector<Var<T>>&, const Var<T>&);
XGRAD_INSTANTIATE_GRAD(float)
XGRAD_INSTANTIATE_GRAD(double)
#undef XGRAD_INSTANTIATE_GRAD

}  // namespace xgrad
