#include <xgrad/lib/optim.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include <xtensor/xbuilder.hpp>

#include <xgrad/lib/random.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>

namespace xgrad {

namespace {

template <class T>
void check_grads(const std::vector<Var<T>>& params, const std::vector<Var<T>>& grads, const char* who) {
  if (grads.size() != params.size()) {
    throw error(std::string(who) + ": " + std::to_string(grads.size()) + " gradients for " +
                std::to_string(params.size()) + " parameters");
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (grads[i].valid() && &grads[i].graph() != &params[i].graph()) {
      throw error(std::string(who) + ": the gradient of params[" + std::to_string(i) + "] (node " +
                  std::to_string(grads[i].id()) + ") belongs to another graph than the parameter (node " +
                  std::to_string(params[i].id()) + ")");
    }
    if (!grads[i].valid() || !shapes_equal(grads[i].value().shape(), params[i].value().shape())) {
      throw error(std::string(who) + ": the gradient of params[" + std::to_string(i) + "] " +
                  shape_str(params[i].value().shape()) + " is " +
                  (grads[i].valid() ? shape_str(grads[i].value().shape()) : std::string("an empty Var")));
    }
  }
}

// A hyperparameter: throws "<who>: <name> must be <range>, got <value>" unless `ok` (which is
// false for NaN, and for inf where the range is finite).
void check_hyperparameter(const std::string& who, const std::string& name, double value, bool ok, const char* range) {
  if (!ok) throw error(who + ": " + name + " must be " + range + ", got " + number_str(value));
}

void check_fraction(const char* who, const char* name, double value) {
  check_hyperparameter(who, name, value, value >= 0 && value < 1, "in [0, 1)");
}

// lr 0 is allowed, as in PyTorch: a schedule (cosine decay) may reach it. `name` is "lr" or
// "groups[k].lr".
void check_lr(const std::string& who, double lr, const std::string& name = "lr") {
  check_hyperparameter(who, name, lr, std::isfinite(lr) && lr >= 0, "a finite number >= 0");
}

void check_weight_decay(const std::string& who, double weight_decay, const std::string& name = "weight_decay") {
  check_hyperparameter(who, name, weight_decay, std::isfinite(weight_decay) && weight_decay >= 0,
                       "a finite number >= 0");
}

void check_adam_hyperparameters(const char* who, double beta1, double beta2, double eps) {
  check_fraction(who, "beta1", beta1);
  check_fraction(who, "beta2", beta2);
  check_hyperparameter(who, "eps", eps, std::isfinite(eps) && eps > 0, "a finite number > 0");
}

std::string group_str(std::size_t k) { return "groups[" + std::to_string(k) + "]"; }

// The groups' parameters: each a parameter leaf, none given twice. `listed`: the caller gave
// one list of parameters (errors name params[i]) rather than groups (groups[k].params[i]).
template <class T>
void check_group_params(const std::vector<ParamGroup<T>>& groups, const char* who, bool listed) {
  std::map<std::pair<const Graph<T>*, std::size_t>, std::string> seen;  // (graph, node) -> where
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const auto& params = groups[k].params;
    for (std::size_t i = 0; i < params.size(); ++i) {
      const std::string where = (listed ? std::string() : group_str(k) + ".") + "params[" + std::to_string(i) + "]";
      const Var<T>& p = params[i];
      if (!p.valid() || p.node().role != Role::parameter) {
        throw error(std::string(who) + ": " + where + " is not a parameter" +
                    (p.valid() ? " (node " + std::to_string(p.id()) + ", " + p.node().op_name() + ")" : "") +
                    "; make trainable leaves with Graph::parameter");
      }
      const auto [at, inserted] = seen.insert({{&p.graph(), p.id()}, where});
      if (!inserted) {
        throw error(std::string(who) + ": " + where + " (node " + std::to_string(p.id()) + ", '" + p.node().name +
                    "') is " + at->second + " again; give each parameter " + (listed ? "once" : "to one group, once"));
      }
    }
  }
}

// One step of Adam or AdamW on every parameter, as torch.optim's _single_tensor_adam(w) of
// PyTorch 1.13 computes it: the scalars in double, as Python does, the elements in T; lr and
// weight_decay those of each parameter's group:
//   g = g + weight_decay * p                          (Adam only; grad.add(param, alpha))
//   p *= 1 - lr * weight_decay                        (AdamW only; param.mul_)
//   m = m * beta1 + (1 - beta1) * g                   (exp_avg.mul_(beta1).add_(grad, alpha))
//   v = v * beta2 + ((1 - beta2) * g) * g             (exp_avg_sq.mul_(beta2).addcmul_(...))
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p + (-(lr / (1 - beta1^t)) * m) / denom       (param.addcdiv_(exp_avg, denom, value))
template <class T>
void adam_step(const std::vector<ParamGroup<T>>& groups, AdamState<T>& state, double beta1, double beta2,
               double eps, bool decoupled, const std::vector<Var<T>>& grads) {
  const double step = static_cast<double>(++state.step);
  const double bias_correction1 = 1 - std::pow(beta1, step), bias_correction2 = 1 - std::pow(beta2, step);
  detail::AdamCoefficients<T> c;
  c.bias_correction2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  c.beta1 = static_cast<T>(beta1);
  c.beta2 = static_cast<T>(beta2);
  c.eps = static_cast<T>(eps);
  c.one_minus_beta1 = static_cast<T>(1 - beta1);
  c.one_minus_beta2 = static_cast<T>(1 - beta2);
  std::size_t i = 0;  // the index in params(): the groups' parameters concatenated
  xt::xarray<T> penalised;  // Adam's g + weight_decay * p
  for (const auto& group : groups) {
    const double lr = *group.lr, weight_decay = *group.weight_decay;
    c.step_size = static_cast<T>(-(lr / bias_correction1));
    c.decay = static_cast<T>(decoupled ? 1 - lr * weight_decay : 1.0);  // 1: p unchanged
    const bool l2 = !decoupled && weight_decay != 0;  // torch: if weight_decay != 0
    const T alpha = static_cast<T>(weight_decay);
    for (const auto& param : group.params) {
      // In place, in one vectorised pass over each array (a parameter is a leaf: only its value
      // changes, as with Graph::set_value, and no copy is made of it).
      T* p = const_cast<xt::xarray<T>&>(param.value()).data();
      const T* g = grads[i].value().data();
      const std::size_t n = state.m[i].size();
      if (l2) {
        penalised.resize(param.value().shape());
        for (std::size_t j = 0; j < n; ++j) penalised.data()[j] = g[j] + alpha * p[j];
        g = penalised.data();
      }
      detail::row_adam(p, g, state.m[i].data(), state.v[i].data(), n, c);
      ++i;
    }
  }
}

// Zero moments, one pair per parameter.
template <class T>
AdamState<T> initial_adam_state(const std::vector<Var<T>>& params) {
  AdamState<T> state;
  for (const auto& p : params) {
    state.m.push_back(xt::zeros<T>(p.value().shape()));
    state.v.push_back(xt::zeros<T>(p.value().shape()));
  }
  return state;
}

template <class T>
void check_adam_state(const std::vector<Var<T>>& params, const AdamState<T>& state, const std::string& who) {
  if (state.step < 0) throw error(who + ": step must be >= 0, got " + std::to_string(state.step));
  for (const auto* moments : {&state.m, &state.v}) {
    const char* name = moments == &state.m ? "m" : "v";
    if (moments->size() != params.size()) {
      throw error(who + ": " + std::to_string(moments->size()) + " arrays in " + name + " for " +
                  std::to_string(params.size()) + " parameters");
    }
    for (std::size_t i = 0; i < params.size(); ++i) {
      if (!shapes_equal((*moments)[i].shape(), params[i].value().shape())) {
        throw error(who + ": " + name + "[" + std::to_string(i) + "] is " + shape_str((*moments)[i].shape()) +
                    ", the parameter " + shape_str(params[i].value().shape()));
      }
    }
  }
}

std::pair<std::size_t, std::size_t> fans(const Shape& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {shape[0], shape[0]};
  return {shape[shape.size() - 2], shape.back()};
}

}  // namespace

template <class T>
std::vector<ParamGroup<T>> decay_groups(const std::vector<Var<T>>& params, double weight_decay) {
  check_group_params<T>({ParamGroup<T>{params, {}, {}}}, "decay_groups", true);
  check_weight_decay("decay_groups", weight_decay);
  std::vector<ParamGroup<T>> groups{{{}, std::nullopt, weight_decay}, {{}, std::nullopt, 0.0}};
  for (const auto& p : params) groups[p.value().dimension() >= 2 ? 0 : 1].params.push_back(p);
  return groups;
}

template <class T>
OptimizerGroups<T>::OptimizerGroups(std::vector<Var<T>> params, double lr, double weight_decay, const char* who)
    : m_who(who) {
  check_lr(who, lr);
  check_weight_decay(who, weight_decay);
  m_groups.push_back({std::move(params), lr, weight_decay});
  check_group_params(m_groups, who, true);
  m_params = m_groups[0].params;
}

template <class T>
OptimizerGroups<T>::OptimizerGroups(std::vector<ParamGroup<T>> groups, double lr, double weight_decay,
                                    const char* who)
    : m_groups(std::move(groups)), m_who(who) {
  check_lr(who, lr);
  check_weight_decay(who, weight_decay);
  if (m_groups.empty()) {
    throw error(std::string(who) + ": no parameter groups; give at least one (a group may have no parameters)");
  }
  check_group_params(m_groups, who, false);
  for (std::size_t k = 0; k < m_groups.size(); ++k) {
    ParamGroup<T>& group = m_groups[k];
    if (group.lr) check_lr(who, *group.lr, group_str(k) + ".lr");
    if (group.weight_decay) check_weight_decay(who, *group.weight_decay, group_str(k) + ".weight_decay");
    group.lr = group.lr.value_or(lr);
    group.weight_decay = group.weight_decay.value_or(weight_decay);
    m_params.insert(m_params.end(), group.params.begin(), group.params.end());
  }
}

template <class T>
std::size_t OptimizerGroups<T>::checked_group(std::size_t group, const char* what) const {
  if (group >= m_groups.size()) {
    throw error(std::string(m_who) + "::" + what + ": no " + group_str(group) + ", the optimizer has " +
                std::to_string(m_groups.size()) + (m_groups.size() == 1 ? " group" : " groups"));
  }
  return group;
}

template <class T>
double OptimizerGroups<T>::lr() const {
  for (std::size_t k = 1; k < m_groups.size(); ++k) {
    if (*m_groups[k].lr != *m_groups[0].lr) {
      throw error(std::string(m_who) + "::lr: the groups have different learning rates (groups[0].lr " +
                  number_str(*m_groups[0].lr) + ", " + group_str(k) + ".lr " + number_str(*m_groups[k].lr) +
                  "); read lr(group)");
    }
  }
  return *m_groups[0].lr;
}

template <class T>
double OptimizerGroups<T>::lr(std::size_t group) const {
  return *m_groups[checked_group(group, "lr")].lr;
}

template <class T>
void OptimizerGroups<T>::set_lr(double lr) {
  check_lr(std::string(m_who) + "::set_lr", lr);
  for (auto& group : m_groups) group.lr = lr;
}

template <class T>
void OptimizerGroups<T>::set_lr(std::size_t group, double lr) {
  checked_group(group, "set_lr");
  check_lr(std::string(m_who) + "::set_lr", lr, group_str(group) + ".lr");
  m_groups[group].lr = lr;
}

template <class T>
Sgd<T>::Sgd(std::vector<Var<T>> params, double lr, double momentum, double weight_decay)
    : OptimizerGroups<T>(std::move(params), lr, weight_decay, "Sgd") {
  init(momentum);
}

template <class T>
Sgd<T>::Sgd(std::vector<ParamGroup<T>> groups, double lr, double momentum, double weight_decay)
    : OptimizerGroups<T>(std::move(groups), lr, weight_decay, "Sgd") {
  init(momentum);
}

template <class T>
void Sgd<T>::init(double momentum) {
  check_fraction("Sgd", "momentum", momentum);
  m_momentum = momentum;
  if (momentum != 0) {
    for (const auto& p : this->m_params) m_velocity.push_back(xt::zeros<T>(p.value().shape()));
  }
}

// As torch.optim's _single_tensor_sgd of PyTorch 1.13 (dampening 0, nesterov and maximize false):
//   d = g + weight_decay * p                          (d_p.add(param, alpha=weight_decay))
//   velocity = d at the first step, then velocity * momentum + d   (buf.mul_(momentum).add_(d_p))
//   p = p - lr * velocity (or d when momentum is 0)   (param.add_(d_p, alpha=-lr))
template <class T>
void Sgd<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(this->m_params, grads, "Sgd::step");
  const T momentum = static_cast<T>(m_momentum);
  std::size_t i = 0;  // the index in params()
  for (const auto& group : this->m_groups) {
    const T lr = static_cast<T>(*group.lr), weight_decay = static_cast<T>(*group.weight_decay);
    const bool l2 = *group.weight_decay != 0;  // torch: if weight_decay != 0
    for (const auto& param : group.params) {
      T* p = const_cast<xt::xarray<T>&>(param.value()).data();  // in place, as adam_step
      const T* g = grads[i].value().data();
      T* vel = m_momentum != 0 ? m_velocity[i].data() : nullptr;
      const std::size_t n = param.value().size();
      for (std::size_t j = 0; j < n; ++j) {
        T d = l2 ? g[j] + weight_decay * p[j] : g[j];
        if (vel) d = vel[j] = m_started ? vel[j] * momentum + d : d;
        p[j] = p[j] - lr * d;
      }
      ++i;
    }
  }
  m_started = true;
}

template <class T>
template <class Params>
AdamBase<T>::AdamBase(Params params, double lr, double beta1, double beta2, double eps, double weight_decay,
                      const char* name, bool decoupled)
    : OptimizerGroups<T>(std::move(params), lr, weight_decay, name), m_name(name), m_decoupled(decoupled) {
  check_adam_hyperparameters(name, beta1, beta2, eps);
  m_beta1 = beta1;
  m_beta2 = beta2;
  m_eps = eps;
  m_state = initial_adam_state(this->m_params);
}

template <class T>
void AdamBase<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(this->m_params, grads, (m_name + "::step").c_str());
  adam_step(this->m_groups, m_state, m_beta1, m_beta2, m_eps, m_decoupled, grads);
}

template <class T>
void AdamBase<T>::set_state(AdamState<T> state) {
  check_adam_state(this->m_params, state, (m_name + "::set_state").c_str());
  m_state = std::move(state);
}

template <class T>
double clip_grad_norm(const std::vector<Var<T>>& grads, double max_norm) {
  check_hyperparameter("clip_grad_norm", "max_norm", max_norm, std::isfinite(max_norm) && max_norm >= 0,
                       "a finite number >= 0");
  // Every check before the first change: each value is readable, no seed of grad() is listed.
  double sum_of_squares = 0;
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].valid()) throw error("clip_grad_norm: grads[" + std::to_string(i) + "] is an empty Var");
    const xt::xarray<T>& g = grads[i].value();  // throws for a released value or an index leaf
    const Node<T>& n = grads[i].node();
    if (n.is_leaf() && n.in_backward() && !std::all_of(g.begin(), g.end(), [](T x) { return x == 0; })) {
      throw error("clip_grad_norm: grads[" + std::to_string(i) + "] (node " + std::to_string(grads[i].id()) + ", " +
                  n.op_name() + " '" + n.name + "') is a leaf that grad() made, which every replay reuses: " +
                  "scaling it in place would scale every later gradient");
    }
    // As torch: the norm of each gradient, then the norm of those norms.
    double squares = 0;
    for (const T x : g) squares += static_cast<double>(x) * static_cast<double>(x);
    const double norm = std::sqrt(squares);
    sum_of_squares += norm * norm;
  }
  const double total = std::sqrt(sum_of_squares);
  const double clip_coef = max_norm / (total + 1e-6);
  if (clip_coef >= 1) return total;  // torch.clamp(clip_coef, max=1): a NaN clip_coef scales too
  const T coef = static_cast<T>(clip_coef);
  std::set<std::tuple<const Graph<T>*, std::size_t, std::size_t>> scaled;  // (graph, node, output)
  for (const auto& v : grads) {
    const Node<T>& n = v.node();
    if ((n.is_leaf() && n.in_backward()) || !scaled.insert({&v.graph(), v.id(), v.output()}).second) continue;
    // The graph holds its values as non-const arrays and Var::value() hands out a const view of
    // one: the write goes to a node value, which the next replay() overwrites (leaves excepted).
    auto& value = const_cast<xt::xarray<T>&>(v.value());
    detail::row_scale(value.data(), coef, value.data(), value.size(), 1);
  }
  return total;
}

template <class T>
xt::xarray<T> glorot_uniform(const Shape& shape, std::uint64_t seed) {
  detail::check_result_shape("glorot_uniform", shape, "array");
  const auto [fan_in, fan_out] = fans(shape);
  const double a = std::sqrt(6.0 / static_cast<double>(std::max<std::size_t>(fan_in + fan_out, 1)));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(-a, a);
  xt::xarray<T> w = xt::xarray<T>::from_shape(shape);
  for (auto& x : w) x = static_cast<T>(uniform(rng));
  return w;
}

template <class T>
xt::xarray<T> he_normal(const Shape& shape, std::uint64_t seed) {
  detail::check_result_shape("he_normal", shape, "array");
  const double sd = std::sqrt(2.0 / static_cast<double>(std::max<std::size_t>(fans(shape).first, 1)));
  return random_array<T>(shape, seed, sd);
}

template std::vector<ParamGroup<float>> decay_groups(const std::vector<Var<float>>&, double);
template std::vector<ParamGroup<double>> decay_groups(const std::vector<Var<double>>&, double);
template class OptimizerGroups<float>;
template class OptimizerGroups<double>;
template class Sgd<float>;
template class Sgd<double>;
template class AdamBase<float>;
template class AdamBase<double>;
template AdamBase<float>::AdamBase(std::vector<Var<float>>, double, double, double, double, double, const char*, bool);
template AdamBase<double>::AdamBase(std::vector<Var<double>>, double, double, double, double, double, const char*, bool);
template AdamBase<float>::AdamBase(std::vector<ParamGroup<float>>, double, double, double, double, double, const char*, bool);
template AdamBase<double>::AdamBase(std::vector<ParamGroup<double>>, double, double, double, double, double, const char*, bool);
template double clip_grad_norm(const std::vector<Var<float>>&, double);
template double clip_grad_norm(const std::vector<Var<double>>&, double);
template xt::xarray<float> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<double> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<float> he_normal(const Shape&, std::uint64_t);
template xt::xarray<double> he_normal(const Shape&, std::uint64_t);

}  // namespace xgrad
