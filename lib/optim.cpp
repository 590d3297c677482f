#include <xgrad/lib/optim.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <tuple>

#include <xtensor/xbuilder.hpp>

#include <xgrad/lib/random.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>

namespace xgrad {

namespace {

template <class T>
void check_params(const std::vector<Var<T>>& params, const char* who) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    if (!params[i].valid() || params[i].node().role != Role::parameter) {
      throw error(std::string(who) + ": params[" + std::to_string(i) + "] is not a parameter" +
                  (params[i].valid() ? " (node " + std::to_string(params[i].id()) + ", " + params[i].node().op_name() + ")" : "") +
                  "; make trainable leaves with Graph::parameter");
    }
  }
}

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
void check_hyperparameter(const char* who, const char* name, double value, bool ok, const char* range) {
  if (!ok) throw error(std::string(who) + ": " + name + " must be " + range + ", got " + number_str(value));
}

void check_fraction(const char* who, const char* name, double value) {
  check_hyperparameter(who, name, value, value >= 0 && value < 1, "in [0, 1)");
}

// lr 0 is allowed, as in PyTorch: a schedule (cosine decay) may reach it.
void check_lr(const char* who, double lr) {
  check_hyperparameter(who, "lr", lr, std::isfinite(lr) && lr >= 0, "a finite number >= 0");
}

void check_adam_hyperparameters(const char* who, double lr, double beta1, double beta2, double eps) {
  check_lr(who, lr);
  check_fraction(who, "beta1", beta1);
  check_fraction(who, "beta2", beta2);
  check_hyperparameter(who, "eps", eps, std::isfinite(eps) && eps > 0, "a finite number > 0");
}

// One step of Adam (weight_decay 0) or AdamW on every parameter, as torch.optim's
// _single_tensor_adam(w) of PyTorch 1.13 computes it: the scalars in double, as Python does,
// the elements in T:
//   p *= 1 - lr * weight_decay                        (AdamW only; param.mul_)
//   m = m * beta1 + (1 - beta1) * g                   (exp_avg.mul_(beta1).add_(grad, alpha))
//   v = v * beta2 + ((1 - beta2) * g) * g             (exp_avg_sq.mul_(beta2).addcmul_(...))
//   denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   p = p + (-(lr / (1 - beta1^t)) * m) / denom       (param.addcdiv_(exp_avg, denom, value))
template <class T>
void adam_step(const std::vector<Var<T>>& params, AdamState<T>& state, double lr, double beta1, double beta2,
               double eps, double weight_decay, const std::vector<Var<T>>& grads) {
  const double step = static_cast<double>(++state.step);
  const double bias_correction1 = 1 - std::pow(beta1, step), bias_correction2 = 1 - std::pow(beta2, step);
  detail::AdamCoefficients<T> c;
  c.step_size = static_cast<T>(-(lr / bias_correction1));
  c.bias_correction2_sqrt = static_cast<T>(std::sqrt(bias_correction2));
  c.decay = static_cast<T>(1 - lr * weight_decay);
  c.beta1 = static_cast<T>(beta1);
  c.beta2 = static_cast<T>(beta2);
  c.eps = static_cast<T>(eps);
  c.one_minus_beta1 = static_cast<T>(1 - beta1);
  c.one_minus_beta2 = static_cast<T>(1 - beta2);
  for (std::size_t i = 0; i < params.size(); ++i) {
    // In place, in one vectorised pass over each array (a parameter is a leaf: only its value
    // changes, as with Graph::set_value, and no copy is made of it).
    T* p = const_cast<xt::xarray<T>&>(params[i].value()).data();
    detail::row_adam(p, grads[i].value().data(), state.m[i].data(), state.v[i].data(), state.m[i].size(), c);
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
Sgd<T>::Sgd(std::vector<Var<T>> params, double lr, double momentum)
    : m_params(std::move(params)), m_lr(lr), m_momentum(momentum) {
  check_params(m_params, "Sgd");
  check_lr("Sgd", lr);
  check_fraction("Sgd", "momentum", momentum);
  for (const auto& p : m_params) m_velocity.push_back(xt::zeros<T>(p.value().shape()));
}

template <class T>
void Sgd<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(m_params, grads, "Sgd::step");
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    xt::xarray<T>& vel = m_velocity[i];
    T* p = const_cast<xt::xarray<T>&>(m_params[i].value()).data();  // in place, as adam_step
    const T* g = grads[i].value().data();
    for (std::size_t j = 0; j < vel.size(); ++j) {
      vel.data()[j] = static_cast<T>(m_momentum) * vel.data()[j] + g[j];
      p[j] -= static_cast<T>(m_lr) * vel.data()[j];
    }
  }
}

template <class T>
void Sgd<T>::set_lr(double lr) {
  check_lr("Sgd::set_lr", lr);
  m_lr = lr;
}

template <class T>
Adam<T>::Adam(std::vector<Var<T>> params, double lr, double beta1, double beta2, double eps)
    : m_params(std::move(params)), m_lr(lr), m_beta1(beta1), m_beta2(beta2), m_eps(eps) {
  check_params(m_params, "Adam");
  check_adam_hyperparameters("Adam", lr, beta1, beta2, eps);
  m_state = initial_adam_state(m_params);
}

template <class T>
void Adam<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(m_params, grads, "Adam::step");
  adam_step(m_params, m_state, m_lr, m_beta1, m_beta2, m_eps, 0.0, grads);
}

template <class T>
void Adam<T>::set_state(AdamState<T> state) {
  check_adam_state(m_params, state, "Adam::set_state");
  m_state = std::move(state);
}

template <class T>
void Adam<T>::set_lr(double lr) {
  check_lr("Adam::set_lr", lr);
  m_lr = lr;
}

template <class T>
AdamW<T>::AdamW(std::vector<Var<T>> params, double lr, double beta1, double beta2, double eps, double weight_decay)
    : m_params(std::move(params)), m_lr(lr), m_beta1(beta1), m_beta2(beta2), m_eps(eps), m_weight_decay(weight_decay) {
  check_params(m_params, "AdamW");
  check_adam_hyperparameters("AdamW", lr, beta1, beta2, eps);
  check_hyperparameter("AdamW", "weight_decay", weight_decay, std::isfinite(weight_decay) && weight_decay >= 0,
                       "a finite number >= 0");
  m_state = initial_adam_state(m_params);
}

template <class T>
void AdamW<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(m_params, grads, "AdamW::step");
  adam_step(m_params, m_state, m_lr, m_beta1, m_beta2, m_eps, m_weight_decay, grads);
}

template <class T>
void AdamW<T>::set_state(AdamState<T> state) {
  check_adam_state(m_params, state, "AdamW::set_state");
  m_state = std::move(state);
}

template <class T>
void AdamW<T>::set_lr(double lr) {
  check_lr("AdamW::set_lr", lr);
  m_lr = lr;
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

template class Sgd<float>;
template class Sgd<double>;
template class Adam<float>;
template class Adam<double>;
template class AdamW<float>;
template class AdamW<double>;
template double clip_grad_norm(const std::vector<Var<float>>&, double);
template double clip_grad_norm(const std::vector<Var<double>>&, double);
template xt::xarray<float> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<double> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<float> he_normal(const Shape&, std::uint64_t);
template xt::xarray<double> he_normal(const Shape&, std::uint64_t);

}  // namespace xgrad
