// ONNX import rules: reductions, Softmax and LogSoftmax (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <algorithm>
#include <numeric>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/elementwise.hpp>
#include <xgrad/ops/log_softmax.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/sum.hpp>

namespace xgrad::onnx_rules {

namespace {

// max or min of x over one axis, keeping it (length 1): a tree of maximum/minimum nodes over
// halves, ceil(log2 n) levels (the halves of an odd length overlap by one element).
template <class T>
Var<T> reduce_extreme(Var<T> x, std::size_t axis, bool is_max) {
  while (x.shape()[axis] > 1) {
    const std::size_t n = x.shape()[axis], h = (n + 1) / 2;
    const auto ax = static_cast<long>(axis);
    const Var<T> a = slice(x, ax, 0, h), b = slice(x, ax, n - h, n);
    x = is_max ? maximum(a, b) : minimum(a, b);
  }
  return x;
}

// The axes of a Reduce* op (attribute or, for ReduceSum from opset 13, input 1); nullopt means
// none (noop_with_empty_axes).
template <class T>
std::optional<std::vector<std::size_t>> reduce_axes(NodeReader<T>& r, std::size_t rank) {
  std::vector<std::int64_t> axes;
  bool given = false;
  if (r.op() == "ReduceSum" && r.opset() >= 13) {
    if (r.has_input(1)) {
      axes = r.known_ints(1, "axes");
      given = !axes.empty();
    }
  } else if (const auto a = r.attr_ints("axes")) {
    axes = *a;
    given = !axes.empty();
  }
  if (!given) {
    if (r.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
    std::vector<std::size_t> all(rank);
    std::iota(all.begin(), all.end(), std::size_t(0));
    return all;
  }
  return r.axes_of(axes, rank, "axes");
}

template <class T>
Var<T> reduce(NodeReader<T>& r, Var<T> x) {
  const std::string& op = r.op();
  const Shape s = x.shape();
  const auto axes = reduce_axes(r, s.size());
  const bool keep = r.attr_int("keepdims", 1) != 0;
  if (!axes) return x;
  for (std::size_t a : *axes) {
    if (s[a] == 0 && (op == "ReduceMax" || op == "ReduceMin" || op == "ReduceLogSumExp")) {
      r.fail("reduces an empty axis " + std::to_string(a));
    }
  }
  std::vector<long> la(axes->begin(), axes->end());
  Shape kept = s;
  for (std::size_t a : *axes) kept[a] = 1;
  Shape dropped;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (std::find(axes->begin(), axes->end(), k) == axes->end()) dropped.push_back(s[k]);
  }
  const Shape out = keep ? kept : dropped;
  if (op == "ReduceMax" || op == "ReduceMin") {
    for (std::size_t a : *axes) x = reduce_extreme(x, a, op == "ReduceMax");
    return reshape_to(x, out);
  }
  if (op == "ReduceMean") return mean(x, la, keep);
  if (op == "ReduceSum") return sum(x, la, keep);
  if (op == "ReduceSumSquare") return sum(mul(x, x), la, keep);
  if (op == "ReduceL1") return sum(xgrad::abs(x), la, keep);
  if (op == "ReduceL2") return sqrt(sum(mul(x, x), la, keep));
  if (op == "ReduceLogSum") return log(sum(x, la, keep));
  // ReduceLogSumExp as m + log(sum(exp(x - m))), m the maximum (kept axes): no overflow.
  Var<T> m = x;
  for (std::size_t a : *axes) m = reduce_extreme(m, a, true);
  const Var<T> lse = add(log(sum(exp(sub(x, m)), la, true)), m);
  return reshape_to(lse, out);
}

template <class T>
bool build_reduce(NodeReader<T>& r) {
  r.set_output(0, reduce(r, r.var(0)));
  return true;
}

// Softmax and LogSoftmax: over one axis from opset 13; below, over the axes from `axis` on, as
// rows of a 2-D coercion (default axis 1).
template <class T>
bool build_softmax(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const Shape s = x.shape();
  const bool log_form = r.op() == "LogSoftmax";
  if (r.opset() >= 13) {
    const auto axis = static_cast<long>(r.axis_of(r.attr_int("axis", -1), s.size(), "axis"));
    r.set_output(0, log_form ? log_softmax(x, axis) : softmax(x, axis));
    return true;
  }
  const auto rank = static_cast<std::int64_t>(s.size());
  std::int64_t axis = r.attr_int("axis", 1);
  if (axis < -rank || axis >= std::max<std::int64_t>(rank, 1)) r.fail("axis " + std::to_string(axis) + " is out of range");
  if (axis < 0) axis += rank;
  std::size_t outer = 1;
  for (std::size_t k = 0; k < static_cast<std::size_t>(axis); ++k) outer *= s[k];
  const Var<T> rows = reshape_to(x, {outer, outer == 0 ? 0 : shape_size(s) / std::max<std::size_t>(outer, 1)});
  r.set_output(0, reshape_to(log_form ? log_softmax(rows, -1) : softmax(rows, -1), s));
  return true;
}

}  // namespace

template <class T>
std::vector<ImportRule<T>> reduce_rules() {
  std::vector<ImportRule<T>> rules = {
      {"Softmax", 1, {}, build_softmax<T>, nullptr, 0},
      {"LogSoftmax", 1, {}, build_softmax<T>, nullptr, 0},
  };
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1",
                         "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"}) {
    rules.push_back({op, 1, {1}, build_reduce<T>, nullptr, 0});
  }
  return rules;
}

template std::vector<ImportRule<float>> reduce_rules<float>();
template std::vector<ImportRule<double>> reduce_rules<double>();

}  // namespace xgrad::onnx_rules
