#include <xgrad/lib/loss.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/format.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/mean.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad {

namespace {

// Before any node is built: a rejected call adds nothing to the graph.
template <class T>
void check_same_shape(const char* what, const char* a_name, const Var<T>& a, const char* b_name, const Var<T>& b) {
  detail::check_one_graph<T>(what, {{a_name, &a}, {b_name, &b}});
  if (!shapes_equal(a.value().shape(), b.value().shape())) {
    throw error(std::string(what) + ": " + a_name + " " + shape_str(a.value().shape()) + " and " + b_name + " " +
                shape_str(b.value().shape()) + " must have one shape");
  }
}

}  // namespace

template <class T>
Var<T> cross_entropy(const Var<T>& logits, const Var<T>& targets, long axis) {
  check_same_shape("cross_entropy", "logits", logits, "targets", targets);
  // log_softmax is the first node: a bad axis throws there, before anything is added.
  const Var<T> log_p = log_softmax(logits, axis);
  return scale(mean(sum(mul(targets, log_p), {axis})), -1.0);
}

template <class T>
Var<T> mse_loss(const Var<T>& prediction, const Var<T>& target) {
  check_same_shape("mse_loss", "prediction", prediction, "target", target);
  const Var<T> d = add(prediction, scale(target, -1.0));
  return mean(mul(d, d));
}

template <class T>
xt::xarray<T> one_hot(const xt::xarray<std::size_t>& labels, std::size_t classes) {
  Shape shape = shape_of(labels);
  shape.push_back(classes);
  detail::check_result_shape("one_hot", shape, "result");
  xt::xarray<T> y = xt::zeros<T>(shape);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const std::size_t label = labels.data()[i];
    if (label >= classes) {
      throw error("one_hot: label " + std::to_string(label) + " at " + index_str(unravel_index(i, labels.shape())) +
                  " is not below the number of classes, " + std::to_string(classes));
    }
    y.data()[i * classes + label] = T(1);
  }
  return y;
}

template Var<float> cross_entropy(const Var<float>&, const Var<float>&, long);
template Var<double> cross_entropy(const Var<double>&, const Var<double>&, long);
template Var<float> mse_loss(const Var<float>&, const Var<float>&);
template Var<double> mse_loss(const Var<double>&, const Var<double>&);
template xt::xarray<float> one_hot(const xt::xarray<std::size_t>&, std::size_t);
template xt::xarray<double> one_hot(const xt::xarray<std::size_t>&, std::size_t);

}  // namespace xgrad
