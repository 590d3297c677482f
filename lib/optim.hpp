// Optimizers and initialisation for parameters: leaves of role parameter, updated between
// replays so that one graph serves a whole training loop.
#pragma once

#include <cstdint>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// The learning rate of every optimizer is a finite number >= 0 (0 allowed, as in PyTorch: a
// cosine schedule may end there; a step at lr 0 leaves the parameters as they are, Adam's and
// AdamW's moments and step count still advance). lr() reads it; set_lr(lr) changes it for the
// next steps, for schedules (warm-up, cosine decay), and throws xgrad::error as the constructor
// does ("Adam::set_lr: lr must be a finite number >= 0, got -1"), changing nothing.
//
// step(grads) takes one gradient per parameter, of its graph and shape, e.g. grad(loss, params),
// and reads their values as they are now (so after clip_grad_norm, below). The parameters'
// values change in their graph: replay() then recomputes the loss and the gradients. It throws
// xgrad::error, and changes nothing, if a gradient is missing, empty, of another graph than its
// parameter or of another shape. The element arithmetic is done in T, in PyTorch's (1.13) order
// of operations, so float64 results agree with torch.optim's to rounding.

// Stochastic gradient descent with momentum, as torch.optim.SGD (dampening 0, no Nesterov, no
// weight decay): for each parameter p with gradient g,
//   velocity = momentum * velocity + g;  p -= lr * velocity     (velocity starts at 0).
// momentum = 0 is plain SGD.
template <class T>
class Sgd {
 public:
  // Throws xgrad::error, naming the value, unless every Var is a parameter leaf, lr is finite
  // and >= 0, and 0 <= momentum < 1.
  Sgd(std::vector<Var<T>> params, double lr, double momentum = 0.0);
  void step(const std::vector<Var<T>>& grads);
  double lr() const { return m_lr; }
  void set_lr(double lr);

 private:
  std::vector<Var<T>> m_params;
  double m_lr, m_momentum;
  std::vector<xt::xarray<T>> m_velocity;
};

// The state of an Adam or AdamW optimizer, to save and restore it (a checkpoint that resumes
// training bit for bit): the step count t (0 before the first step) and the moments m and v, one
// array per parameter in the constructor's order, of the parameter's shape.
template <class T>
struct AdamState {
  long step = 0;
  std::vector<xt::xarray<T>> m, v;
};

// Adam (Kingma and Ba, 2015), as torch.optim.Adam (weight_decay 0, amsgrad and maximize false):
// with t the step count (from 1), m and v starting at 0,
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   p -= (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
template <class T>
class Adam {
 public:
  // Throws xgrad::error, naming the value, unless every Var is a parameter leaf, lr is finite
  // and >= 0, eps is finite and > 0, and 0 <= beta1, beta2 < 1.
  Adam(std::vector<Var<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8);
  void step(const std::vector<Var<T>>& grads);
  double lr() const { return m_lr; }
  void set_lr(double lr);
  const AdamState<T>& state() const { return m_state; }
  // Replaces the state. Throws xgrad::error, changing nothing, unless step >= 0 and m and v
  // hold one array per parameter, of its shape ("Adam::set_state: m[1] is (3,), the parameter (2, 3)").
  void set_state(AdamState<T> state);

 private:
  std::vector<Var<T>> m_params;
  double m_lr, m_beta1, m_beta2, m_eps;
  AdamState<T> m_state;
};

// AdamW (Loshchilov and Hutter, 2019), as torch.optim.AdamW (amsgrad and maximize false):
// Adam with decoupled weight decay, applied first, at the learning rate of the step:
//   p *= 1 - lr * weight_decay;  then Adam's step above.
// lr defaults to 1e-3, as in PyTorch and Adam.
template <class T>
class AdamW {
 public:
  // Throws xgrad::error, naming the value, as Adam does, and unless weight_decay is finite and
  // >= 0 (0 is Adam).
  AdamW(std::vector<Var<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01);
  void step(const std::vector<Var<T>>& grads);
  double lr() const { return m_lr; }
  void set_lr(double lr);
  const AdamState<T>& state() const { return m_state; }
  // Replaces the state. Throws xgrad::error, changing nothing, unless step >= 0 and m and v
  // hold one array per parameter, of its shape ("AdamW::set_state: m[1] is (3,), the parameter (2, 3)").
  void set_state(AdamState<T> state);

 private:
  std::vector<Var<T>> m_params;
  double m_lr, m_beta1, m_beta2, m_eps, m_weight_decay;
  AdamState<T> m_state;
};

// Gradient clipping by the global norm, as torch.nn.utils.clip_grad_norm_ (norm_type 2,
// error_if_nonfinite false) in PyTorch 1.13: with total = sqrt(sum over the grads of
// sum(g^2)) (computed in double) and clip_coef = max_norm / (total + 1e-6), every gradient is
// multiplied by clip_coef when clip_coef < 1, that is when total + 1e-6 > max_norm. Returns
// total, before clipping; 0 for no grads. A non-finite total gives the gradients the value
// PyTorch gives them (NaN for a NaN total; g * 0 for an infinite one) and is returned as it is.
//
// The gradients are scaled in place, so that `clip_grad_norm(grads, 1.0); opt.step(grads);`
// steps with the clipped values: the value of a gradient node is overwritten in its graph, and
// the next replay() recomputes it unclipped (clip again after each replay, as in PyTorch after
// each backward). Nodes that replay() does not recompute are leaves: an input, parameter or
// constant of the caller's keeps its scaled value; the zeros that grad() gives a parameter the
// loss does not reach are left as they are. A Var listed twice counts twice in the norm (one
// gradient per parameter) and is scaled once.
// max_norm 0 zeroes every gradient, as in PyTorch.
// Throws xgrad::error, and changes nothing, unless max_norm is finite and >= 0, every grad is a
// Var with a value (not empty, released by keep_only or an index leaf), and none is the seed
// grad_out that grad() made (a leaf every replay reuses: scaling it would scale every later
// gradient).
template <class T>
double clip_grad_norm(const std::vector<Var<T>>& grads, double max_norm);

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
