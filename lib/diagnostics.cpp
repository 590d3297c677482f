#include <xgrad/lib/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/common.hpp>

namespace xgrad {

namespace {

template <class Get>
Summary summarize(const std::vector<SoftmaxRow>& rows, Get get) {
  Summary s;
  if (rows.empty()) return s;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -std::numeric_limits<double>::infinity();
  double sum = 0;
  for (const auto& r : rows) {
    const double x = get(r);
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
    sum += x;
  }
  s.mean = sum / static_cast<double>(rows.size());
  return s;
}

Json summary_json(const Summary& s) {
  return Json{{"min", encode_number(s.min)}, {"mean", encode_number(s.mean)}, {"max", encode_number(s.max)}};
}

}  // namespace

SoftmaxRow softmax_row_stats(const double* p, std::size_t n, std::size_t stride, double threshold) {
  SoftmaxRow r;
  double s2 = 0, s3 = 0;
  r.max_weight = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const double x = p[i * stride];
    r.max_weight = std::max(r.max_weight, x);
    if (x > 0) r.entropy -= x * std::log(x);
    s2 += x * x;
    s3 += x * x * x;
  }
  r.entropy = std::max(r.entropy, 0.0);  // rounding in a one-hot row must not give -0 or -1e-17
  r.normalized_entropy = n > 1 ? r.entropy / std::log(static_cast<double>(n)) : 0.0;
  r.effective_support = std::exp(r.entropy);
  r.jacobian_norm = std::sqrt(std::max(s2 - 2 * s3 + s2 * s2, 0.0));
  r.saturated = r.max_weight >= threshold;
  return r;
}

template <class T>
std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<T>& g, double threshold) {
  if (!(threshold > 0 && threshold <= 1)) {
    throw error("softmax_diagnostics: the threshold must be in (0, 1], got " + number_str(threshold));
  }
  g.require_values("softmax_diagnostics");
  std::vector<SoftmaxDiagnostics> out;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& node = g.node(id);
    if (node.op_name() != "softmax") continue;
    SoftmaxDiagnostics d;
    d.node = id;
    d.threshold = threshold;
    const Shape shape(node.value.shape().begin(), node.value.shape().end());
    d.axis = detail::normalize_axis(node.op->attrs()["axis"].template get<long>(), shape);
    d.n = shape[d.axis];
    for (std::size_t j = id + 1; j < g.size(); ++j) {
      if (g.node(j).op_name() == "softmax_vjp" && g.node(j).inputs[0] == id) d.vjp_node = j;
    }
    const xt::xarray<double> p = xt::cast<double>(node.value);
    xt::xarray<double> grad_in, grad_out;
    if (d.vjp_node) {
      grad_in = xt::cast<double>(g.node(*d.vjp_node).value);
      grad_out = xt::cast<double>(g.node(g.node(*d.vjp_node).inputs[1]).value);
    }
    const detail::Rows rows = detail::rows_along(shape, d.axis);
    detail::for_each_row(rows, [&](std::size_t offset, std::size_t stride) {
      SoftmaxRow r = softmax_row_stats(p.data() + offset, rows.n, stride, threshold);
      if (d.vjp_node) {
        double in2 = 0, out2 = 0;
        for (std::size_t i = 0; i < rows.n; ++i) {
          in2 += grad_in.data()[offset + i * stride] * grad_in.data()[offset + i * stride];
          out2 += grad_out.data()[offset + i * stride] * grad_out.data()[offset + i * stride];
        }
        r.gradient_gain = out2 > 0 ? std::sqrt(in2 / out2) : 0.0;
      }
      d.rows.push_back(r);
    });
    d.max_weight = summarize(d.rows, [](const SoftmaxRow& r) { return r.max_weight; });
    d.entropy = summarize(d.rows, [](const SoftmaxRow& r) { return r.entropy; });
    d.normalized_entropy = summarize(d.rows, [](const SoftmaxRow& r) { return r.normalized_entropy; });
    d.effective_support = summarize(d.rows, [](const SoftmaxRow& r) { return r.effective_support; });
    d.jacobian_norm = summarize(d.rows, [](const SoftmaxRow& r) { return r.jacobian_norm; });
    if (d.vjp_node) d.gradient_gain = summarize(d.rows, [](const SoftmaxRow& r) { return *r.gradient_gain; });
    const auto saturated = std::count_if(d.rows.begin(), d.rows.end(), [](const auto& r) { return r.saturated; });
    d.saturated_fraction = d.rows.empty() ? 0.0 : static_cast<double>(saturated) / static_cast<double>(d.rows.size());
    out.push_back(std::move(d));
  }
  return out;
}

Json diagnostics_to_json(const std::vector<SoftmaxDiagnostics>& diagnostics, bool rows) {
  Json out = Json::array();
  for (const auto& d : diagnostics) {
    Json j{{"node", d.node}, {"axis", d.axis}, {"n", d.n}, {"rows", d.rows.size()}, {"threshold", d.threshold},
           {"saturated_fraction", d.saturated_fraction}, {"max_weight", summary_json(d.max_weight)},
           {"entropy", summary_json(d.entropy)}, {"normalized_entropy", summary_json(d.normalized_entropy)},
           {"effective_support", summary_json(d.effective_support)}, {"jacobian_norm", summary_json(d.jacobian_norm)}};
    if (d.vjp_node) {
      j["vjp_node"] = *d.vjp_node;
      j["gradient_gain"] = summary_json(*d.gradient_gain);
    }
    if (rows) {
      Json per_row = Json::object();
      const auto column = [&](const char* name, auto get) {
        Json c = Json::array();
        for (const auto& r : d.rows) c.push_back(get(r));
        per_row[name] = std::move(c);
      };
      column("max_weight", [](const SoftmaxRow& r) { return encode_number(r.max_weight); });
      column("entropy", [](const SoftmaxRow& r) { return encode_number(r.entropy); });
      column("normalized_entropy", [](const SoftmaxRow& r) { return encode_number(r.normalized_entropy); });
      column("effective_support", [](const SoftmaxRow& r) { return encode_number(r.effective_support); });
      column("jacobian_norm", [](const SoftmaxRow& r) { return encode_number(r.jacobian_norm); });
      column("saturated", [](const SoftmaxRow& r) { return Json(r.saturated); });
      if (d.vjp_node) column("gradient_gain", [](const SoftmaxRow& r) { return encode_number(*r.gradient_gain); });
      j["per_row"] = std::move(per_row);
    }
    out.push_back(std::move(j));
  }
  return out;
}

template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<float>&, double);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<double>&, double);

}  // namespace xgrad
