// Optimizers and initialisation for parameters: leaves of role parameter, updated between
// replays so that one graph serves a whole training loop.
#pragma once

#include <cstdint>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Stochastic gradient descent with momentum: for each parameter p with gradient g,
//   velocity = momentum * velocity + g;  p -= lr * velocity     (velocity starts at 0).
// momentum = 0 is plain SGD.
template <class T>
class Sgd {
 public:
  // Throws xgrad::error, naming the value, unless every Var is a parameter leaf, lr is finite
  // and > 0, and 0 <= momentum < 1.
  Sgd(std::vector<Var<T>> params, double lr, double momentum = 0.0);
  // One update from the gradients (one per parameter, of its graph and shape, e.g.
  // grad(loss, params)); the parameters' values change in their graph: replay() then
  // recomputes the loss. Throws xgrad::error, and changes nothing, if a gradient is missing,
  // empty, of another graph than its parameter or of another shape.
  void step(const std::vector<Var<T>>& grads);

 private:
  std::vector<Var<T>> m_params;
  double m_lr, m_momentum;
  std::vector<xt::xarray<T>> m_velocity;
};

// Adam (Kingma and Ba, 2015): with t the step count,
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   p -= lr * (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps).
template <class T>
class Adam {
 public:
  // Throws xgrad::error, naming the value, unless every Var is a parameter leaf, lr and eps are
  // finite and > 0, and 0 <= beta1, beta2 < 1.
  Adam(std::vector<Var<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  // As Sgd::step.
  void step(const std::vector<Var<T>>& grads);

 private:
  std::vector<Var<T>> m_params;
  double m_lr, m_beta1, m_beta2, m_eps;
  long m_t = 0;
  std::vector<xt::xarray<T>> m_m, m_v;
};

// Initial weights, deterministic for a seed (std::mt19937_64), fans from the last two axes
// (fan_in = shape[-2], fan_out = shape[-1]; a rank-1 shape has fan_in = fan_out = its length):
// Glorot uniform, U(-a, a) with a = sqrt(6 / (fan_in + fan_out)), for linear and tanh layers;
// He normal, N(0, 2 / fan_in), for layers followed by relu.
// Both throw xgrad::error naming the shape, before allocating, if it holds more than
// max_array_elements = 2^28 elements (axes of length 0 counted as 1).
template <class T>
xt::xarray<T> glorot_uniform(const Shape& shape, std::uint64_t seed);
template <class T>
xt::xarray<T> he_normal(const Shape& shape, std::uint64_t seed);

}  // namespace xgrad
