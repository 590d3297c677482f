// ONNX import rules: the ops that take parts of values, join or repeat them: Slice, Gather,
// Concat, Split, Pad and Tile (lib/onnx/reader.hpp).
#include <xgrad/lib/onnx/reader.hpp>

#include <limits>
#include <numeric>

#include <xgrad/lib/format.hpp>
#include <xgrad/ops/broadcast_to.hpp>
#include <xgrad/ops/concat.hpp>
#include <xgrad/ops/embedding.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/permute.hpp>
#include <xgrad/ops/slice.hpp>
#include <xgrad/ops/split.hpp>

namespace xgrad::onnx_rules {

namespace {

// Per-axis indices of a Slice (steps may be negative when not graph-only).
template <class T>
std::vector<std::vector<std::size_t>> slice_indices(NodeReader<T>& r, const Shape& s, bool any_step) {
  std::vector<std::int64_t> starts, ends, axes, steps;
  if (r.opset() < 10) {
    starts = r.attr_ints("starts").value_or(std::vector<std::int64_t>{});
    ends = r.attr_ints("ends").value_or(std::vector<std::int64_t>{});
    axes = r.attr_ints("axes").value_or(std::vector<std::int64_t>{});
  } else {
    starts = r.known_ints(1, "starts");
    ends = r.known_ints(2, "ends");
    if (r.has_input(3)) axes = r.known_ints(3, "axes");
    if (r.has_input(4)) steps = r.known_ints(4, "steps");
  }
  if (ends.size() != starts.size()) r.fail("starts and ends differ in length");
  if (axes.empty()) {
    for (std::size_t k = 0; k < starts.size(); ++k) axes.push_back(static_cast<std::int64_t>(k));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size()) r.fail("starts, ends, axes and steps differ in length");
  const std::vector<std::size_t> ax = r.axes_of(axes, s.size(), "axes");
  std::vector<std::vector<std::size_t>> idx(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    idx[k].resize(s[k]);
    std::iota(idx[k].begin(), idx[k].end(), std::size_t(0));
  }
  for (std::size_t j = 0; j < ax.size(); ++j) {
    const auto dim = static_cast<std::int64_t>(s[ax[j]]);
    const std::int64_t step = steps[j];
    if (step == 0) r.fail("a step is 0");
    if (step != 1 && !any_step) r.fail("step " + std::to_string(step) + " on a value computed at run time (only 1)");
    std::int64_t b = starts[j], e = ends[j];
    if (b < 0) b += dim;
    if (e < 0) e += dim;
    std::vector<std::size_t> v;
    if (dim > 0) {
      if (step > 0) {
        b = std::clamp(b, std::int64_t(0), dim);
        e = std::clamp(e, std::int64_t(0), dim);
      } else {
        b = std::clamp(b, std::int64_t(0), dim - 1);
        e = std::clamp(e, std::int64_t(-1), dim - 1);
      }
      // The count first, in wide integers: a step near 2^63 must not overflow b + step.
      const wide span = step > 0 ? wide(e) - b : wide(b) - e;
      const wide stride = step > 0 ? wide(step) : -wide(step);
      const wide count = span > 0 ? (span + stride - 1) / stride : 0;
      for (wide k = 0; k < count; ++k) v.push_back(idx[ax[j]][static_cast<std::size_t>(b + k * step)]);
    }
    idx[ax[j]] = std::move(v);
  }
  return idx;
}

template <class T>
bool build_slice(NodeReader<T>& r) {
  Var<T> x = r.var(0);
  const Shape s = x.shape();
  const auto idx = slice_indices(r, s, false);
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (idx[k].size() == s[k]) continue;
    const std::size_t b = idx[k].empty() ? 0 : idx[k].front();
    x = slice(x, static_cast<long>(k), b, b + idx[k].size());
  }
  r.set_output(0, x);
  return true;
}

template <class T>
bool fold_slice(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const auto idx = slice_indices(r, t.shape(), true);
  visit(t, [&](auto& a) { a = take(a, idx); });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// Gather of a run-time table: embedding on the axis moved to the front and the rest flattened.
template <class T>
bool build_gather(NodeReader<T>& r) {
  const Var<T> data = r.var(0);
  const Shape s = data.shape();
  if (s.empty()) r.fail("Gather of a scalar");
  const std::size_t axis = r.axis_of(r.attr_int("axis", 0), s.size(), "axis");
  const auto [ids, id_shape] = r.ids_of(1, s[axis], "indices");
  std::vector<std::size_t> front(s.size());
  front[0] = axis;
  for (std::size_t k = 0, j = 1; k < s.size(); ++k) {
    if (k != axis) front[j++] = k;
  }
  Var<T> table = axis == 0 ? data : permute(data, front);
  const Shape moved = table.shape();
  const Shape rest(moved.begin() + 1, moved.end());
  table = reshape_to(table, {s[axis], shape_size(rest)});
  Var<T> y = embedding(table, ids);  // (ids..., prod(rest))
  Shape ys = id_shape;
  ys.insert(ys.end(), rest.begin(), rest.end());
  y = reshape_to(y, ys);
  if (axis != 0) {
    // (ids..., before..., after...) -> (before..., ids..., after...)
    const std::size_t ni = id_shape.size();
    std::vector<std::size_t> perm;
    for (std::size_t k = 0; k < axis; ++k) perm.push_back(ni + k);
    for (std::size_t k = 0; k < ni; ++k) perm.push_back(k);
    for (std::size_t k = axis; k + 1 < s.size(); ++k) perm.push_back(ni + k);
    y = permute(y, perm);
  }
  r.set_output(0, y);
  return true;
}

template <class T>
bool fold_gather(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const Shape s = t.shape();
  const std::size_t axis = r.axis_of(r.attr_int("axis", 0), s.size(), "axis");
  const xt::xarray<std::int64_t> ids = r.gather_ids(1, s[axis]);
  std::vector<std::vector<std::size_t>> idx(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (k == axis) {
      for (std::int64_t i : ids) idx[k].push_back(static_cast<std::size_t>(i));
    } else {
      idx[k].resize(s[k]);
      std::iota(idx[k].begin(), idx[k].end(), std::size_t(0));
    }
  }
  Shape out_shape(s.begin(), s.begin() + static_cast<long>(axis));
  out_shape.insert(out_shape.end(), ids.shape().begin(), ids.shape().end());
  out_shape.insert(out_shape.end(), s.begin() + static_cast<long>(axis) + 1, s.end());
  r.check_size(out_shape);
  visit(t, [&](auto& a) {
    a = take(a, idx);
    a.reshape(out_shape);
  });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

template <class T>
bool build_concat(NodeReader<T>& r) {
  std::vector<Var<T>> parts;
  for (std::size_t k = 0; k < r.input_count(); ++k) parts.push_back(r.var(k));
  if (parts.empty()) r.fail("needs at least one input");
  r.set_output(0, xgrad::concat(parts, static_cast<long>(r.axis_of(concat_axis(r), parts[0].shape().size(), "axis"))));
  return true;
}

template <class T>
bool fold_concat(NodeReader<T>& r) {
  std::vector<OnnxTensor> parts;
  for (std::size_t k = 0; k < r.input_count(); ++k) parts.push_back(r.known_copy(k));
  if (parts.empty()) r.fail("needs at least one input");
  const Shape first = parts[0].shape();
  const std::size_t axis = r.axis_of(concat_axis(r), first.size(), "axis");
  Shape s = first;
  s[axis] = 0;
  for (const OnnxTensor& p : parts) {
    const Shape ps = p.shape();
    if (p.dtype != parts[0].dtype) r.fail("inputs are " + parts[0].dtype + " and " + p.dtype);
    bool fits = ps.size() == first.size();
    for (std::size_t k = 0; fits && k < ps.size(); ++k) fits = k == axis || ps[k] == first[k];
    if (!fits) r.fail("shapes " + shape_str(first) + " and " + shape_str(ps) + " do not concatenate on axis " + std::to_string(axis));
    s[axis] += ps[axis];
  }
  r.check_size(s);
  OnnxTensor t;
  t.dtype = parts[0].dtype;
  const auto join = [&](auto& out, auto get) {
    out = std::decay_t<decltype(out)>::from_shape(s);
    std::size_t outer = 1, inner = 1;
    for (std::size_t k = 0; k < axis; ++k) outer *= s[k];
    for (std::size_t k = axis + 1; k < s.size(); ++k) inner *= s[k];
    std::size_t offset = 0;
    for (OnnxTensor& p : parts) {
      const auto& a = get(p);
      const std::size_t len = p.shape()[axis];
      for (std::size_t o = 0; o < outer; ++o) {
        std::copy(a.data() + o * len * inner, a.data() + (o + 1) * len * inner, out.data() + (o * s[axis] + offset) * inner);
      }
      offset += len;
    }
  };
  if (t.is_float()) join(t.real, [](OnnxTensor& p) -> xt::xarray<double>& { return p.real; });
  else join(t.ints, [](OnnxTensor& p) -> xt::xarray<std::int64_t>& { return p.ints; });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// Split's axis and part sizes for a value of shape s: the sizes as input (opset 13 on, and 1),
// as an attribute (2 to 12), or equal parts, one per output.
template <class T>
std::pair<std::size_t, std::vector<std::size_t>> split_sizes(NodeReader<T>& r, const Shape& s) {
  const std::size_t axis = r.axis_of(r.attr_int("axis", 0), s.size(), "axis");
  std::vector<std::int64_t> sizes;
  if ((r.opset() >= 13 || r.opset() < 2) && r.has_input(1)) sizes = r.known_ints(1, "split");
  if (sizes.empty() && r.opset() < 13) sizes = r.attr_ints("split").value_or(std::vector<std::int64_t>{});
  const std::size_t parts = r.output_count();
  if (sizes.empty()) {
    if (parts == 0 || s[axis] % parts != 0) r.fail("cannot split " + std::to_string(s[axis]) + " into " + std::to_string(parts) + " equal parts");
    sizes.assign(parts, static_cast<std::int64_t>(s[axis] / parts));
  }
  if (sizes.size() != parts) r.fail("split has " + std::to_string(sizes.size()) + " sizes for " + std::to_string(parts) + " outputs");
  std::int64_t total = 0;
  for (std::int64_t v : sizes) {
    if (v < 0) r.fail("split has a negative size");
    total += v;
  }
  if (total != static_cast<std::int64_t>(s[axis])) r.fail("split sizes " + ints_str(sizes) + " do not add up to " + std::to_string(s[axis]));
  return {axis, std::vector<std::size_t>(sizes.begin(), sizes.end())};
}

template <class T>
bool build_split(NodeReader<T>& r) {
  const Var<T> x = r.var(0);
  const Shape s = x.shape();
  const auto [axis, sizes] = split_sizes(r, s);
  if (sizes.size() == 1) {
    r.set_output(0, x);
    return true;
  }
  const std::vector<Var<T>> parts = xgrad::split(x, sizes, static_cast<long>(axis));
  for (std::size_t k = 0; k < parts.size(); ++k) r.set_output(k, parts[k]);
  return true;
}

template <class T>
bool fold_split(NodeReader<T>& r) {
  const OnnxTensor t = r.known_copy(0);
  const Shape s = t.shape();
  const auto [axis, sizes] = split_sizes(r, s);
  std::vector<std::vector<std::size_t>> idx(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    idx[k].resize(s[k]);
    std::iota(idx[k].begin(), idx[k].end(), std::size_t(0));
  }
  std::size_t begin = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    idx[axis].resize(sizes[k]);
    std::iota(idx[axis].begin(), idx[axis].end(), begin);
    OnnxTensor part;
    part.dtype = t.dtype;
    if (t.is_float()) part.real = take(t.real, idx);
    else part.ints = take(t.ints, idx);
    r.set_output(k, std::move(part), r.any_from_int_input());
    begin += sizes[k];
  }
  return true;
}

// Tile's repeats (input 1, one per axis, >= 0) for a value of shape s.
template <class T>
std::vector<std::size_t> tile_repeats(NodeReader<T>& r, const Shape& s) {
  const std::vector<std::int64_t> repeats = r.known_ints(1, "repeats");
  if (repeats.size() != s.size()) {
    r.fail("repeats " + ints_str(repeats) + " does not have one entry per axis of " + shape_str(s));
  }
  Shape out = s;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (repeats[k] < 0) r.fail("repeats " + ints_str(repeats) + " has a negative entry");
    if (repeats[k] > 0 && s[k] > std::numeric_limits<std::size_t>::max() / static_cast<std::size_t>(repeats[k])) {
      r.fail("repeats " + ints_str(repeats) + " of " + shape_str(s) + " overflow");
    }
    out[k] = s[k] * static_cast<std::size_t>(repeats[k]);
  }
  r.check_size(out);
  return std::vector<std::size_t>(repeats.begin(), repeats.end());
}

// Tile of a run-time value: per axis repeated, a reshape that opens an axis of 1 before it,
// broadcast_to the repeats along it, and a reshape that merges the two (the gradient sums the
// copies).
template <class T>
bool build_tile(NodeReader<T>& r) {
  Var<T> x = r.var(0);
  const std::vector<std::size_t> repeats = tile_repeats(r, x.shape());
  for (std::size_t k = 0; k < repeats.size(); ++k) {
    if (repeats[k] == 1) continue;
    Shape s = x.shape(), opened = s, merged = s;
    opened.insert(opened.begin() + static_cast<long>(k), 1);
    Shape wide_shape = opened;
    wide_shape[k] = repeats[k];
    merged[k] = s[k] * repeats[k];
    x = reshape_to(broadcast_to(reshape_to(x, opened), wide_shape), merged);
  }
  r.set_output(0, x);
  return true;
}

template <class T>
bool fold_tile(NodeReader<T>& r) {
  OnnxTensor t = r.known_copy(0);
  const Shape s = t.shape();
  const std::vector<std::size_t> repeats = tile_repeats(r, s);
  std::vector<std::vector<std::size_t>> idx(s.size());
  for (std::size_t k = 0; k < s.size(); ++k) {
    for (std::size_t i = 0; i < s[k] * repeats[k]; ++i) idx[k].push_back(i % s[k]);
  }
  visit(t, [&](auto& a) { a = take(a, idx); });
  r.set_output(0, std::move(t), r.any_from_int_input());
  return true;
}

// Pad of a run-time value in constant mode with 0 (opset 11 on: pads and constant_value as
// inputs): one pad node per axis padded. Negative pads (cropping), other values and modes are
// refused.
template <class T>
bool build_pad(NodeReader<T>& r) {
  Var<T> x = r.var(0);
  if (r.opset() < 11) r.fail("Pad of a run-time value before opset 11 (pads as an attribute) is not supported");
  const std::string mode = r.attr_string("mode", "constant");
  if (mode != "constant") r.fail("mode '" + mode + "' is not supported (only constant)");
  if (r.has_input(2)) {
    const OnnxTensor& v = r.known(2);
    const double value = v.is_float() ? (v.real.size() ? v.real.data()[0] : 0.0) : (v.ints.size() ? double(v.ints.data()[0]) : 0.0);
    if (value != 0) r.fail("constant_value " + number_str(value) + " is not supported (only 0)");
  }
  const std::size_t rank = x.shape().size();
  const std::vector<std::int64_t> pads = r.known_ints(1, "pads");
  if (pads.size() != 2 * rank) r.fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(rank));
  for (std::size_t k = 0; k < rank; ++k) {
    if (pads[k] < 0 || pads[rank + k] < 0) r.fail("negative pads " + ints_str(pads) + " are not supported");
    if (pads[k] || pads[rank + k]) {
      x = pad(x, static_cast<long>(k), static_cast<std::size_t>(pads[k]), static_cast<std::size_t>(pads[rank + k]));
    }
  }
  r.set_output(0, x);
  return true;
}

}  // namespace

template <class T>
std::vector<ImportRule<T>> slice_rules() {
  return {
      {"Slice", 1, {1, 2, 3, 4}, build_slice<T>, fold_slice<T>, keeps_bool},
      {"Gather", 1, {1}, build_gather<T>, fold_gather<T>, keeps_bool},
      {"Concat", 1, {}, build_concat<T>, fold_concat<T>, keeps_bool},
      {"Split", 1, {1}, build_split<T>, fold_split<T>, keeps_bool},
      {"Pad", 1, {1, 2, 3}, build_pad<T>, nullptr, 0},
      {"Tile", 6, {1}, build_tile<T>, fold_tile<T>, keeps_bool},
  };
}

template std::vector<ImportRule<float>> slice_rules<float>();
template std::vector<ImportRule<double>> slice_rules<double>();

}  // namespace xgrad::onnx_rules
