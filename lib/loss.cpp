#include <xgrad/lib/loss.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/shape.hpp>
#include <xgrad/lib/format.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum.hpp>
#include <xgrad/ops/take_label.hpp>

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
  detail::check_one_graph<T>("cross_entropy", {{"logits", &logits}, {"targets", &targets}});
  if (targets.node().index_leaf) {
    throw error("cross_entropy: targets (node " + std::to_string(targets.id()) +
                ") is an index leaf: this form takes target probabilities; for class labels pass options, "
                "cross_entropy(logits, labels, CrossEntropyOptions<T>{})");
  }
  check_same_shape("cross_entropy", "logits", logits, "targets", targets);
  // log_softmax is the first node: a bad axis throws there, before anything is added.
  const Var<T> log_p = log_softmax(logits, axis);
  return scale(mean(sum(mul(targets, log_p), {axis})), -1.0);
}

template <class T>
Var<T> cross_entropy(const Var<T>& logits, const Var<T>& labels, const CrossEntropyOptions<T>& options) {
  // Every check before the first node: a rejected call adds nothing to the graph.
  detail::check_one_graph<T>("cross_entropy", {{"logits", &logits}, {"labels", &labels}});
  if (!labels.node().index_leaf) {
    throw error("cross_entropy: labels (node " + std::to_string(labels.id()) + ", " + labels.node().op_name() +
                ") must be an index leaf (Graph::indices) of int64 class labels");
  }
  const Shape xs = logits.shape(), ls = labels.shape();
  if (xs.empty()) throw error("cross_entropy: logits () have no class axis: they must be (N..., C)");
  const Shape lead(xs.begin(), xs.end() - 1);
  const std::size_t classes = xs.back();
  if (ls != lead) {
    throw error("cross_entropy: labels " + shape_str(ls) + " must be " + shape_str(lead) + ", the shape of logits " +
                shape_str(xs) + " without its class axis");
  }
  if (options.weights && !shapes_equal(options.weights->shape(), Shape{classes})) {
    throw error("cross_entropy: weights " + shape_str(options.weights->shape()) + " must be (" + std::to_string(classes) +
                ",), one per class of logits " + shape_str(xs));
  }
  const double eps = options.label_smoothing;
  if (!(eps >= 0 && eps <= 1)) throw error("cross_entropy: label_smoothing must be in [0, 1], got " + number_str(eps));
  // The take_label nodes check the labels each time they run; this is the same check now.
  with_context([] { return std::string("cross_entropy: "); },
               [&] { detail::check_labels(labels.indices(), classes, options.ignore_index); });

  Graph<T>& g = logits.graph();
  const std::optional<std::int64_t>& ignore = options.ignore_index;
  const Var<T> log_p = log_softmax(logits, -1);  // (N..., C)
  const Var<T> w = options.weights ? g.constant("class_weights", *options.weights) : Var<T>();  // (C)
  // w[y_p] at each position, 0 where ignored: the nll's factor and the mean's divisor.
  const Var<T> w_label = w.valid() ? take_label(w, labels, ignore) : Var<T>();  // (N...)
  const Var<T> picked = take_label(log_p, labels, ignore);                    // logp[p, y_p]
  const Var<T> nll = neg(w.valid() ? mul(picked, w_label) : picked);           // (N...)
  // The smoothing term -sum_c w_c logp[p, c], taken at the label too (any class of the row holds
  // it) so that an ignored position is 0 and takes no gradient, even an infinite one.
  Var<T> smooth;
  if (eps > 0) {
    const Var<T> row_sum = sum(w.valid() ? mul(log_p, w) : log_p, {-1}, true);  // (N..., 1)
    smooth = neg(take_label(broadcast_to(row_sum, xs), labels, ignore));         // (N...)
  }
  // PyTorch's reduction: mean divides each sum by the kept weights (or count) apart, then
  // (1 - eps) nll + (eps / C) smooth; where the divisor is 0 the nll's 0 / 0 makes it NaN.
  const bool is_mean = options.reduction == Reduction::mean;
  Var<T> divisor;
  if (is_mean && w.valid()) divisor = sum(w_label);
  else if (is_mean && ignore) divisor = sum(take_label(g.constant("class_ones", xt::xarray<T>(xt::ones<T>({classes}))), labels, ignore));
  const auto reduce = [&](const Var<T>& v) {
    switch (options.reduction) {
      case Reduction::none: return v;
      case Reduction::sum: return sum(v);
      case Reduction::mean: break;
    }
    return divisor.valid() ? div(sum(v), divisor) : mean(v);
  };
  if (eps == 0) return reduce(nll);
  return add(scale(reduce(nll), 1 - eps), scale(reduce(smooth), eps / static_cast<double>(classes)));
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
template Var<float> cross_entropy(const Var<float>&, const Var<float>&, const CrossEntropyOptions<float>&);
template Var<double> cross_entropy(const Var<double>&, const Var<double>&, const CrossEntropyOptions<double>&);
template Var<float> mse_loss(const Var<float>&, const Var<float>&);
template Var<double> mse_loss(const Var<double>&, const Var<double>&);
template xt::xarray<float> one_hot(const xt::xarray<std::size_t>&, std::size_t);
template xt::xarray<double> one_hot(const xt::xarray<std::size_t>&, std::size_t);

}  // namespace xgrad
