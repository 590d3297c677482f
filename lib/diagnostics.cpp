#include <xgrad/lib/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/softmax.hpp>
#include <xgrad/ops/softmax_vjp.hpp>

namespace xgrad {

namespace {

// Min, mean and max of a quantity, one row at a time.
class Accumulator {
 public:
  void add(double x) {
    m_min = std::min(m_min, x);
    m_max = std::max(m_max, x);
    m_sum += x;
    ++m_count;
  }
  Summary summary() const {
    if (m_count == 0) return {};
    return {m_min, m_sum / static_cast<double>(m_count), m_max};
  }

 private:
  double m_min = std::numeric_limits<double>::infinity(), m_max = -std::numeric_limits<double>::infinity();
  double m_sum = 0;
  std::size_t m_count = 0;
};

Json summary_json(const Summary& s) {
  return Json{{"min", encode_number(s.min)}, {"mean", encode_number(s.mean)}, {"max", encode_number(s.max)}};
}

template <class T>
SoftmaxRow row_stats(const T* p, std::size_t n, std::size_t stride, double threshold) {
  SoftmaxRow r;
  double s2 = 0, s3 = 0;
  r.max_weight = -std::numeric_limits<double>::infinity();
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(p[i * stride]);
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

// The axis a softmax node normalises along, in [0, rank); nullopt for a node that is no softmax.
template <class T>
std::optional<std::size_t> softmax_axis_of(const Node<T>& node) {
  if (node.is_leaf()) return std::nullopt;
  const std::optional<long> axis = softmax_axis(*node.op);
  if (!axis) return std::nullopt;
  return detail::normalize_axis(*axis, node.shape());
}

}  // namespace

SoftmaxRow softmax_row_stats(const double* p, std::size_t n, std::size_t stride, double threshold) {
  return row_stats(p, n, stride, threshold);
}
SoftmaxRow softmax_row_stats(const float* p, std::size_t n, std::size_t stride, double threshold) {
  return row_stats(p, n, stride, threshold);
}

template <class T>
std::size_t softmax_row_count(const Graph<T>& g) {
  std::size_t rows = 0;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& node = g.node(id);
    if (node.released) continue;
    if (const auto axis = softmax_axis_of(node)) rows += node.value().size() / node.value().shape()[*axis];
  }
  return rows;
}

template <class T>
std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<T>& g, double threshold, bool per_row) {
  if (!(threshold > 0 && threshold <= 1)) {
    throw error("softmax_diagnostics: the threshold must be in (0, 1], got " + number_str(threshold));
  }
  g.require_values("softmax_diagnostics");
  // Each softmax node's last softmax_vjp, in one pass over the nodes; and the rows in all.
  std::vector<std::size_t> softmaxes;
  std::map<std::size_t, std::size_t> vjp_of;
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& node = g.node(id);
    if (node.is_leaf()) continue;
    if (softmax_axis(*node.op)) {
      softmaxes.push_back(id);
    } else if (is_softmax_vjp(*node.op) && node.inputs[0].output == 0) {
      vjp_of[node.inputs[0].node] = id;
    }
  }
  const std::size_t total_rows = per_row ? softmax_row_count(g) : 0;
  if (total_rows > max_diagnostic_rows) {
    throw error("softmax_diagnostics: the softmax nodes have " + std::to_string(total_rows) +
                " rows in all, more than the " + std::to_string(max_diagnostic_rows) +
                " whose per-row statistics are kept; ask for the summaries alone (per_row false)");
  }
  std::vector<SoftmaxDiagnostics> out;
  for (std::size_t id : softmaxes) {
    const Node<T>& node = g.node(id);
    SoftmaxDiagnostics d;
    d.node = id;
    d.threshold = threshold;
    const Shape shape = node.shape();
    d.axis = *softmax_axis_of(node);
    d.n = shape[d.axis];
    const auto vjp = vjp_of.find(id);
    const T *grad_in = nullptr, *grad_out = nullptr;
    if (vjp != vjp_of.end()) {
      d.vjp_node = vjp->second;
      const Node<T>& vjp_node = g.node(vjp->second);
      grad_in = vjp_node.value().data();
      grad_out = g.node(vjp_node.inputs[1].node).value(vjp_node.inputs[1].output).data();
    }
    Accumulator max_weight, entropy, normalized_entropy, effective_support, jacobian_norm, gain;
    std::size_t saturated = 0;
    const T* p = node.value().data();
    const detail::Rows rows = detail::rows_along(shape, d.axis);
    if (per_row) d.rows.reserve(node.value().size() / d.n);
    detail::for_each_row(rows, [&](std::size_t offset, std::size_t stride) {
      SoftmaxRow r = row_stats(p + offset, rows.n, stride, threshold);
      if (grad_in) {
        double in2 = 0, out2 = 0;
        for (std::size_t i = 0; i < rows.n; ++i) {
          const double gi = static_cast<double>(grad_in[offset + i * stride]);
          const double go = static_cast<double>(grad_out[offset + i * stride]);
          in2 += gi * gi;
          out2 += go * go;
        }
        r.gradient_gain = out2 > 0 ? std::sqrt(in2 / out2) : 0.0;
        gain.add(*r.gradient_gain);
      }
      max_weight.add(r.max_weight);
      entropy.add(r.entropy);
      normalized_entropy.add(r.normalized_entropy);
      effective_support.add(r.effective_support);
      jacobian_norm.add(r.jacobian_norm);
      saturated += r.saturated;
      ++d.row_count;
      if (per_row) d.rows.push_back(r);
    });
    d.max_weight = max_weight.summary();
    d.entropy = entropy.summary();
    d.normalized_entropy = normalized_entropy.summary();
    d.effective_support = effective_support.summary();
    d.jacobian_norm = jacobian_norm.summary();
    if (d.vjp_node) d.gradient_gain = gain.summary();
    d.saturated_fraction = d.row_count ? static_cast<double>(saturated) / static_cast<double>(d.row_count) : 0.0;
    out.push_back(std::move(d));
  }
  return out;
}

Json diagnostics_to_json(const std::vector<SoftmaxDiagnostics>& diagnostics, bool rows) {
  Json out = Json::array();
  for (const auto& d : diagnostics) {
    Json j{{"node", d.node}, {"axis", d.axis}, {"n", d.n}, {"rows", d.row_count}, {"threshold", d.threshold},
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

template std::size_t softmax_row_count(const Graph<float>&);
template std::size_t softmax_row_count(const Graph<double>&);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<float>&, double, bool);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<double>&, double, bool);

}  // namespace xgrad
