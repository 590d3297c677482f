// ONNX import rules: constants, shapes and the ops that change a shape (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <algorithm>
#include <cmath>

#include <xtensor/xbroadcast.hpp>
#include <xtensor/xmanipulation.hpp>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/permute.hpp>

namespace xgrad::onnx_rules {

namespace {

template <class T>
bool build_identity(NodeReader<T>& r) {
  r.set_output(0, r.var(0));
  return true;
}

template <class T>
bool fold_identity(NodeReader<T>& r) {
  r.set_output(0, r.known_copy(0), r.any_from_int_input(), r.input(0).index_input);
  return true;
}

template <class T>
bool fold_constant(NodeReader<T>& r) {
  const onnx::NodeProto& n = r.node();
  if (n.attribute_size() != 1) r.fail("needs exactly one attribute giving the value");
  const onnx::AttributeProto& a = n.attribute(0);
  OnnxTensor t;
  if (a.name() == "value" && a.type() == onnx::AttributeProto::TENSOR) {
    t = r.tensor_attr(a);
  } else if (a.name() == "value_float" && a.type() == onnx::AttributeProto::FLOAT) {
    t.dtype = "float32";
    t.real = xt::xarray<double>(static_cast<double>(a.f()));
  } else if (a.name() == "value_floats" && a.type() == onnx::AttributeProto::FLOATS) {
    t.dtype = "float32";
    t.real = xt::xarray<double>::from_shape({static_cast<std::size_t>(a.floats_size())});
    std::copy(a.floats().begin(), a.floats().end(), t.real.begin());
  } else if (a.name() == "value_int" && a.type() == onnx::AttributeProto::INT) {
    t.dtype = "int64";
    t.ints = xt::xarray<std::int64_t>(a.i());
  } else if (a.name() == "value_ints" && a.type() == onnx::AttributeProto::INTS) {
    t.dtype = "int64";
    t.ints = xt::xarray<std::int64_t>::from_shape({static_cast<std::size_t>(a.ints_size())});
    std::copy(a.ints().begin(), a.ints().end(), t.ints.begin());
  } else {
    r.fail("attribute '" + a.name() + "' is not supported (value, value_float(s), value_int(s))");
  }
  r.set_output(0, std::move(t), false);
  return true;
}

// Shape and Size read only their input's shape, fixed at import.
template <class T>
bool fold_shape(NodeReader<T>& r) {
  const Shape s = r.shape_of_input(0);
  OnnxTensor t;
  t.dtype = "int64";
  if (r.op() == "Size") {
    t.ints = xt::xarray<std::int64_t>(static_cast<std::int64_t>(shape_size(s)));
  } else {
    const auto rank = static_cast<std::int64_t>(s.size());
    auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t(0), rank); };
    const std::int64_t b = clamp(r.opset() >= 15 ? r.attr_int("start", 0) : 0);
    const std::int64_t e = clamp(r.opset() >= 15 ? r.attr_int("end", rank) : rank);
    std::vector<std::int64_t> dims;
    for (std::int64_t k = b; k < e; ++k) dims.push_back(static_cast<std::int64_t>(s[static_cast<std::size_t>(k)]));
    t.ints = xt::xarray<std::int64_t>::from_shape({dims.size()});
    std::copy(dims.begin(), dims.end(), t.ints.begin());
  }
  r.set_output(0, std::move(t), false);
  return true;
}

template <class T>
bool fold_constant_of_shape(NodeReader<T>& r) {
  const std::vector<std::int64_t> dims = r.known_ints(0, "shape");
  Shape s;
  for (std::int64_t d : dims) {
    if (d < 0) r.fail("shape has a negative dimension " + std::to_string(d));
    s.push_back(static_cast<std::size_t>(d));
  }
  r.check_size(s);
  OnnxTensor fill;
  fill.dtype = "float32";
  fill.real = xt::xarray<double>(0.0);
  if (const auto* a = r.attr("value", onnx::AttributeProto::TENSOR)) {
    fill = r.tensor_attr(*a);
    const std::size_t n = fill.is_float() ? fill.real.size() : fill.ints.size();
    if (n != 1) r.fail("attribute 'value' must hold one element, it holds " + std::to_string(n));
  }
  OnnxTensor t;
  t.dtype = fill.dtype;
  if (t.is_float()) t.real = xt::xarray<double>(xt::broadcast(fill.real.data()[0], s));
  else t.ints = xt::xarray<std::int64_t>(xt::broadcast(fill.ints.data()[0], s));
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

template <class T>
bool fold_range(NodeReader<T>& r) {
  const OnnxTensor& start = r.known(0);
  for (std::size_t k = 0; k < 3; ++k) {
    const OnnxTensor& v = r.known(k);
    if (v.dtype != start.dtype) r.fail("start, limit and delta differ in type");
    if ((v.is_float() ? v.real.size() : v.ints.size()) != 1 || v.shape().size() > 1) {
      r.fail(r.input_desc(k) + " must be a scalar, it has shape " + shape_str(v.shape()));
    }
  }
  const std::size_t most = r.options().max_elements;
  OnnxTensor t;
  t.dtype = start.dtype;
  if (t.is_float()) {
    const double s = r.known(0).real.data()[0], l = r.known(1).real.data()[0], d = r.known(2).real.data()[0];
    if (d == 0) r.fail("delta is 0");
    const double count = std::max(std::ceil((l - s) / d), 0.0);
    if (!(count <= double(most))) r.fail("the range has too many elements");
    const auto n = static_cast<std::size_t>(count);
    t.real = xt::xarray<double>::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) t.real(i) = s + static_cast<double>(i) * d;
  } else {
    // In integers, exactly: max(ceil((limit - start) / delta), 0) elements.
    const wide a = r.known(0).ints.data()[0], b = r.known(1).ints.data()[0], step = r.known(2).ints.data()[0];
    if (step == 0) r.fail("delta is 0");
    const wide span = b - a;
    wide n = step > 0 ? (span > 0 ? (span + step - 1) / step : 0) : (span < 0 ? (-span + (-step) - 1) / (-step) : 0);
    if (n > static_cast<wide>(most)) r.fail("the range has too many elements");
    t.ints = xt::xarray<std::int64_t>::from_shape({static_cast<std::size_t>(n)});
    for (wide i = 0; i < n; ++i) t.ints(static_cast<std::size_t>(i)) = static_cast<std::int64_t>(a + i * step);
  }
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// The output shape of Reshape, Flatten, Squeeze, Unsqueeze applied to shape s.
template <class T>
Shape reshaped(NodeReader<T>& r, const Shape& s) {
  const std::string& op = r.op();
  const std::size_t count = shape_size(s);
  if (op == "Flatten") {
    const auto rank = static_cast<std::int64_t>(s.size());
    std::int64_t a = r.attr_int("axis", 1);
    if (a < -rank || a > rank) r.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
    if (a < 0) a += rank;
    std::size_t outer = 1;
    for (std::size_t k = 0; k < static_cast<std::size_t>(a); ++k) outer *= s[k];
    return {outer, outer == 0 ? shape_size(Shape(s.begin() + a, s.end())) : count / outer};
  }
  if (op == "Reshape") {
    const std::vector<std::int64_t> dims =
        r.opset() < 5 ? r.attr_ints("shape").value_or(std::vector<std::int64_t>{}) : r.known_ints(1, "shape");
    const bool allowzero = r.attr_int("allowzero", 0) != 0;
    Shape out;
    std::optional<std::size_t> infer;
    std::size_t known_count = 1;
    for (std::size_t k = 0; k < dims.size(); ++k) {
      const std::int64_t d = dims[k];
      if (d == -1) {
        if (infer) r.fail("shape has -1 twice");
        infer = k;
        out.push_back(1);
      } else if (d == 0 && !allowzero) {
        if (k >= s.size()) r.fail("shape's 0 at position " + std::to_string(k) + " copies no dimension of " + shape_str(s));
        out.push_back(s[k]);
        known_count *= s[k];
      } else if (d < 0) {
        r.fail("shape has dimension " + std::to_string(d));
      } else {
        out.push_back(static_cast<std::size_t>(d));
        known_count *= static_cast<std::size_t>(d);
      }
    }
    if (infer) {
      if (known_count == 0 || count % known_count != 0) r.fail("cannot reshape " + shape_str(s) + " to " + ints_str(dims));
      out[*infer] = count / known_count;
    }
    if (!bounded_size(out, r.options().max_elements) || shape_size(out) != count) {
      r.fail("cannot reshape " + shape_str(s) + " (" + std::to_string(count) + " elements) to " + ints_str(dims));
    }
    return out;
  }
  std::vector<std::int64_t> axes;
  const bool axes_input = r.opset() >= 13;
  if (axes_input) {
    if (r.has_input(1)) axes = r.known_ints(1, "axes");
    else if (op == "Unsqueeze") r.fail("needs the axes input");
  } else {
    axes = r.attr_ints("axes").value_or(std::vector<std::int64_t>{});
  }
  if (op == "Squeeze") {
    std::vector<std::size_t> drop = r.axes_of(axes, s.size(), "axes");
    if (axes.empty() && !(axes_input && r.has_input(1))) {
      for (std::size_t k = 0; k < s.size(); ++k) {
        if (s[k] == 1) drop.push_back(k);
      }
    }
    Shape out;
    for (std::size_t k = 0; k < s.size(); ++k) {
      if (std::find(drop.begin(), drop.end(), k) == drop.end()) out.push_back(s[k]);
      else if (s[k] != 1) r.fail("cannot squeeze axis " + std::to_string(k) + " of " + shape_str(s) + ": it is not 1");
    }
    return out;
  }
  const std::vector<std::size_t> add = r.axes_of(axes, s.size() + axes.size(), "axes");
  Shape out;
  std::size_t next = 0;
  for (std::size_t k = 0; k < s.size() + add.size(); ++k) {
    if (std::find(add.begin(), add.end(), k) != add.end()) out.push_back(1);
    else out.push_back(s[next++]);
  }
  return out;
}

template <class T>
bool build_reshape(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  r.set_output(0, reshape_to(x, reshaped(r, x.shape())));
  return true;
}

template <class T>
bool fold_reshape(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const Shape s = reshaped(r, t.shape());
  visit(t, [&](auto& a) { a.reshape(s); });
  // An integer graph input reshaped stays that input's ids, read in the new shape.
  r.set_output(0, std::move(t), r.any_from_int_input(), r.input(0).index_input);
  return true;
}

template <class T>
std::vector<std::size_t> permutation(const NodeReader<T>& r, std::size_t rank) {
  std::vector<std::size_t> perm(rank);
  const auto p = r.attr_ints("perm");
  if (!p) {
    for (std::size_t k = 0; k < rank; ++k) perm[k] = rank - 1 - k;
    return perm;
  }
  if (p->size() != rank) r.fail("perm " + ints_str(*p) + " does not have one entry per axis of rank " + std::to_string(rank));
  std::vector<bool> seen(rank, false);
  for (std::size_t k = 0; k < rank; ++k) {
    const std::int64_t a = (*p)[k];
    if (a < 0 || a >= static_cast<std::int64_t>(rank) || seen[static_cast<std::size_t>(a)]) {
      r.fail("perm " + ints_str(*p) + " is not a permutation of the axes");
    }
    seen[static_cast<std::size_t>(a)] = true;
    perm[k] = static_cast<std::size_t>(a);
  }
  return perm;
}

template <class T>
bool build_transpose(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const std::vector<std::size_t> perm = permutation(r, x.shape().size());
  bool same = true;
  for (std::size_t k = 0; k < perm.size(); ++k) same = same && perm[k] == k;
  r.set_output(0, same ? x : permute(x, perm));
  return true;
}

template <class T>
bool fold_transpose(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const std::vector<std::size_t> perm = permutation(r, t.shape().size());
  visit(t, [&](auto& a) { a = xt::eval(xt::transpose(a, perm)); });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

template <class T>
Shape expanded(NodeReader<T>& r, const Shape& s) {
  const std::vector<std::int64_t> dims = r.known_ints(1, "shape");
  Shape target;
  for (std::int64_t d : dims) {
    if (d < 0) r.fail("shape has dimension " + std::to_string(d));
    target.push_back(static_cast<std::size_t>(d));
  }
  const auto out = broadcast_shapes(s, target);
  if (!out) r.fail("cannot expand " + shape_str(s) + " to " + shape_str(target));
  r.check_size(*out);
  return *out;
}

template <class T>
bool build_expand(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const Shape s = expanded(r, x.shape());
  r.set_output(0, s == x.shape() ? x : broadcast_to(x, s));
  return true;
}

template <class T>
bool fold_expand(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const Shape s = expanded(r, t.shape());
  visit(t, [&](auto& a) { a = xt::eval(xt::broadcast(a, s)); });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

}  // namespace

template <class T>
std::vector<ImportRule<T>> shape_rules() {
  return {
      {"Identity", 1, {}, build_identity<T>, fold_identity<T>, keeps_bool},
      {"Constant", 1, {}, nullptr, fold_constant<T>, 0},
      {"Shape", 1, {}, nullptr, fold_shape<T>, shape_only},
      {"Size", 1, {}, nullptr, fold_shape<T>, shape_only},
      {"ConstantOfShape", 9, {}, nullptr, fold_constant_of_shape<T>, 0},
      {"Range", 11, {}, nullptr, fold_range<T>, 0},
      {"Reshape", 1, {1}, build_reshape<T>, fold_reshape<T>, keeps_bool},
      {"Flatten", 1, {}, build_reshape<T>, fold_reshape<T>, keeps_bool},
      {"Squeeze", 1, {1}, build_reshape<T>, fold_reshape<T>, keeps_bool},
      {"Unsqueeze", 1, {1}, build_reshape<T>, fold_reshape<T>, keeps_bool},
      {"Transpose", 1, {}, build_transpose<T>, fold_transpose<T>, keeps_bool},
      {"Expand", 8, {1}, build_expand<T>, fold_expand<T>, keeps_bool},
  };
}

template std::vector<ImportRule<float>> shape_rules<float>();
template std::vector<ImportRule<double>> shape_rules<double>();

}  // namespace xgrad::onnx_rules
