// Helpers shared by the op files: axis normalisation and the row layout of an axis.
#pragma once

#include <cstddef>
#include <string>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/op.hpp>

namespace xgrad::detail {

// Maps axis in [-rank, rank) to [0, rank); throws naming the axis and the shape otherwise.
inline std::size_t normalize_axis(long axis, const Shape& shape) {
  const long rank = static_cast<long>(shape.size());
  if (axis < -rank || axis >= rank) {
    throw error("axis " + std::to_string(axis) + " is out of range for a " + shape_str(shape) +
                " input");
  }
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

// A row-major array seen as `outer` blocks of `n` x `inner`: the rows along an axis are the
// outer * inner sequences of n elements, element i of row (o, j) at o * n * inner + i * inner + j.
struct Rows {
  std::size_t outer = 1, n = 1, inner = 1;
};

inline Rows rows_along(const Shape& shape, std::size_t axis) {
  Rows r;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < axis) r.outer *= shape[i];
    else if (i == axis) r.n = shape[i];
    else r.inner *= shape[i];
  }
  return r;
}

// Calls f(offset, stride) for the first element and the stride of every row.
template <class F>
void for_each_row(const Rows& r, F&& f) {
  for (std::size_t o = 0; o < r.outer; ++o) {
    for (std::size_t j = 0; j < r.inner; ++j) f(o * r.n * r.inner + j, r.inner);
  }
}

// Whether `from` broadcasts to `to` by numpy's rules: axes aligned on the right, `from` has no
// more axes than `to`, and each of its axes equals the matching axis of `to` or is 1.
inline bool broadcastable(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i) {
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  }
  return true;
}

}  // namespace xgrad::detail
