// ONNX import rules: casts, comparisons, logic and Where (lib/onnx/reader.hpp). Comparisons and
// logic of values known at import are computed at import; bool values computed at run time
// (mask graph inputs, comparisons of run-time values) are masks of 0 and 1 in the graph, which
// Not, And, Or, Cast and Where read.
#include <xgrad/lib/onnx/reader.hpp>

#include <cmath>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/apply_mask.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/elementwise.hpp>

namespace xgrad::onnx_rules {

namespace {

// The element type a Cast or CastLike converts to.
template <class T>
std::string cast_target(NodeReader<T>& r) {
  if (r.op() == "CastLike") return r.dtype_of_input(1);
  const std::int64_t to = r.attr_int("to", 0);
  if (to < 0 || to > 64) r.fail("attribute 'to' " + std::to_string(to) + " is not an element type");
  return elem_type_name(static_cast<int>(to));
}

template <class T>
bool fold_cast(NodeReader<T>& r) {
  const std::string to = cast_target(r);
  if (!find_elem_type(to)) r.fail("cast to " + to + " is not supported");
  OnnxTensor t = r.known_copy(0);
  OnnxTensor out;
  out.dtype = to;
  const bool to_float = is_float_name(to);
  if (t.is_float() && to_float) {
    out.real = std::move(t.real);
  } else if (t.is_float()) {
    out.ints = xt::xarray<std::int64_t>::from_shape(t.real.shape());
    for (std::size_t i = 0; i < t.real.size(); ++i) {
      const double x = t.real.data()[i];
      if (to == "bool") {
        out.ints.data()[i] = x != 0;
      } else {
        if (!(std::fabs(x) < 9.2e18)) r.fail("cast of " + number_str(x) + " to " + to + " is out of range");
        out.ints.data()[i] = static_cast<std::int64_t>(x);  // toward zero
      }
    }
  } else if (to_float) {
    out.real = xt::cast<double>(t.ints);
  } else {
    out.ints = std::move(t.ints);
  }
  r.set_output(0, std::move(out), r.any_from_int_input());
  return true;
}

template <class T>
bool build_cast(NodeReader<T>& r) {
  const std::string to = cast_target(r);
  if (r.input(0).is_bool) {
    if (to != "bool" && to != dtype_of<T>() && to != r.model_float()) {
      r.fail("cast of a bool value given at run time to " + to + " (it can be a condition or a float)");
    }
    r.set_output(0, r.var(0));  // its 0 and 1 are the float values; a cast to bool keeps it a condition
    return true;
  }
  // The model's float type is the graph's: a float32 model imported in float64 computes its
  // casts to float32 in float64, as every other float of it.
  if (to != dtype_of<T>() && to != r.model_float()) {
    r.fail("cast of a " + r.model_float() + " value computed at run time to " + to + " (an xgrad graph has one float type)");
  }
  r.set_output(0, r.var(0));
  return true;
}

// Equal, Less, Greater, LessOrEqual and GreaterOrEqual of values computed at run time: the
// comparison ops, masks of 1 and 0 that Where, Not, And, Or and Cast read as bool; no gradient
// flows through them.
template <class T>
bool build_compare(NodeReader<T>& r) {
  const Var<T> a = r.var(0), b = r.var(1);
  if (!broadcast_shapes(a.shape(), b.shape())) {
    r.fail("shapes " + shape_str(a.shape()) + " and " + shape_str(b.shape()) + " do not broadcast");
  }
  const std::string& op = r.op();
  if (op == "Equal") r.set_output(0, equal(a, b));
  else if (op == "Less") r.set_output(0, less(a, b));
  else if (op == "Greater") r.set_output(0, greater(a, b));
  else if (op == "LessOrEqual") r.set_output(0, less_equal(a, b));
  else r.set_output(0, greater_equal(a, b));
  return true;
}

template <class T>
bool fold_compare(NodeReader<T>& r) {
  r.set_output(0, fold_binary(r, r.op(), r.known_copy(0), r.known_copy(1)), r.any_from_int_input());
  return true;
}

template <class T>
bool fold_not(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  if (t.dtype != "bool") r.fail("Not needs bool, it has " + t.dtype);
  t.ints = 1 - t.ints;
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// Not, And and Or of bool values computed at run time (mask inputs, comparisons): the logic ops.
// Any other input must be known at import (the error names the one that is not).
template <class T>
bool build_logic(NodeReader<T>& r) {
  const std::size_t arity = r.op() == "Not" ? 1 : 2;
  bool masks = true;
  for (std::size_t k = 0; k < arity; ++k) masks = masks && r.input(k).is_bool;
  if (!masks) {
    for (std::size_t k = 0; k < r.input_count(); ++k) r.known(k);
    return false;
  }
  if (r.op() == "Not") r.set_output(0, logical_not(r.var(0)));
  else r.set_output(0, r.op() == "And" ? logical_and(r.var(0), r.var(1)) : logical_or(r.var(0), r.var(1)));
  return true;
}

template <class T>
bool fold_where(NodeReader<T>& r) {
  const OnnxTensor& c = r.known(0);
  OnnxTensor x = r.known_copy(1), y = r.known_copy(2);
  if (x.dtype != y.dtype) r.fail("X is " + x.dtype + " and Y " + y.dtype);
  if (c.is_float()) r.fail("the condition must be bool, it is " + c.dtype);
  const auto s1 = broadcast_shapes(c.shape(), x.shape());
  const auto s = s1 ? broadcast_shapes(*s1, y.shape()) : std::nullopt;
  if (!s) r.fail("shapes " + shape_str(c.shape()) + ", " + shape_str(x.shape()) + ", " + shape_str(y.shape()) + " do not broadcast");
  r.check_size(*s);
  OnnxTensor t;
  t.dtype = x.dtype;
  const auto cb = xt::eval(xt::broadcast(c.ints, *s));
  if (t.is_float()) t.real = xt::where(cb, xt::broadcast(x.real, *s), xt::broadcast(y.real, *s));
  else t.ints = xt::where(cb, xt::broadcast(x.ints, *s), xt::broadcast(y.ints, *s));
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// Where with its condition (input 0) known at import, or a bool value given at run time (a
// mask graph input): X where it holds, Y elsewhere, as apply_mask nodes (a known scalar side
// becomes the fill).
template <class T>
bool build_where(NodeReader<T>& r) {
  Value<T>& cv = r.input(0);
  Var<T> keep, other;
  Shape sc;
  if (cv.is_bool) {
    keep = cv.var;
    other = sub(r.scalar(1), keep);
    sc = keep.shape();
  } else {
    const OnnxTensor& c = r.known_value(0, "condition");
    if (c.is_float()) r.fail("the condition must be bool, it is " + c.dtype);
    keep = r.constant("condition", xt::cast<double>(c.ints));
    other = r.constant("not_condition", 1.0 - xt::cast<double>(c.ints));
    sc = c.shape();
  }
  const Shape sx = r.shape_of_input(1), sy = r.shape_of_input(2);
  const auto s1 = broadcast_shapes(sc, sx);
  const auto s = s1 ? broadcast_shapes(*s1, sy) : std::nullopt;
  if (!s) r.fail("shapes " + shape_str(sc) + ", " + shape_str(sx) + ", " + shape_str(sy) + " do not broadcast");
  const auto full = [&](const Var<T>& v) { return v.shape() == *s ? v : broadcast_to(v, *s); };
  const auto scalar_known = [&](std::size_t k) {
    Value<T>& v = r.input(k);
    return v.known && v.known->is_float() && !v.from_int_input && v.known->real.size() == 1;
  };
  if (scalar_known(2)) r.set_output(0, apply_mask(full(r.var(1)), keep, r.known(2).real.data()[0]));
  else if (scalar_known(1)) r.set_output(0, apply_mask(full(r.var(2)), other, r.known(1).real.data()[0]));
  else r.set_output(0, add(apply_mask(full(r.var(1)), keep, 0.0), apply_mask(full(r.var(2)), other, 0.0)));
  return true;
}

}  // namespace

template <class T>
std::vector<ImportRule<T>> logic_rules() {
  return {
      {"Cast", 1, {}, build_cast<T>, fold_cast<T>, 0},
      {"CastLike", 15, {1}, build_cast<T>, fold_cast<T>, 0},
      {"Where", 9, {0}, build_where<T>, fold_where<T>, 0},
      {"Equal", 1, {}, build_compare<T>, fold_compare<T>, legacy_broadcast | makes_bool},
      {"Less", 1, {}, build_compare<T>, fold_compare<T>, legacy_broadcast | makes_bool},
      {"Greater", 1, {}, build_compare<T>, fold_compare<T>, legacy_broadcast | makes_bool},
      {"LessOrEqual", 12, {}, build_compare<T>, fold_compare<T>, makes_bool},
      {"GreaterOrEqual", 12, {}, build_compare<T>, fold_compare<T>, makes_bool},
      {"Xor", 1, {}, nullptr, fold_compare<T>, legacy_broadcast},
      {"And", 1, {}, build_logic<T>, fold_compare<T>, keeps_bool | legacy_broadcast},
      {"Or", 1, {}, build_logic<T>, fold_compare<T>, keeps_bool | legacy_broadcast},
      {"Not", 1, {}, build_logic<T>, fold_not<T>, keeps_bool},
  };
}

template std::vector<ImportRule<float>> logic_rules<float>();
template std::vector<ImportRule<double>> logic_rules<double>();

}  // namespace xgrad::onnx_rules
