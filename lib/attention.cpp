#include <xgrad/lib/attention.hpp>

#include <cmath>

#include <xgrad/ops/common.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/transpose.hpp>

namespace xgrad {

namespace {

template <class T>
void check_attention_inputs(const Var<T>& q, const Var<T>& k, const Var<T>& v) {
  const char* names[] = {"q", "k", "v"};
  const Var<T>* vars[] = {&q, &k, &v};
  for (int i = 0; i < 3; ++i) {
    if (!vars[i]->valid()) throw error(std::string("attention: ") + names[i] + " is an empty Var");
    if (&vars[i]->graph() != &q.graph()) {
      throw error(std::string("attention: ") + names[i] + " (node " + std::to_string(vars[i]->id()) +
                  ") belongs to another graph than q");
    }
  }
  const auto shape = [](const Var<T>& x) {
    return Shape(x.value().shape().begin(), x.value().shape().end());
  };
  const Shape qs = shape(q), ks = shape(k), vs = shape(v);
  const auto node = [](const char* name, const Var<T>& x, const Shape& s) {
    return std::string(name) + " (node " + std::to_string(x.id()) + ") is " + shape_str(s);
  };
  const std::string all = node("q", q, qs) + ", " + node("k", k, ks) + ", " + node("v", v, vs);
  if (qs.size() < 2 || ks.size() < 2 || vs.size() < 2) {
    throw error("attention: q, k and v need rank >= 2 (..., T, d): " + all);
  }
  if (qs.size() != ks.size() || qs.size() != vs.size() ||
      !std::equal(qs.begin(), qs.end() - 2, ks.begin()) ||
      !std::equal(qs.begin(), qs.end() - 2, vs.begin())) {
    throw error("attention: batch axes differ (the leading axes of q, k and v must be equal): " + all);
  }
  const std::size_t d_k = qs.back(), t_k = ks[ks.size() - 2];
  if (ks.back() != d_k) {
    throw error("attention: d_k differs: q has d_k = " + std::to_string(d_k) + ", k has d_k = " +
                std::to_string(ks.back()) + ": " + all);
  }
  if (vs[vs.size() - 2] != t_k) {
    throw error("attention: T_k differs: k has T_k = " + std::to_string(t_k) + ", v has T_k = " +
                std::to_string(vs[vs.size() - 2]) + ": " + all);
  }
  if (t_k == 0) throw error("attention: T_k = 0, softmax over no keys is undefined: " + all);
  if (d_k == 0) throw error("attention: d_k = 0, the scale 1/sqrt(d_k) is undefined: " + all);
}

}  // namespace

template <class T>
AttentionNodes<T> attention_nodes(const Var<T>& q, const Var<T>& k, const Var<T>& v, std::optional<double> alpha) {
  check_attention_inputs(q, k, v);
  if (alpha && !std::isfinite(*alpha)) {
    throw error("attention: the scale must be finite, got " + number_str(*alpha));
  }
  const double d_k = static_cast<double>(q.value().shape().back());
  AttentionNodes<T> a;
  a.scores = scale(matmul(q, transpose(k)), alpha.value_or(1.0 / std::sqrt(d_k)));
  a.weights = softmax(a.scores, -1);
  a.output = matmul(a.weights, v);
  return a;
}

template AttentionNodes<float> attention_nodes(const Var<float>&, const Var<float>&, const Var<float>&,
                                               std::optional<double>);
template AttentionNodes<double> attention_nodes(const Var<double>&, const Var<double>&, const Var<double>&,
                                                std::optional<double>);

}  // namespace xgrad
