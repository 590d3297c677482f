// The rules layer_norm and rms_norm (and their VJP ops) share: what they normalise, their eps,
// their parameters' shapes, and ONNX's mean over the last axis.
#pragma once

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/json.hpp>
#include <xgrad/graph/onnx.hpp>
#include <xgrad/graph/shape.hpp>

namespace xgrad::detail {

// The one attribute of layer_norm and rms_norm: {"eps": e}.
inline constexpr const char* norm_key_eps = "eps";

// Throws xgrad::error naming the op unless eps is finite and >= 0.
inline void check_norm_eps(double eps, const std::string& op) {
  if (!(eps >= 0) || !std::isfinite(eps)) throw error(op + ": eps must be finite and >= 0, got " + number_str(eps));
}

// eps from an op's exported attributes {"eps": e}: a finite number >= 0 (the JSON's error names
// the key otherwise).
inline double read_norm_eps(const JsonCursor& attrs) {
  attrs.check_object({norm_key_eps});
  const JsonCursor c = attrs[norm_key_eps];
  const double eps = c.number();
  if (!(eps >= 0) || !std::isfinite(eps)) c.fail("expected a finite number >= 0, got " + number_str(eps));
  return eps;
}

// x (..., d) with d >= 1, what the ops normalise: returns (..., 1), the shape of its per-row
// statistics (mean, rstd); throws xgrad::error naming x otherwise.
inline Shape norm_stats_shape(const Shape& x) {
  if (x.empty() || x.back() == 0) throw error("normalises the last axis, of at least 1 element: x is " + shape_str(x));
  Shape stats = x;
  stats.back() = 1;
  return stats;
}

// norm_stats_shape(x), and each parameter (name, shape) of shape (d), the last axis of x; throws
// xgrad::error naming them all otherwise ("gamma (2,) and beta (3,) must be (3,), ...").
inline Shape norm_stats_shape(const Shape& x, const std::vector<std::pair<const char*, Shape>>& params) {
  const Shape stats = norm_stats_shape(x);
  const Shape d = {x.back()};
  bool fit = true;
  std::string named;
  for (const auto& [name, shape] : params) {
    fit = fit && shape == d;
    named += (named.empty() ? "" : " and ") + std::string(name) + " " + shape_str(shape);
  }
  if (!fit) throw error(named + " must be " + shape_str(d) + ", the last axis of x " + shape_str(x));
  return stats;
}

// The attributes of ONNX's ReduceMean over the last axis, kept (opset 17: axes an attribute).
inline const std::vector<OnnxAttr>& onnx_last_axis() {
  static const std::vector<OnnxAttr> last = {{"axes", std::vector<std::int64_t>{-1}}, {"keepdims", std::int64_t{1}}};
  return last;
}

}  // namespace xgrad::detail
