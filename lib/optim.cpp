#include <xgrad/lib/optim.hpp>

#include <cmath>
#include <random>

#include <xtensor/xbuilder.hpp>

#include <xgrad/lib/random.hpp>
#include <xgrad/ops/kernels/common.hpp>

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

void check_lr(const char* who, double lr) {
  check_hyperparameter(who, "lr", lr, std::isfinite(lr) && lr > 0, "a finite number > 0");
}

void check_fraction(const char* who, const char* name, double value) {
  check_hyperparameter(who, name, value, value >= 0 && value < 1, "in [0, 1)");
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
    xt::xarray<T> p = m_params[i].value();
    const T* g = grads[i].value().data();
    for (std::size_t j = 0; j < p.size(); ++j) {
      vel.data()[j] = static_cast<T>(m_momentum) * vel.data()[j] + g[j];
      p.data()[j] -= static_cast<T>(m_lr) * vel.data()[j];
    }
    m_params[i].graph().set_value(m_params[i], std::move(p));
  }
}

template <class T>
Adam<T>::Adam(std::vector<Var<T>> params, double lr, double beta1, double beta2, double eps)
    : m_params(std::move(params)), m_lr(lr), m_beta1(beta1), m_beta2(beta2), m_eps(eps) {
  check_params(m_params, "Adam");
  check_lr("Adam", lr);
  check_fraction("Adam", "beta1", beta1);
  check_fraction("Adam", "beta2", beta2);
  check_hyperparameter("Adam", "eps", eps, std::isfinite(eps) && eps > 0, "a finite number > 0");
  for (const auto& p : m_params) {
    m_m.push_back(xt::zeros<T>(p.value().shape()));
    m_v.push_back(xt::zeros<T>(p.value().shape()));
  }
}

template <class T>
void Adam<T>::step(const std::vector<Var<T>>& grads) {
  check_grads(m_params, grads, "Adam::step");
  ++m_t;
  const double c1 = 1 - std::pow(m_beta1, static_cast<double>(m_t)), c2 = 1 - std::pow(m_beta2, static_cast<double>(m_t));
  for (std::size_t i = 0; i < m_params.size(); ++i) {
    xt::xarray<T> p = m_params[i].value();
    const T* g = grads[i].value().data();
    for (std::size_t j = 0; j < p.size(); ++j) {
      T& m = m_m[i].data()[j];
      T& v = m_v[i].data()[j];
      m = static_cast<T>(m_beta1 * m + (1 - m_beta1) * g[j]);
      v = static_cast<T>(m_beta2 * v + (1 - m_beta2) * g[j] * g[j]);
      p.data()[j] -= static_cast<T>(m_lr * (m / c1) / (std::sqrt(v / c2) + m_eps));
    }
    m_params[i].graph().set_value(m_params[i], std::move(p));
  }
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
template xt::xarray<float> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<double> glorot_uniform(const Shape&, std::uint64_t);
template xt::xarray<float> he_normal(const Shape&, std::uint64_t);
template xt::xarray<double> he_normal(const Shape&, std::uint64_t);

}  // namespace xgrad
