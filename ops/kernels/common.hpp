// Helpers shared by the op files: axis normalisation and the row layout of an axis.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <xtensor/xarray.hpp>
#include <xtensor/xreducer.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/graph.hpp>
#include <xgrad/graph/op.hpp>
#include <xgrad/ops/kernels/parallel.hpp>

namespace xgrad::detail {

// The bound on every array built from a caller's shape, checked before anything is allocated:
// an op's output (in infer_shape) or the result of a library function (masks, one_hot,
// initialisers). Throws xgrad::error "<what> makes more than 268435456 elements" if `shape`
// holds more than max_array_elements elements, axes of length 0 counted as 1 (bounded_size).
// `what` is a string, or a function that gives one, called only then: an op's infer_shape runs
// on every replay, and must not format shapes it does not print.
template <class What>
void check_elements(const Shape& shape, const What& what) {
  if (bounded_size(shape)) return;
  std::string text;
  if constexpr (std::is_invocable_v<const What&>) {
    text = what();
  } else {
    text = what;
  }
  throw error(text + " makes more than " + std::to_string(max_array_elements) + " elements");
}

// check_elements for a library function's result: "<function>: a (2, 3) <noun> makes more ...".
inline void check_result_shape(const std::string& function, const Shape& shape, const std::string& noun) {
  check_elements(shape, function + ": a " + shape_str(shape) + " " + noun);
}

// For a composite builder (a loss, attention), before its first node: throws xgrad::error
// "<who>: <name> is an empty Var" or "<who>: <name> (node N) belongs to another graph than
// <first name>" unless every Var is valid and of the first one's graph. A rejected call then
// adds no node.
template <class T>
void check_one_graph(const std::string& who, const std::vector<std::pair<const char*, const Var<T>*>>& vars) {
  for (const auto& [name, v] : vars) {
    if (!v->valid()) throw error(who + ": " + name + " is an empty Var");
    if (&v->graph() != &vars.front().second->graph()) {
      throw error(who + ": " + name + " (node " + std::to_string(v->id()) + ") belongs to another graph than " +
                  vars.front().first);
    }
  }
}

// Maps axis in [-rank, rank) to [0, rank); throws naming the axis and the shape otherwise.
inline std::size_t normalize_axis(long axis, const Shape& shape) {
  const long rank = static_cast<long>(shape.size());
  if (axis < -rank || axis >= rank) {
    throw error("axis " + std::to_string(axis) + " is out of range for a " + shape_str(shape) +
                " input");
  }
  return static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
}

// normalize_axis for an op that normalises along the axis (softmax, log_softmax): also throws
// if the axis has length 0, naming the op.
inline std::size_t nonempty_axis(long axis, const Shape& shape, const std::string& op) {
  const std::size_t a = normalize_axis(axis, shape);
  if (shape[a] == 0) {
    throw error("axis " + std::to_string(axis) + " of x " + shape_str(shape) + " is empty: " + op +
                " over no elements is undefined");
  }
  return a;
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

// f(offset, n, stride) for every row of an array of `shape` along `axis`, the rows split over
// threads (ops/kernels/parallel.hpp): the forward of the row ops. f must only write its own row.
template <class F>
void parallel_for_each_row(const Shape& shape, long axis, F&& f) {
  const Rows r = rows_along(shape, normalize_axis(axis, shape));
  parallel_for(r.outer * r.inner, r.n, [&](std::size_t begin, std::size_t end) {
    for (std::size_t row = begin; row < end; ++row) f((row / r.inner) * r.n * r.inner + row % r.inner, r.n, r.inner);
  });
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

// A reduction over some axes of x: the axes normalised and sorted, x's shape with them set to 1
// (`kept`), the output shape (`kept`, or x's shape without them), and how many elements each
// output element reduces.
struct Reduction {
  std::vector<std::size_t> axes;
  Shape kept, out;
  std::size_t count = 1;
};

// Throws xgrad::error naming the axes and x's shape if an axis is out of range or repeated.
inline Reduction reduction(const std::vector<long>& axes, bool keepdims, const Shape& x) {
  Reduction r;
  r.kept = x;
  for (long a : axes) {
    const std::size_t i = normalize_axis(a, x);
    for (std::size_t seen : r.axes) {
      if (seen == i) throw error("axis " + std::to_string(a) + " is repeated in the axes of x " + shape_str(x));
    }
    r.axes.push_back(i);
    r.kept[i] = 1;
    r.count *= x[i];
  }
  std::sort(r.axes.begin(), r.axes.end());
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (keepdims || std::find(r.axes.begin(), r.axes.end(), i) == r.axes.end()) r.out.push_back(r.kept[i]);
  }
  return r;
}

// y = factor * (x summed over the sorted `axes`), written in y's row-major order (dropping or
// keeping the summed axes as 1 does not change that order).
template <class T>
void sum_axes(const xt::xarray<T>& x, const std::vector<std::size_t>& axes, T factor, xt::xarray<T>& y) {
  if (axes.empty()) {
    std::transform(x.begin(), x.end(), y.begin(), [factor](T e) { return e * factor; });
    return;
  }
  if (x.size() == 0) {  // a sum of nothing is 0 (xtensor's reducer does not take empty input)
    std::fill(y.begin(), y.end(), T(0) * factor);
    return;
  }
  const xt::xarray<T> s = xt::sum(x, axes, xt::evaluation_strategy::immediate);
  std::transform(s.begin(), s.end(), y.begin(), [factor](T e) { return e * factor; });
}

// Every axis of x, for sum(x) and mean(x).
inline std::vector<long> all_axes(const Shape& x) {
  std::vector<long> axes;
  for (std::size_t i = 0; i < x.size(); ++i) axes.push_back(static_cast<long>(i));
  return axes;
}

// The shape a and b broadcast to together by numpy's rules (axes aligned on the right, an axis
// of 1 stretches), or nullopt if some pair of axes differs with neither being 1.
inline std::optional<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const Shape& big = a.size() >= b.size() ? a : b;
  const Shape& small = a.size() >= b.size() ? b : a;
  Shape out = big;
  const std::size_t lead = big.size() - small.size();
  for (std::size_t i = 0; i < small.size(); ++i) {
    std::size_t& d = out[lead + i];
    if (small[i] == d || small[i] == 1) continue;
    if (d != 1) return std::nullopt;
    d = small[i];
  }
  return out;
}

// broadcast_shapes(a, b), for the infer_shape of a broadcasting op (add, mul): an xgrad::error
// naming both shapes if they do not broadcast together, or if the result holds more than
// max_array_elements (check_elements).
inline Shape broadcast_or_throw(const Shape& a, const Shape& b) {
  const std::optional<Shape> s = broadcast_shapes(a, b);
  if (!s) {
    throw error("a " + shape_str(a) + " and b " + shape_str(b) +
                " do not broadcast together (aligned on the right, each pair of axes must be equal or one of them 1)");
  }
  check_elements(*s, [&] { return "broadcasting a " + shape_str(a) + " and b " + shape_str(b) + " to " + shape_str(*s); });
  return *s;
}

// The step in an array of `shape`, broadcast to a shape of `rank` axes, for a step along each of
// those axes: its row-major stride, 0 where the axis is broadcast (a length 1 or a missing axis).
template <class S>
std::vector<std::size_t> broadcast_steps(const S& shape, std::size_t rank) {
  std::vector<std::size_t> s(rank, 0);
  std::size_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1) s[rank - shape.size() + i] = stride;
    stride *= shape[i];
  }
  return s;
}

// y = f(a, b) elementwise, a and b broadcast to y's shape (which broadcast_shapes gave). Walks y
// in row-major order, contiguous along its last axis, its rows split over the thread pool (each
// element computed by one thread: the same bits for any thread count); no broadcast copy of a
// or b is made. y may be a or b where that operand has y's shape.
template <class T, class F>
void broadcast_binary(const xt::xarray<T>& a, const xt::xarray<T>& b, xt::xarray<T>& y, F f) {
  const T* pa = a.data();
  const T* pb = b.data();
  T* py = y.data();
  const std::size_t size = y.size();
  if (shapes_equal(a.shape(), y.shape()) && shapes_equal(b.shape(), y.shape())) {
    parallel_rows(size, 1, [pa, pb, py, &f](std::size_t begin, std::size_t end) {  // pointers by value: a loop that vectorises
      for (std::size_t i = begin; i < end; ++i) py[i] = f(pa[i], pb[i]);
    });
    return;
  }
  if (size == 0) return;
  const std::size_t rank = y.dimension();
  const std::vector<std::size_t> sa = broadcast_steps(a.shape(), rank), sb = broadcast_steps(b.shape(), rank);
  const std::size_t n = y.shape()[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
  parallel_rows(size / n, n + 4, [&, pa, pb, py](std::size_t first, std::size_t last) {
    // The index of row `first` over the axes before the last, and its offsets in a and b.
    std::vector<std::size_t> index(rank, 0);
    std::size_t oa = 0, ob = 0;
    for (std::size_t axis = rank - 1, rest = first; axis-- > 0;) {
      index[axis] = rest % y.shape()[axis];
      rest /= y.shape()[axis];
      oa += index[axis] * sa[axis];
      ob += index[axis] * sb[axis];
    }
    for (std::size_t r = first; r < last; ++r) {
      const T* ra = pa + oa;
      const T* rb = pb + ob;
      T* ry = py + r * n;
      if (ia == 1 && ib == 1) {  // contiguous rows (a bias over the rows): loops that vectorise
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(ra[j], rb[j]);
      } else if (ia == 1 && ib == 0) {
        const T vb = *rb;
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(ra[j], vb);
      } else if (ia == 0 && ib == 1) {
        const T va = *ra;
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(va, rb[j]);
      } else {
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(ra[j * ia], rb[j * ib]);
      }
      for (std::size_t axis = rank - 1; axis-- > 0;) {  // the next row: an odometer over axes < rank-1
        oa += sa[axis];
        ob += sb[axis];
        if (++index[axis] < y.shape()[axis]) break;
        oa -= sa[axis] * index[axis];
        ob -= sb[axis] * index[axis];
        index[axis] = 0;
      }
    }
  });
}

// y = f(c, a, b) elementwise, c, a and b broadcast to y's shape (where's forward), as
// broadcast_binary: y walked row by row along its last axis, the rows split over the thread pool,
// no broadcast copy made; y may be an operand of y's shape.
template <class T, class F>
void broadcast_ternary(const xt::xarray<T>& c, const xt::xarray<T>& a, const xt::xarray<T>& b, xt::xarray<T>& y, F f) {
  const T* pc = c.data();
  const T* pa = a.data();
  const T* pb = b.data();
  T* py = y.data();
  const std::size_t size = y.size();
  if (shapes_equal(c.shape(), y.shape()) && shapes_equal(a.shape(), y.shape()) && shapes_equal(b.shape(), y.shape())) {
    parallel_rows(size, 1, [pc, pa, pb, py, &f](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) py[i] = f(pc[i], pa[i], pb[i]);
    });
    return;
  }
  if (size == 0) return;
  const std::size_t rank = y.dimension();
  const std::vector<std::size_t> sc = broadcast_steps(c.shape(), rank), sa = broadcast_steps(a.shape(), rank),
                                 sb = broadcast_steps(b.shape(), rank);
  const std::size_t n = y.shape()[rank - 1], ic = sc[rank - 1], ia = sa[rank - 1], ib = sb[rank - 1];
  parallel_rows(size / n, n + 4, [&, pc, pa, pb, py](std::size_t first, std::size_t last) {
    // The index of row `first` over the axes before the last, and its offsets in c, a and b.
    std::vector<std::size_t> index(rank, 0);
    std::size_t oc = 0, oa = 0, ob = 0;
    for (std::size_t axis = rank - 1, rest = first; axis-- > 0;) {
      index[axis] = rest % y.shape()[axis];
      rest /= y.shape()[axis];
      oc += index[axis] * sc[axis];
      oa += index[axis] * sa[axis];
      ob += index[axis] * sb[axis];
    }
    for (std::size_t r = first; r < last; ++r) {
      const T* rc = pc + oc;
      const T* ra = pa + oa;
      const T* rb = pb + ob;
      T* ry = py + r * n;
      if (ic == 1 && ia == 1 && ib == 1) {  // contiguous rows: a loop that vectorises
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(rc[j], ra[j], rb[j]);
      } else {
        for (std::size_t j = 0; j < n; ++j) ry[j] = f(rc[j * ic], ra[j * ia], rb[j * ib]);
      }
      for (std::size_t axis = rank - 1; axis-- > 0;) {  // the next row: an odometer over axes < rank-1
        oc += sc[axis];
        oa += sa[axis];
        ob += sb[axis];
        if (++index[axis] < y.shape()[axis]) break;
        oc -= sc[axis] * index[axis];
        oa -= sa[axis] * index[axis];
        ob -= sb[axis] * index[axis];
        index[axis] = 0;
      }
    }
  });
}

// Op::work of a pass over the rows along `axis` of x (softmax, log_softmax, softmax_vjp), given
// the elements it visits: each row also costs 64 visits (its setup and short-row tail), and each
// element of a row along another axis than the last 32 more (a strided walk). Measured here,
// float64, one core: softmax of (2^24, 1) took 20 ns a visit and along axis 0 of (1024, 16384)
// 19 ns, against 0.46 ns for rows of 1024; with these terms all three take 0.5-0.6 ns a unit.
inline double row_pass_work(double visits, const Shape& x, long axis) {
  const std::size_t a = normalize_axis(axis, x);
  const double elements = Op::element_count(x), rows = x[a] ? elements / static_cast<double>(x[a]) : 0.0;
  return visits + 64 * rows + (a + 1 == x.size() ? 0.0 : 32 * elements);
}

}  // namespace xgrad::detail
