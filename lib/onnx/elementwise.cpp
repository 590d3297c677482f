// ONNX import rules: elementwise arithmetic and activations (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <cmath>

#include <xtensor/xbroadcast.hpp>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/pow.hpp>
#include <xgrad/ops/scale.hpp>

namespace xgrad::onnx_rules {

namespace {

// Numpy-broadcast shapes for an elementwise op of Vars; names both if they do not broadcast.
template <class T>
Var<T> bin(const NodeReader<T>& r, const std::string& op, const Var<T>& a, const Var<T>& b) {
  if (!broadcast_shapes(a.shape(), b.shape())) {
    r.fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " do not broadcast");
  }
  if (op == "Add") return add(a, b);
  if (op == "Sub") return sub(a, b);
  if (op == "Mul") return mul(a, b);
  if (op == "Div") return div(a, b);
  if (op == "Max") return maximum(a, b);
  return minimum(a, b);
}

template <class T>
bool build_binary(NodeReader<T>& r) {
  r.set_output(0, bin(r, r.op(), r.var(0), r.var(1)));
  return true;
}

// Max, Min, Sum and Mean of one or more inputs.
template <class T>
bool build_variadic(NodeReader<T>& r) {
  const std::string& op = r.op();
  if (r.input_count() == 0) r.fail("needs at least one input");
  Var<T> y = r.var(0);
  for (std::size_t k = 1; k < r.input_count(); ++k) y = bin(r, op == "Max" || op == "Min" ? op : "Add", y, r.var(k));
  if (op == "Mean" && r.input_count() > 1) y = scale(y, 1.0 / static_cast<double>(r.input_count()));
  r.set_output(0, y);
  return true;
}

template <class T>
bool fold_binary_op(NodeReader<T>& r) {
  if ((r.op() == "Max" || r.op() == "Min") && r.input_count() != 2) return false;
  r.set_output(0, fold_binary(r, r.op(), r.known_copy(0), r.known_copy(1)), r.any_from_int_input());
  return true;
}

// Neg and Abs of values known at import.
template <class T>
bool fold_sign(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  if (r.op() == "Neg") visit(t, [](auto& a) { a = -a; });
  else visit(t, [](auto& a) { a = xt::abs(a); });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

}  // namespace

// One line per ONNX op that is a row (lib/onnx/reader.hpp).
template <class T>
const std::vector<RowImport<T>>& row_imports() {
  static const std::vector<RowImport<T>> rows = {
      {"Neg", 1, &neg<T>, fold_sign<T>},
      {"Abs", 1, &xgrad::abs<T>, fold_sign<T>},
      {"Exp", 1, &exp<T>, nullptr},
      {"Log", 1, &log<T>, nullptr},
      {"Sqrt", 1, &sqrt<T>, nullptr},
      {"Tanh", 1, &tanh<T>, nullptr},
      {"Relu", 1, &relu<T>, nullptr},
      {"Sigmoid", 1, &sigmoid<T>, nullptr},
      {"Reciprocal", 1, &reciprocal<T>, nullptr},
      {"Sin", 7, &sin<T>, nullptr},
      {"Cos", 7, &cos<T>, nullptr},
      {"Erf", 9, &erf<T>, nullptr},
  };
  return rows;
}

namespace {

template <class T>
bool build_row(NodeReader<T>& r) {
  for (const RowImport<T>& row : row_imports<T>()) {
    if (r.op() == row.op_type) {
      r.set_output(0, row.row(r.var(0)));
      return true;
    }
  }
  r.fail("is not an elementwise row's op");  // elementwise_rules gives build_row to rows alone
}

// log(1 + e^x) as relu(x) + log(1 + e^-|x|), without overflow. |x| is max(x, -x) here, not the
// abs row: maximum's tie rule gives |x|'(0) = -1 against relu'(0) = 0, so softplus'(0) = 1/2
// exactly (the abs row's sign(0) = 0 would give 0).
template <class T>
bool build_softplus(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  r.set_output(0, add(relu(x), log(add(r.scalar(1), exp(neg(maximum(x, neg(x))))))));
  return true;
}

template <class T>
bool build_softsign(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  r.set_output(0, div(x, add(r.scalar(1), xgrad::abs(x))));
  return true;
}

// relu(x) - alpha relu(-x): alpha x exactly where x < 0.
template <class T>
bool build_leaky_relu(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const Var<T> negative = relu(neg(x));
  r.set_output(0, sub(relu(x), r.op() == "PRelu" ? bin(r, "Mul", r.var(1), negative)
                                                  : scale(negative, r.attr_float("alpha", 0.01))));
  return true;
}

template <class T>
bool build_thresholded_relu(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  r.set_output(0, apply_mask(x, relu(sub(x, r.scalar(r.attr_float("alpha", 1.0)))), 0.0));
  return true;
}

// x where x > 0, alpha (exp(x / alpha') - 1) elsewhere: exp(-relu(-x)) - 1 is 0 for x >= 0.
template <class T>
bool build_elu(NodeReader<T>& r) {
  const std::string& op = r.op();
  const Var<T> x = r.var(0);
  // Selu's defaults: from opset 6 as below, before 1.6732 and 1.0507 (float32 attributes).
  const bool old_selu = op == "Selu" && r.opset() < 6;
  const double alpha =
      r.attr_float("alpha", op == "Selu" ? (old_selu ? double(1.6732f) : 1.67326319217681884765625) : 1.0);
  const Var<T> inner = op == "Celu" ? scale(x, 1.0 / alpha) : x;
  const Var<T> expm1 = sub(exp(neg(relu(neg(inner)))), r.scalar(1));
  Var<T> y = add(relu(x), scale(expm1, alpha));
  if (op == "Selu") y = scale(y, r.attr_float("gamma", old_selu ? double(1.0507f) : 1.05070102214813232421875));
  r.set_output(0, y);
  return true;
}

template <class T>
bool build_hard_sigmoid(NodeReader<T>& r) {
  const bool swish = r.op() == "HardSwish";
  const Var<T> x = r.var(0);
  const double alpha = swish ? 1.0 / 6.0 : r.attr_float("alpha", 0.2);
  const double beta = swish ? 0.5 : r.attr_float("beta", 0.5);
  const Var<T> h = minimum(maximum(add(scale(x, alpha), r.scalar(beta)), r.scalar(0)), r.scalar(1));
  r.set_output(0, swish ? mul(x, h) : h);
  return true;
}

template <class T>
bool build_clip(NodeReader<T>& r) {
  Var<T> y = r.var(0);
  if (r.opset() < 11) {
    if (const auto* a = r.attr("min", onnx::AttributeProto::FLOAT)) y = maximum(y, r.scalar(a->f()));
    if (const auto* a = r.attr("max", onnx::AttributeProto::FLOAT)) y = minimum(y, r.scalar(a->f()));
  } else {
    if (r.has_input(1)) y = maximum(y, r.var(1));
    if (r.has_input(2)) y = minimum(y, r.var(2));
  }
  r.set_output(0, y);
  return true;
}

template <class T>
bool build_pow(NodeReader<T>& r) {
  const double p = r.known_scalar(1, "exponent");
  const Var<T> x = r.var(0);
  Var<T> y;
  if (p == 1) y = x;
  else if (p == 2) y = mul(x, x);
  else if (p == 3) y = mul(mul(x, x), x);
  else if (p == 0.5) y = sqrt(x);
  else if (p == -1) y = div(r.scalar(1), x);
  else if (p == -0.5) y = div(r.scalar(1), sqrt(x));
  else if (std::isfinite(p)) y = pow(x, p);
  else r.fail("exponent " + number_str(p) + " is not supported (a finite number)");
  r.set_output(0, y);
  return true;
}

// Integer arithmetic as ONNX Runtime does it: wrapping (two's complement), division toward 0.
template <class T>
xt::xarray<std::int64_t> int_arithmetic(const NodeReader<T>& r, const std::string& op, const xt::xarray<std::int64_t>& x,
                                        const xt::xarray<std::int64_t>& y) {
  xt::xarray<std::int64_t> out = xt::xarray<std::int64_t>::from_shape(x.shape());
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::int64_t a = x.data()[i], b = y.data()[i];
    const auto ua = static_cast<std::uint64_t>(a), ub = static_cast<std::uint64_t>(b);
    std::uint64_t u = 0;
    if (op == "Add") u = ua + ub;
    else if (op == "Sub") u = ua - ub;
    else if (op == "Mul") u = ua * ub;
    else if (b == 0) r.fail("integer division by zero");
    else if (b == -1) u = std::uint64_t(0) - ua;  // INT64_MIN / -1 wraps to INT64_MIN
    else u = static_cast<std::uint64_t>(a / b);
    out.data()[i] = static_cast<std::int64_t>(u);
  }
  return out;
}

}  // namespace

template <class T>
OnnxTensor fold_binary(const NodeReader<T>& r, const std::string& op, OnnxTensor a, OnnxTensor b) {
  if (a.dtype != b.dtype) r.fail("inputs are " + a.dtype + " and " + b.dtype + ": ONNX needs one type");
  const auto s = broadcast_shapes(a.shape(), b.shape());
  if (!s) r.fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " do not broadcast");
  r.check_size(*s);
  OnnxTensor t;
  const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual";
  const bool logic = op == "And" || op == "Or" || op == "Xor";
  if (logic && a.dtype != "bool") r.fail(op + " needs bool inputs, it has " + a.dtype);
  t.dtype = compare ? "bool" : a.dtype;
  const auto apply = [&](const auto& x, const auto& y, auto& out) {
    const auto xb = xt::broadcast(x, *s);
    const auto yb = xt::broadcast(y, *s);
    using E = typename std::decay_t<decltype(out)>::value_type;
    if (op == "Add") out = xb + yb;
    else if (op == "Sub") out = xb - yb;
    else if (op == "Mul") out = xb * yb;
    else if (op == "Max") out = xt::maximum(xb, yb);
    else if (op == "Min") out = xt::minimum(xb, yb);
    else if (op == "Div") out = xb / yb;
    else if (op == "Equal") out = xt::cast<E>(xt::equal(xb, yb));
    else if (op == "Less") out = xt::cast<E>(xb < yb);
    else if (op == "Greater") out = xt::cast<E>(xb > yb);
    else if (op == "LessOrEqual") out = xt::cast<E>(xb <= yb);
    else if (op == "GreaterOrEqual") out = xt::cast<E>(xb >= yb);
    else if (op == "And") out = xt::cast<E>(xt::not_equal(xb, E(0)) && xt::not_equal(yb, E(0)));
    else if (op == "Or") out = xt::cast<E>(xt::not_equal(xb, E(0)) || xt::not_equal(yb, E(0)));
    else out = xt::cast<E>(xt::not_equal(xt::not_equal(xb, E(0)), xt::not_equal(yb, E(0))));
  };
  if (a.is_float()) {
    if (compare) {
      xt::xarray<double> out;
      apply(a.real, b.real, out);
      t.ints = xt::cast<std::int64_t>(out);
    } else {
      apply(a.real, b.real, t.real);
    }
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    t.ints = int_arithmetic(r, op, xt::xarray<std::int64_t>(xt::broadcast(a.ints, *s)),
                            xt::xarray<std::int64_t>(xt::broadcast(b.ints, *s)));
  } else {
    apply(a.ints, b.ints, t.ints);
  }
  return t;
}

template <class T>
std::vector<ImportRule<T>> elementwise_rules() {
  std::vector<ImportRule<T>> rules = {
      {"Add", 1, {}, build_binary<T>, fold_binary_op<T>, legacy_broadcast},
      {"Sub", 1, {}, build_binary<T>, fold_binary_op<T>, legacy_broadcast},
      {"Mul", 1, {}, build_binary<T>, fold_binary_op<T>, legacy_broadcast},
      {"Div", 1, {}, build_binary<T>, fold_binary_op<T>, legacy_broadcast},
      {"Max", 1, {}, build_variadic<T>, fold_binary_op<T>, 0},
      {"Min", 1, {}, build_variadic<T>, fold_binary_op<T>, 0},
      {"Sum", 1, {}, build_variadic<T>, nullptr, 0},
      {"Mean", 1, {}, build_variadic<T>, nullptr, 0},
      {"Softplus", 1, {}, build_softplus<T>, nullptr, 0},
      {"Softsign", 1, {}, build_softsign<T>, nullptr, 0},
      {"LeakyRelu", 1, {}, build_leaky_relu<T>, nullptr, 0},
      {"PRelu", 1, {}, build_leaky_relu<T>, nullptr, 0},
      {"ThresholdedRelu", 10, {}, build_thresholded_relu<T>, nullptr, 0},
      {"Elu", 1, {}, build_elu<T>, nullptr, 0},
      {"Selu", 1, {}, build_elu<T>, nullptr, 0},
      {"Celu", 12, {}, build_elu<T>, nullptr, 0},
      {"HardSigmoid", 1, {}, build_hard_sigmoid<T>, nullptr, 0},
      {"HardSwish", 14, {}, build_hard_sigmoid<T>, nullptr, 0},
      {"Clip", 1, {}, build_clip<T>, nullptr, 0},
      {"Pow", 1, {1}, build_pow<T>, nullptr, legacy_broadcast},
  };
  for (const RowImport<T>& row : row_imports<T>()) rules.push_back({row.op_type, row.since, {}, build_row<T>, row.fold, 0});
  return rules;
}

template OnnxTensor fold_binary(const NodeReader<float>&, const std::string&, OnnxTensor, OnnxTensor);
template OnnxTensor fold_binary(const NodeReader<double>&, const std::string&, OnnxTensor, OnnxTensor);
template const std::vector<RowImport<float>>& row_imports<float>();
template const std::vector<RowImport<double>>& row_imports<double>();
template std::vector<ImportRule<float>> elementwise_rules<float>();
template std::vector<ImportRule<double>> elementwise_rules<double>();

}  // namespace xgrad::onnx_rules
