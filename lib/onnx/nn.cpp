// ONNX import rules: products, normalization, losses, dropout and the scatter of gradients
// (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <xtensor/xbroadcast.hpp>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/embedding.hpp>
#include <xgrad/ops/layer_norm.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/matmul.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/scale.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad::onnx_rules {

namespace {

template <class T>
bool build_matmul(NodeReader<T>& r) {
  Var<T> a = r.var(0), b = r.var(1);
  const Shape sa = a.shape(), sb = b.shape();
  if (sa.empty() || sb.empty()) r.fail("MatMul of a scalar (shapes " + shape_str(sa) + " and " + shape_str(sb) + ")");
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) a = reshape(a, {1, sa[0]});
  if (vb) b = reshape(b, {sb[0], 1});
  const Shape pa = a.shape(), pb = b.shape();
  if (pa.back() != pb[pb.size() - 2]) r.fail("MatMul of " + shape_str(sa) + " and " + shape_str(sb) + ": inner sizes differ");
  Var<T> y = matmul(a, b);
  if (va || vb) {
    Shape s = y.shape();
    if (vb) s.erase(s.end() - 1);
    if (va) s.erase(s.end() - (vb ? 1 : 2));
    y = reshape(y, s);
  }
  r.set_output(0, y);
  return true;
}

template <class T>
bool build_gemm(NodeReader<T>& r) {
  const Var<T> a = r.var(0), b = r.var(1);
  if (a.shape().size() != 2 || b.shape().size() != 2) {
    r.fail("A and B must be matrices, they have shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()));
  }
  const bool ta = r.attr_int("transA", 0) != 0, tb = r.attr_int("transB", 0) != 0;
  if (a.shape()[ta ? 0 : 1] != b.shape()[tb ? 1 : 0]) {
    r.fail("Gemm of " + shape_str(a.shape()) + (ta ? "^T" : "") + " and " + shape_str(b.shape()) + (tb ? "^T" : "") +
           ": inner sizes differ");
  }
  Var<T> y = matmul(a, b, ta, tb);
  const double alpha = r.attr_float("alpha", 1.0), beta = r.attr_float("beta", 1.0);
  if (alpha != 1) y = scale(y, alpha);
  if (r.has_input(2) && beta != 0) {
    Var<T> c = r.var(2);
    if (beta != 1) c = scale(c, beta);
    if (!broadcast_shapes(y.shape(), c.shape())) {
      r.fail("shapes " + shape_str(y.shape()) + " and " + shape_str(c.shape()) + " do not broadcast");
    }
    y = add(y, c);
  }
  r.set_output(0, y);
  return true;
}

template <class T>
bool build_layer_normalization(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const Shape s = x.shape();
  if (s.empty()) r.fail("LayerNormalization of a scalar");
  const std::size_t axis = r.axis_of(r.attr_int("axis", -1), s.size(), "axis");
  const double eps = r.attr_float("epsilon", 1e-5);
  const Shape normalized(s.begin() + static_cast<long>(axis), s.end());
  const std::size_t inner = shape_size(normalized), outer = shape_size(s) / std::max<std::size_t>(inner, 1);
  if (inner == 0) r.fail("normalizes over no elements (shape " + shape_str(s) + ")");
  const auto param = [&](std::size_t k) {
    Var<T> p = r.var(k);
    if (p.shape() != normalized) {
      if (!broadcast_shapes(p.shape(), normalized) || *broadcast_shapes(p.shape(), normalized) != normalized) {
        r.fail(r.input_desc(k) + " of shape " + shape_str(p.shape()) + " does not broadcast to the normalized shape " +
               shape_str(normalized));
      }
      p = broadcast_to(p, normalized);
    }
    return reshape_to(p, {inner});
  };
  const Var<T> gamma = param(1);
  const Var<T> beta = r.has_input(2) ? param(2) : r.constant("zero_bias", xt::zeros<double>({inner}));
  const Var<T> y = layer_norm(reshape_to(x, {outer, inner}), gamma, beta, eps);
  r.set_output(0, reshape_to(y, s));
  Shape stat = s;
  for (std::size_t k = axis; k < s.size(); ++k) stat[k] = 1;
  r.set_output(1, reshape_to(r.graph().var(y.id(), 1), stat));
  r.set_output(2, reshape_to(r.graph().var(y.id(), 2), stat));
  return true;
}

// NegativeLogLikelihoodLoss of log-probabilities x (N, C, d...) at run-time labels t (N, d...):
// the label's entry of each row as x times a one-hot of t (embedding rows of the identity, so
// a replay with new labels follows), weighted by weight[t] (embedding of the weights), 0 for
// ignore_index. mean divides by the sum of the weights picked, as ONNX does.
template <class T>
Var<T> nll_loss(NodeReader<T>& r, const Var<T>& x, std::size_t kt, std::size_t kw) {
  const Shape s = x.shape();
  if (s.size() < 2) r.fail("input must be (N, C, d...), it has shape " + shape_str(s));
  const std::size_t classes = s[1];
  Shape want(s);
  want.erase(want.begin() + 1);
  const auto [t, t_shape] = r.ids_of(kt, classes, "target");
  if (t_shape != want) {
    r.fail("target has shape " + shape_str(t_shape) + ", the input " + shape_str(s) + " needs " + shape_str(want));
  }
  const std::string reduction = r.attr_string("reduction", "mean");
  if (reduction != "mean" && reduction != "sum" && reduction != "none") {
    r.fail("reduction '" + reduction + "' is not one of mean, sum, none");
  }
  // The classes that count: all but ignore_index (a label of ignore_index outside [0, C) is
  // refused by embedding when the node runs).
  xt::xarray<double> keep = xt::ones<double>({classes});
  if (const auto ii = r.attr_int("ignore_index"); ii && *ii >= 0 && *ii < static_cast<std::int64_t>(classes)) {
    keep(static_cast<std::size_t>(*ii)) = 0;
  }
  xt::xarray<double> eye = xt::zeros<double>({classes, classes});
  for (std::size_t c = 0; c < classes; ++c) eye(c, c) = keep(c);
  Shape onehot_shape = t_shape;
  onehot_shape.push_back(classes);
  Var<T> onehot = reshape_to(embedding(r.constant("one_hot", eye), t), onehot_shape);  // (N, d..., C)
  if (s.size() > 2) {                                                                 // -> (N, C, d...)
    std::vector<std::size_t> perm = {0, s.size() - 1};
    for (std::size_t k = 1; k + 1 < s.size(); ++k) perm.push_back(k);
    onehot = permute(onehot, perm);
  }
  const Var<T> picked = sum(mul(x, onehot), {1}, false);  // x[n, t[n], d...], 0 where ignored
  const bool weighted = r.has_input(kw);
  const bool ignoring = xt::any(xt::equal(keep, 0.0));
  Var<T> w_t;  // weight[t], 0 where ignored
  if (weighted || ignoring) {
    Var<T> w = r.constant("keep", keep);
    if (weighted) {
      const Var<T> given = r.var(kw);
      if (given.shape() != Shape{classes}) {
        r.fail("weight has shape " + shape_str(given.shape()) + ", expected (" + std::to_string(classes) + ",)");
      }
      w = mul(given, w);
    }
    w_t = reshape_to(embedding(reshape(w, {classes, 1}), t), want);
  }
  const Var<T> loss = neg(w_t.valid() && weighted ? mul(picked, w_t) : picked);
  if (reduction == "none") return loss;
  if (reduction == "sum") return sum(loss);
  return w_t.valid() ? div(sum(loss), sum(w_t)) : mean(loss);
}

template <class T>
bool build_nll_loss(NodeReader<T>& r) {
  r.set_output(0, nll_loss(r, r.var(0), 1, 2));
  return true;
}

template <class T>
bool build_softmax_cross_entropy(NodeReader<T>& r) {
  const Var<T> scores = r.var(0);
  if (scores.shape().size() < 2) r.fail("scores must be (N, C, d...), they have shape " + shape_str(scores.shape()));
  const Var<T> log_prob = log_softmax(scores, 1);
  r.set_output(0, nll_loss(r, log_prob, 1, 2));
  r.set_output(1, log_prob);
  return true;
}

template <class T>
bool build_dropout(NodeReader<T>& r) {
  if (r.opset() < 7 && r.attr_int("is_test", 0) == 0) {
    r.fail("training mode is not supported (is_test = 0, the default before opset 7)");
  }
  bool training = false;
  if (r.opset() >= 12 && r.has_input(2)) {
    const OnnxTensor& t = r.known(2);
    training = t.ints.size() == 1 && t.ints.data()[0] != 0;
  }
  if (training) r.fail("training mode is not supported (xgrad's dropout draws other masks than ONNX's)");
  const Var<T> x = r.var(0);
  r.set_output(0, x);
  if (r.output_count() > 1 && !r.node().output(1).empty()) {
    OnnxTensor mask;
    mask.dtype = "bool";
    mask.ints = xt::ones<std::int64_t>(x.shape());
    r.set_output(1, std::move(mask), false);
  }
  return true;
}

// ScatterND with reduction add of indices (ids..., 1) into the first axis of data: data plus
// embedding_vjp of the updates, the scatter-add xgrad's ONNX export writes for embedding's
// gradient. Other index depths and reductions are refused.
template <class T>
bool build_scatter_nd(NodeReader<T>& r) {
  const Var<T> data = r.var(0), updates = r.var(2);
  const std::string reduction = r.attr_string("reduction", "none");
  if (reduction != "add") r.fail("reduction '" + reduction + "' is not supported (only add)");
  const Shape s = data.shape();
  if (s.empty()) r.fail("ScatterND into a scalar");
  const auto [ids, view] = r.ids_of(1, s[0], "indices");
  if (view.empty() || view.back() != 1) {
    r.fail("indices of shape " + shape_str(view) + " do not end in 1 (only rows of data are scattered)");
  }
  const Shape rest(s.begin() + 1, s.end());
  Shape u(view.begin(), view.end() - 1);
  u.insert(u.end(), rest.begin(), rest.end());
  if (updates.shape() != u) r.fail("updates have shape " + shape_str(updates.shape()) + ", not " + shape_str(u));
  Shape rows = ids.shape();
  rows.push_back(shape_size(rest));
  const Var<T> scattered = embedding_vjp(reshape_to(updates, rows), ids, s[0]);
  r.set_output(0, add(data, reshape_to(scattered, s)));
  return true;
}

// Trilu's mask over the last two axes of `s` (1 kept, 0 zeroed): j - i >= k for the upper
// triangle (upper = 1, the default), j - i <= k for the lower.
template <class T>
xt::xarray<double> trilu_mask(NodeReader<T>& r, const Shape& s) {
  if (s.size() < 2) r.fail("Trilu needs rank >= 2, the input has shape " + shape_str(s));
  const std::int64_t k = r.has_input(1) ? static_cast<std::int64_t>(r.known_scalar(1, "k")) : 0;
  const bool upper = r.attr_int("upper", 1) != 0;
  const std::size_t rows = s[s.size() - 2], cols = s.back();
  xt::xarray<double> mask = xt::zeros<double>({rows, cols});
  for (std::size_t i = 0; i < rows; ++i) {
    for (std::size_t j = 0; j < cols; ++j) {
      const std::int64_t d = static_cast<std::int64_t>(j) - static_cast<std::int64_t>(i);
      mask(i, j) = (upper ? d >= k : d <= k) ? 1.0 : 0.0;
    }
  }
  return mask;
}

template <class T>
bool build_trilu(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  r.set_output(0, apply_mask(x, r.constant("triangle", trilu_mask(r, x.shape())), 0.0));
  return true;
}

template <class T>
bool fold_trilu(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const xt::xarray<double> mask = trilu_mask(r, t.shape());
  visit(t, [&](auto& a) {
    using E = typename std::decay_t<decltype(a)>::value_type;
    a = xt::where(xt::not_equal(xt::broadcast(mask, a.shape()), 0.0), a, E(0));
  });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

}  // namespace

template <class T>
std::vector<ImportRule<T>> nn_rules() {
  return {
      {"MatMul", 1, {}, build_matmul<T>, nullptr, 0},
      {"Gemm", 1, {}, build_gemm<T>, nullptr, 0},
      {"LayerNormalization", 17, {}, build_layer_normalization<T>, nullptr, 0},
      {"NegativeLogLikelihoodLoss", 12, {1}, build_nll_loss<T>, nullptr, 0},
      {"SoftmaxCrossEntropyLoss", 12, {1}, build_softmax_cross_entropy<T>, nullptr, 0},
      {"Dropout", 1, {1, 2}, build_dropout<T>, nullptr, 0},
      {"ScatterND", 11, {1}, build_scatter_nd<T>, nullptr, 0},
      {"Trilu", 14, {1}, build_trilu<T>, fold_trilu<T>, 0},
  };
}

template std::vector<ImportRule<float>> nn_rules<float>();
template std::vector<ImportRule<double>> nn_rules<double>();

}  // namespace xgrad::onnx_rules
