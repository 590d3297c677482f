// forward: y[i...] = x[i..., labels[i...]], 0 where labels[i...] == ignore_index   (..., C), L... -> L...
// VJP:     grad_x = sum_to(take_label_vjp(grad_out, labels, C), x.shape)        L... -> (L..., C) -> x.shape
//          take_label_vjp's: grad_grad_out = take_label(grad_y, labels)          (L..., C) -> L...
//          labels: none (an index leaf)
// saves:   nothing but the labels, an input (and ignore_index; C, take_label_vjp's attribute).
#include <xgrad/ops/take_label.hpp>

#include <algorithm>
#include <string>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_classes = "classes";
constexpr const char* key_ignore_index = "ignore_index";

// take_label's class of an ignored position.
constexpr std::size_t ignored = static_cast<std::size_t>(-1);

// Input 1, the labels: an index leaf's int64 values.
template <class T>
const xt::xarray<std::int64_t>& labels_of(const Args<T>& x) {
  if (x.indices.size() < 2 || !x.indices[1]) {
    throw error(std::string("labels must be an index leaf (Graph::indices) of int64 class labels, not ") + dtype_name<T>() +
                " values");
  }
  return *x.indices[1];
}

// The class of label `i`, or `ignored` for ignore_index; throws for any other label outside
// [0, classes). The callers ask in row-major order, so the first bad label is the one named.
std::size_t class_of(const xt::xarray<std::int64_t>& labels, std::size_t i, std::size_t classes,
                     const std::optional<std::int64_t>& ignore_index) {
  const std::int64_t label = labels.data()[i];
  if (ignore_index && label == *ignore_index) return ignored;
  if (label < 0 || static_cast<std::uint64_t>(label) >= classes) {
    throw error("label " + std::to_string(label) + " at labels" + index_str(unravel_index(i, shape_of(labels))) + " is outside the classes [0, " +
                std::to_string(classes) + ")" +
                (ignore_index ? " and is not ignore_index " + std::to_string(*ignore_index) : std::string()));
  }
  return static_cast<std::size_t>(label);
}

// The row of x that position `flat` of labels reads: x's leading axes `lead` broadcast to labels'
// shape (an axis of 1 or a missing leading axis stays at row 0 of it).
class SourceRows {
 public:
  SourceRows(const Shape& lead, const Shape& shape) : m_shape(shape), m_strides(shape.size(), 0), m_same(lead == shape) {
    std::size_t stride = 1;
    for (std::size_t a = lead.size(); a-- > 0;) {
      if (lead[a] != 1) m_strides[shape.size() - lead.size() + a] = stride;
      stride *= lead[a];
    }
  }
  std::size_t operator()(std::size_t flat) const {
    if (m_same) return flat;
    std::size_t row = 0;
    for (std::size_t a = m_shape.size(); a-- > 0;) {
      row += (flat % m_shape[a]) * m_strides[a];
      flat /= m_shape[a];
    }
    return row;
  }

 private:
  Shape m_shape;
  std::vector<std::size_t> m_strides;
  bool m_same;
};

Json ignore_attrs(const std::optional<std::int64_t>& ignore_index) {
  Json j = Json::object();
  if (ignore_index) j[key_ignore_index] = *ignore_index;
  return j;
}

std::optional<std::int64_t> ignore_from(const JsonCursor& attrs) {
  const auto at = attrs.find(key_ignore_index);
  if (!at) return std::nullopt;
  return static_cast<std::int64_t>(at->integer());
}

// ONNX: the labels as GatherElements' and ScatterElements' indices (L..., 1), an ignored label
// read as class 0, and, with an ignore_index, the bool condition `ignored` (L...) that zeroes it.
struct OnnxLabels {
  std::string indices, ignored;
};
OnnxLabels onnx_labels(OnnxEmitter& e, const std::string& labels, const std::optional<std::int64_t>& ignore_index) {
  OnnxLabels out;
  std::string safe = labels;
  if (ignore_index) {
    out.ignored = e.op("Equal", {labels, e.int64s({*ignore_index}, Shape{})});
    safe = e.op("Where", {out.ignored, e.int64s({0}, Shape{}), labels});
  }
  out.indices = e.op("Unsqueeze", {safe, e.int64s({-1})});
  return out;
}

class TakeLabelOp final : public OpFor<TakeLabelOp> {
 public:
  explicit TakeLabelOp(std::optional<std::int64_t> ignore_index) : m_ignore_index(ignore_index) {}

  std::string name() const override { return "take_label"; }
  // ONNX: GatherElements along the last axis (x Expanded to (L..., C) first where broadcast),
  // Squeeze, and Where(ignored, 0, y). The lowering does not check the labels.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    Shape full = n.input_shapes[1];
    full.push_back(n.input_shapes[0].back());
    std::string x = n.inputs[0];
    if (n.input_shapes[0] != full) x = e.op("Expand", {x, e.int64s(onnx_dims(full))});
    const OnnxLabels l = onnx_labels(e, n.inputs[1], m_ignore_index);
    std::string y = e.op("GatherElements", {x, l.indices}, {{"axis", std::int64_t{-1}}});
    y = e.op("Squeeze", {y, e.int64s({-1})});
    if (m_ignore_index) y = e.op("Where", {l.ignored, e.scalar(0), y});
    return {y};
  }
  std::size_t arity() const override { return 2; }
  bool accepts_indices(std::size_t i) const override { return i == 1; }
  Json attrs() const override { return ignore_attrs(m_ignore_index); }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0].empty()) throw error("x () needs a last axis of classes: (..., C)");
    const Shape lead(x[0].begin(), x[0].end() - 1);
    if (!detail::broadcastable(lead, x[1])) {
      throw error("x " + shape_str(x[0]) + " must be (labels..., C), its leading axes " + shape_str(lead) +
                  " broadcasting to labels " + shape_str(x[1]));
    }
    return x[1];
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<std::int64_t>& labels = labels_of(x);
    const xt::xarray<T>& a = *x[0];
    const std::size_t classes = a.shape().back();
    const SourceRows rows(Shape(a.shape().begin(), a.shape().end() - 1), shape_of(labels));
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::size_t c = class_of(labels, i, classes, m_ignore_index);
      y.data()[i] = c == ignored ? T(0) : a.data()[rows(i) * classes + c];
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    if (!v.wanted[0]) return {Var<T>(), Var<T>()};
    const Var<T> g = take_label_vjp(v.grad_out, v.x[1], v.x[0].value().shape().back(), m_ignore_index);
    return {sum_to_shape_of(g, v.x[0]), Var<T>()};
  }

 private:
  std::optional<std::int64_t> m_ignore_index;
};

class TakeLabelVjpOp final : public OpFor<TakeLabelVjpOp> {
 public:
  TakeLabelVjpOp(std::size_t classes, std::optional<std::int64_t> ignore_index)
      : m_classes(classes), m_ignore_index(ignore_index) {}

  std::string name() const override { return "take_label_vjp"; }
  // ONNX: ScatterElements(zeros (L..., C), labels, Where(ignored, 0, grad_out)) along the last
  // axis; an ignored position writes its 0 at class 0. The lowering does not check the labels.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string zeros = e.op("Expand", {e.scalar(0), e.int64s(onnx_dims(n.output_shapes[0]))});
    const OnnxLabels l = onnx_labels(e, n.inputs[1], m_ignore_index);
    std::string g = n.inputs[0];
    if (m_ignore_index) g = e.op("Where", {l.ignored, e.scalar(0), g});
    g = e.op("Unsqueeze", {g, e.int64s({-1})});
    return {e.op("ScatterElements", {zeros, l.indices, g}, {{"axis", std::int64_t{-1}}})};
  }
  std::size_t arity() const override { return 2; }
  bool accepts_indices(std::size_t i) const override { return i == 1; }
  Json attrs() const override {
    Json j = {{key_classes, m_classes}};
    j.update(ignore_attrs(m_ignore_index));
    return j;
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0] != x[1]) throw error("grad_out " + shape_str(x[0]) + " must have the shape of labels " + shape_str(x[1]));
    Shape y = x[1];
    y.push_back(m_classes);
    detail::check_elements(y, [&] { return "the gradient " + shape_str(y) + " (labels..., C) of " + std::to_string(m_classes) + " classes"; });
    return y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<std::int64_t>& labels = labels_of(x);
    const T* g = x[0]->data();
    std::fill(y.data(), y.data() + y.size(), T(0));
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const std::size_t c = class_of(labels, i, m_classes, m_ignore_index);
      if (c != ignored) y.data()[i * m_classes + c] = g[i];
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {v.wanted[0] ? take_label(v.grad_out, v.x[1], m_ignore_index) : Var<T>(), Var<T>()};
  }

 private:
  std::size_t m_classes;
  std::optional<std::int64_t> m_ignore_index;
};

}  // namespace

void detail::check_labels(const xt::xarray<std::int64_t>& labels, std::size_t classes, std::optional<std::int64_t> ignore_index) {
  for (std::size_t i = 0; i < labels.size(); ++i) class_of(labels, i, classes, ignore_index);
}

template <class T>
Var<T> take_label(const Var<T>& x, const Var<T>& labels, std::optional<std::int64_t> ignore_index) {
  return x.graph().apply(std::make_shared<TakeLabelOp>(ignore_index), {x, labels});
}

template <class T>
Var<T> take_label_vjp(const Var<T>& grad_out, const Var<T>& labels, std::size_t classes,
                      std::optional<std::int64_t> ignore_index) {
  return grad_out.graph().apply(std::make_shared<TakeLabelVjpOp>(classes, ignore_index), {grad_out, labels});
}

std::shared_ptr<const Op> make_take_label_op(const JsonCursor& attrs) {
  attrs.check_object({}, {key_ignore_index});
  return std::make_shared<TakeLabelOp>(ignore_from(attrs));
}

std::shared_ptr<const Op> make_take_label_vjp_op(const JsonCursor& attrs) {
  attrs.check_object({key_classes}, {key_ignore_index});
  return std::make_shared<TakeLabelVjpOp>(attrs[key_classes].index(), ignore_from(attrs));
}

template Var<float> take_label(const Var<float>&, const Var<float>&, std::optional<std::int64_t>);
template Var<double> take_label(const Var<double>&, const Var<double>&, std::optional<std::int64_t>);
template Var<float> take_label_vjp(const Var<float>&, const Var<float>&, std::size_t, std::optional<std::int64_t>);
template Var<double> take_label_vjp(const Var<double>&, const Var<double>&, std::size_t, std::optional<std::int64_t>);

}  // namespace xgrad
