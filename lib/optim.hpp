// Optimizers and initialisation for parameters: leaves of role parameter, updated between
// replays so that one graph serves a whole training loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Parameter groups, as torch.optim's param_groups: each optimizer takes either a list of
// parameters (one group, taking the constructor's lr and weight_decay) or groups, each with its
// own lr and weight_decay. A field left unset takes the constructor's value, as a key missing
// from a torch param_group dict takes the optimizer's default:
//   AdamW<float> opt({{weights, std::nullopt, 0.1}, {biases, 1e-3, 0.0}}, 3e-4);
// Only lr and weight_decay are per group; momentum, betas and eps are the optimizer's.
// A group may hold no parameters (decay_groups of a model without biases gives one). A braced
// list of groups that give only one parameter each, {{{a}}, {{b}}}, also reads as a list of
// Vars (the call is ambiguous): name the type, std::vector<ParamGroup<T>>{{{a}}, {{b}}}.
template <class T>
struct ParamGroup {
  std::vector<Var<T>> params;
  std::optional<double> lr = std::nullopt;            // unset: the optimizer's lr
  std::optional<double> weight_decay = std::nullopt;  // unset: the optimizer's weight_decay
};

// nanoGPT's configure_optimizers split: two groups, {the parameters of rank >= 2 (matmul
// weights, embedding tables), weight_decay} and {the rest (biases, layer_norm gains and shifts,
// scalars), weight_decay 0}, each in the order of params, both with lr unset (the optimizer's).
// Either group may be empty. Pass the groups to the optimizer and take the gradients in its
// order, opt.params(), which is the weights first:
//   AdamW<float> opt(decay_groups(g.parameters(), 0.1), 3e-4);
//   const auto grads = grad(loss, opt.params());
// Throws xgrad::error, as the optimizers do, unless every Var is a parameter leaf, given once,
// and weight_decay is finite and >= 0 ("decay_groups: weight_decay must be a finite number >= 0,
// got -1").
template <class T>
std::vector<ParamGroup<T>> decay_groups(const std::vector<Var<T>>& params, double weight_decay);

// What the three optimizers share: their groups and the learning rates.
//
// The learning rate is a finite number >= 0 (0 allowed, as in PyTorch: a cosine schedule may
// end there; a step at lr 0 leaves the parameters as they are, Adam's and AdamW's moments and
// step count still advance). set_lr(lr) sets every group's lr for the next steps, for schedules
// (warm-up, cosine decay); set_lr(group, lr) sets one group's (a schedule over groups of
// different lrs calls it for each group). lr() reads the lr the groups share and throws
// xgrad::error if they differ; lr(group) reads one group's. Each throws xgrad::error, changing
// nothing, for a bad lr ("Adam::set_lr: lr must be a finite number >= 0, got -1",
// "Adam::set_lr: groups[1].lr must be ...") or a group that does not exist ("Adam::lr: no
// groups[2], the optimizer has 2 groups").
//
// groups() are the groups as given, every lr and weight_decay set (the constructor's where the
// group left it unset); params() are their parameters concatenated in group order (for a list of
// parameters: the list): the order of step()'s gradients and of AdamState's moments.
template <class T>
class OptimizerGroups {
 public:
  double lr() const;
  double lr(std::size_t group) const;
  void set_lr(double lr);
  void set_lr(std::size_t group, double lr);
  const std::vector<ParamGroup<T>>& groups() const { return m_groups; }
  const std::vector<Var<T>>& params() const { return m_params; }

 protected:
  // Check the constructor's lr and weight_decay, then the parameters: each a parameter leaf,
  // given once in all the groups; each group's lr and weight_decay; at least one group. `who`
  // names the optimizer in the errors, which name params[i] for a list and groups[k].params[i],
  // groups[k].lr, groups[k].weight_decay for groups.
  OptimizerGroups(std::vector<Var<T>> params, double lr, double weight_decay, const char* who);
  OptimizerGroups(std::vector<ParamGroup<T>> groups, double lr, double weight_decay, const char* who);

  std::vector<ParamGroup<T>> m_groups;
  std::vector<Var<T>> m_params;
  const char* m_who;

 private:
  std::size_t checked_group(std::size_t group, const char* what) const;
};

// step(grads) takes one gradient per parameter, in params() order, of its graph and shape, e.g.
// grad(loss, opt.params()), and reads their values as they are now (so after clip_grad_norm,
// below). The parameters' values change in their graph: replay() then recomputes the loss and
// the gradients. It throws xgrad::error, and changes nothing, if a gradient is missing, empty,
// of another graph than its parameter or of another shape ("params[i]" is the index in
// params()). The element arithmetic is done in T, in PyTorch's (1.13) order of operations, so
// float64 results agree with torch.optim's to rounding.
//
// Every constructor throws xgrad::error, naming the value (and the group), unless every Var is
// a parameter leaf, no parameter is given twice (in one group or in two: torch refuses the
// second and, in 1.13, only warns of the first; here a parameter given twice would be stepped
// twice), there is at least one group (a list of parameters is one group, and may be empty),
// every lr is finite and >= 0 and every weight_decay finite and >= 0, the constructor's
// included ("Adam: groups[1].weight_decay must be a finite number >= 0, got -0.1").

// Stochastic gradient descent with momentum, as torch.optim.SGD (dampening 0, no Nesterov): for
// each parameter p with gradient g, the lr and weight_decay of its group,
//   d = g + weight_decay * p;  velocity = momentum * velocity + d;  p -= lr * velocity
// (velocity = d at the first step; momentum = 0 is plain SGD: p -= lr * d). weight_decay is an
// L2 penalty added to the gradient, as torch's: scaled by lr and carried by the momentum.
template <class T>
class Sgd : public OptimizerGroups<T> {
 public:
  // Also throws xgrad::error unless 0 <= momentum < 1.
  Sgd(std::vector<Var<T>> params, double lr, double momentum = 0.0, double weight_decay = 0.0);
  Sgd(std::vector<ParamGroup<T>> groups, double lr, double momentum = 0.0, double weight_decay = 0.0);
  void step(const std::vector<Var<T>>& grads);

 private:
  void init(double momentum);
  double m_momentum;
  bool m_started = false;  // the velocities hold a step (torch's momentum_buffer is not None)
  std::vector<xt::xarray<T>> m_velocity;
};

// The state of an Adam or AdamW optimizer, to save and restore it (a checkpoint that resumes
// training bit for bit): the step count t (0 before the first step, one count for every group)
// and the moments m and v, one array per parameter in params() order (the groups' parameters
// concatenated in group order; a list's order for a list), of the parameter's shape.
template <class T>
struct AdamState {
  long step = 0;
  std::vector<xt::xarray<T>> m, v;
};

// What Adam and AdamW share: the moments, the step and the state. Not made directly: Adam and
// AdamW below.
template <class T>
class AdamBase : public OptimizerGroups<T> {
 public:
  void step(const std::vector<Var<T>>& grads);
  const AdamState<T>& state() const { return m_state; }
  // Replaces the state. Throws xgrad::error, changing nothing, unless step >= 0 and m and v
  // hold one array per parameter of params(), of its shape ("Adam::set_state: m[1] is (3,), the
  // parameter (2, 3)").
  void set_state(AdamState<T> state);

 protected:
  // Params: a list of Vars or of ParamGroups. `decoupled`: AdamW's weight decay, else Adam's L2.
  template <class Params>
  AdamBase(Params params, double lr, double beta1, double beta2, double eps, double weight_decay, const char* name,
           bool decoupled);

 private:
  std::string m_name;
  bool m_decoupled;
  double m_beta1, m_beta2, m_eps;
  AdamState<T> m_state;
};

// Adam (Kingma and Ba, 2015), as torch.optim.Adam (amsgrad and maximize false): with t the step
// count (from 1), m and v starting at 0, for each parameter p with gradient g and the lr and
// weight_decay of its group,
//   g = g + weight_decay * p   (an L2 penalty, as torch.optim.Adam's; weight_decay 0 by default)
//   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2;
//   p -= (lr / (1 - beta1^t)) m / (sqrt(v) / sqrt(1 - beta2^t) + eps).
// Also throws xgrad::error unless eps is finite and > 0, and 0 <= beta1, beta2 < 1.
template <class T>
class Adam : public AdamBase<T> {
 public:
  Adam(std::vector<Var<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
       double weight_decay = 0.0)
      : AdamBase<T>(std::move(params), lr, beta1, beta2, eps, weight_decay, "Adam", false) {}
  Adam(std::vector<ParamGroup<T>> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0.0)
      : AdamBase<T>(std::move(groups), lr, beta1, beta2, eps, weight_decay, "Adam", false) {}
};

// AdamW (Loshchilov and Hutter, 2019), as torch.optim.AdamW (amsgrad and maximize false):
// Adam with decoupled weight decay, applied first, at the lr of the step and of the group:
//   p *= 1 - lr * weight_decay;  then Adam's step above (with no L2 term).
// lr defaults to 1e-3 and weight_decay to 0.01, as in PyTorch. Throws xgrad::error as Adam does
// (weight_decay 0 is Adam); its messages name AdamW ("AdamW::set_state: m[1] is (3,), ...").
template <class T>
class AdamW : public AdamBase<T> {
 public:
  AdamW(std::vector<Var<T>> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double eps = 1e-8,
        double weight_decay = 0.01)
      : AdamBase<T>(std::move(params), lr, beta1, beta2, eps, weight_decay, "AdamW", true) {}
  AdamW(std::vector<ParamGroup<T>> groups, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01)
      : AdamBase<T>(std::move(groups), lr, beta1, beta2, eps, weight_decay, "AdamW", true) {}
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
