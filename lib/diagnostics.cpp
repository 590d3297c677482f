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

// ||grad_in|| / ||grad_out|| over one row; 0 when grad_out is 0 there.
template <class T>
double row_gain(const T* grad_in, const T* grad_out, std::size_t offset, std::size_t n, std::size_t stride) {
  double in2 = 0, out2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double gi = static_cast<double>(grad_in[offset + i * stride]);
    const double go = static_cast<double>(grad_out[offset + i * stride]);
    in2 += gi * gi;
    out2 += go * go;
  }
  return out2 > 0 ? std::sqrt(in2 / out2) : 0.0;
}

// d's rows (with per_row), summaries and saturated fraction, from row(offset, stride), the
// statistics of each row of `rows` (each with a gain when `gains`).
template <class RowStats>
void summarize(SoftmaxDiagnostics& d, const detail::Rows& rows, bool per_row, bool gains, RowStats row) {
  Accumulator max_weight, entropy, normalized_entropy, effective_support, jacobian_norm, gain;
  std::size_t saturated = 0;
  if (per_row) d.rows.reserve(rows.outer * rows.inner);
  detail::for_each_row(rows, [&](std::size_t offset, std::size_t stride) {
    const SoftmaxRow r = row(offset, stride);
    if (gains) gain.add(*r.gradient_gain);
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
  if (gains) d.gradient_gain = gain.summary();
  d.saturated_fraction = d.row_count ? static_cast<double>(saturated) / static_cast<double>(d.row_count) : 0.0;
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
    const T* p = node.value().data();
    const detail::Rows rows = detail::rows_along(shape, d.axis);
    summarize(d, rows, per_row, d.vjp_node.has_value(), [&](std::size_t offset, std::size_t stride) {
      SoftmaxRow r = row_stats(p + offset, rows.n, stride, threshold);
      if (d.vjp_node) r.gradient_gain = row_gain(grad_in, grad_out, offset, rows.n, stride);
      return r;
    });
    out.push_back(std::move(d));
  }
  return out;
}

template <class T>
SoftmaxDiagnostics attention_weights_diagnostics(const Var<T>& weights, const Var<T>& logits, double threshold,
                                                 bool per_row) {
  const std::string who = "attention_weights_diagnostics";
  if (!(threshold > 0 && threshold <= 1)) throw error(who + ": the threshold must be in (0, 1], got " + number_str(threshold));
  detail::check_one_graph<T>(who, {{"weights", &weights}, {"logits", &logits}});
  const Graph<T>& g = weights.graph();
  g.require_values(who);
  const Shape shape = weights.shape();
  if (shape.empty() || shape.back() == 0 || logits.shape() != shape) {
    throw error(who + ": weights must be (..., T_k) with T_k > 0 and logits of their shape: weights are " +
                shape_str(shape) + ", logits " + shape_str(logits.shape()));
  }
  SoftmaxDiagnostics d;
  d.node = weights.id();
  d.threshold = threshold;
  d.axis = shape.size() - 1;
  d.n = shape.back();
  const detail::Rows rows = detail::rows_along(shape, d.axis);
  if (per_row && rows.outer > max_diagnostic_rows) {
    throw error(who + ": the weights have " + std::to_string(rows.outer) + " rows, more than the " +
                std::to_string(max_diagnostic_rows) + " whose per-row statistics are kept; ask for the summaries alone (per_row false)");
  }
  // The last gradient of the logits, and the last of the weights before it (grad() makes the
  // weights' gradient first, in the same pass).
  std::optional<Slot> grad_logits, grad_weights;
  const auto holds = [&](std::size_t id, const Var<T>& of) -> std::optional<Slot> {
    const Node<T>& n = g.node(id);
    for (std::size_t k = 0; k < n.output_count(); ++k) {
      const auto& at = n.grad_of(k);
      if (at && at->node == of.id() && at->output == of.output()) return Slot{id, k};
    }
    return std::nullopt;
  };
  for (std::size_t id = g.size(); id-- > logits.id() + 1 && !grad_weights;) {
    if (!grad_logits) {
      grad_logits = holds(id, logits);
    } else {
      grad_weights = holds(id, weights);
    }
  }
  const T *grad_in = nullptr, *grad_out = nullptr;
  if (grad_logits && grad_weights) {
    d.vjp_node = grad_logits->node;
    grad_in = g.node(grad_logits->node).value(grad_logits->output).data();
    grad_out = g.node(grad_weights->node).value(grad_weights->output).data();
  }
  const T* w = g.node(weights.id()).value(weights.output()).data();
  std::vector<double> p(rows.n);
  summarize(d, rows, per_row, d.vjp_node.has_value(), [&](std::size_t offset, std::size_t stride) {
    double sum = 0;
    for (std::size_t i = 0; i < rows.n; ++i) sum += static_cast<double>(w[offset + i * stride]);
    for (std::size_t i = 0; i < rows.n; ++i) p[i] = sum > 0 ? static_cast<double>(w[offset + i * stride]) / sum : 0.0;
    SoftmaxRow r = row_stats(p.data(), rows.n, 1, threshold);
    if (d.vjp_node) r.gradient_gain = row_gain(grad_in, grad_out, offset, rows.n, stride);
    return r;
  });
  return d;
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
template SoftmaxDiagnostics attention_weights_diagnostics(const Var<float>&, const Var<float>&, double, bool);
template SoftmaxDiagnostics attention_weights_diagnostics(const Var<double>&, const Var<double>&, double, bool);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<float>&, double, bool);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<double>&, double, bool);

}  // namespace xgrad
