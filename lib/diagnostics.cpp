#include <xgrad/lib/diagnostics.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

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
  r.masked = r.max_weight == 0;  // weights >= 0 with a max of 0: a row of zeros
  return r;
}

// ||grad_in|| / ||grad_out|| over one row; empty when grad_out is 0 there.
template <class T>
std::optional<double> row_gain(const T* grad_in, const T* grad_out, std::size_t offset, std::size_t n,
                               std::size_t stride) {
  double in2 = 0, out2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double gi = static_cast<double>(grad_in[offset + i * stride]);
    const double go = static_cast<double>(grad_out[offset + i * stride]);
    in2 += gi * gi;
    out2 += go * go;
  }
  if (!(out2 > 0)) return std::nullopt;
  return std::sqrt(in2 / out2);
}

// The summaries of a set of rows, one row at a time.
class StatsAccumulator {
 public:
  void add(const SoftmaxRow& r, bool gains) {
    ++m_rows;
    if (r.masked) {
      ++m_masked;
      return;
    }
    m_max_weight.add(r.max_weight);
    m_entropy.add(r.entropy);
    m_normalized_entropy.add(r.normalized_entropy);
    m_effective_support.add(r.effective_support);
    m_jacobian_norm.add(r.jacobian_norm);
    m_saturated += r.saturated;
    if (!gains) return;
    if (r.gradient_gain) m_gain.add(*r.gradient_gain);
    else ++m_without_gradient;
  }
  void finish(SoftmaxStats& s, bool gains) const {
    s.row_count = m_rows;
    s.masked_rows = m_masked;
    s.rows_without_gradient = m_without_gradient;
    s.max_weight = m_max_weight.summary();
    s.entropy = m_entropy.summary();
    s.normalized_entropy = m_normalized_entropy.summary();
    s.effective_support = m_effective_support.summary();
    s.jacobian_norm = m_jacobian_norm.summary();
    if (gains) s.gradient_gain = m_gain.summary();
    const std::size_t unmasked = m_rows - m_masked;
    s.saturated_fraction = unmasked ? static_cast<double>(m_saturated) / static_cast<double>(unmasked) : 0.0;
  }

 private:
  Accumulator m_max_weight, m_entropy, m_normalized_entropy, m_effective_support, m_jacobian_norm, m_gain;
  std::size_t m_rows = 0, m_masked = 0, m_without_gradient = 0, m_saturated = 0;
};

// d's rows (with per_row), summaries and groups (when d.group_axis is set), from row(offset,
// stride), the statistics of each row of `rows` (each with a gain when `gains`, but for rows
// without a gradient).
template <class RowStats>
void summarize(SoftmaxDiagnostics& d, const detail::Rows& rows, bool per_row, bool gains, RowStats row) {
  StatsAccumulator all;
  // Row i's group: its index along the group axis, whose place in row_shape is `at`.
  std::vector<StatsAccumulator> groups;
  std::size_t group_stride = 1;
  if (d.group_axis) {
    const std::size_t at = *d.group_axis < d.axis ? *d.group_axis : *d.group_axis - 1;
    for (std::size_t i = at + 1; i < d.row_shape.size(); ++i) group_stride *= d.row_shape[i];
    groups.resize(d.row_shape[at]);
  }
  if (per_row) d.rows.reserve(rows.outer * rows.inner);
  std::size_t index = 0;
  detail::for_each_row(rows, [&](std::size_t offset, std::size_t stride) {
    const SoftmaxRow r = row(offset, stride);
    all.add(r, gains);
    if (!groups.empty()) groups[(index / group_stride) % groups.size()].add(r, gains);
    ++index;
    if (per_row) d.rows.push_back(r);
  });
  all.finish(d, gains);
  for (std::size_t k = 0; k < groups.size(); ++k) {
    SoftmaxGroup group;
    group.index = k;
    groups[k].finish(group, gains);
    d.groups.push_back(std::move(group));
  }
}

// The shape without one axis.
Shape without_axis(const Shape& shape, std::size_t axis) {
  Shape out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i != axis) out.push_back(shape[i]);
  }
  return out;
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

const SoftmaxGroup* worst_group(const SoftmaxDiagnostics& d) {
  const SoftmaxGroup* worst = nullptr;
  for (const SoftmaxGroup& group : d.groups) {
    if (!worst || group.saturated_fraction > worst->saturated_fraction ||
        (group.saturated_fraction == worst->saturated_fraction &&
         group.normalized_entropy.mean < worst->normalized_entropy.mean)) {
      worst = &group;
    }
  }
  return worst;
}

template <class T>
void for_each_softmax_diagnostics(const Graph<T>& g, double threshold, bool per_row, std::optional<std::size_t> group_axis,
                                  const std::function<void(const SoftmaxDiagnostics&)>& f) {
  if (!(threshold > 0 && threshold <= 1)) {
    throw error("softmax_diagnostics: the threshold must be in (0, 1], got " + number_str(threshold));
  }
  g.require_values("softmax_diagnostics");
  // Each softmax node's last softmax_vjp (none: 0, never a VJP's id), in one pass over the
  // nodes; and the rows in all.
  std::vector<std::size_t> softmaxes;
  std::vector<std::size_t> vjp_of(g.size(), 0);
  for (std::size_t id = 0; id < g.size(); ++id) {
    const Node<T>& node = g.node(id);
    if (node.is_leaf()) continue;
    if (softmax_axis(*node.op)) {
      softmaxes.push_back(id);
    } else if (is_softmax_vjp(*node.op) && node.inputs[0].output == 0) {
      vjp_of[node.inputs[0].node] = id;
    }
  }
  // A group axis must be one of some softmax node's axes other than its softmax axis.
  const auto groups_along = [&](const Node<T>& node) {
    return group_axis && *group_axis < node.shape().size() && *group_axis != *softmax_axis_of(node);
  };
  if (group_axis && !softmaxes.empty() &&
      std::none_of(softmaxes.begin(), softmaxes.end(), [&](std::size_t id) { return groups_along(g.node(id)); })) {
    std::string nodes;
    for (std::size_t id : softmaxes) {
      nodes += std::string(nodes.empty() ? "" : ", ") + "node " + std::to_string(id) + " " + shape_str(g.node(id).shape()) +
               " along axis " + std::to_string(*softmax_axis_of(g.node(id)));
    }
    throw error("softmax_diagnostics: group axis " + std::to_string(*group_axis) +
                " is an axis other than the softmax axis of no softmax node (" + nodes + ")");
  }
  const std::size_t total_rows = per_row ? softmax_row_count(g) : 0;
  if (total_rows > max_diagnostic_rows) {
    throw error("softmax_diagnostics: the softmax nodes have " + std::to_string(total_rows) +
                " rows in all, more than the " + std::to_string(max_diagnostic_rows) +
                " whose per-row statistics are kept; ask for the summaries alone (per_row false)");
  }
  for (std::size_t id : softmaxes) {
    const Node<T>& node = g.node(id);
    SoftmaxDiagnostics d;
    d.node = id;
    d.threshold = threshold;
    const Shape shape = node.shape();
    d.axis = *softmax_axis_of(node);
    d.n = shape[d.axis];
    d.in_backward = node.in_backward();
    d.row_shape = without_axis(shape, d.axis);
    if (groups_along(node)) d.group_axis = group_axis;
    const T *grad_in = nullptr, *grad_out = nullptr;
    if (vjp_of[id] != 0) {
      d.vjp_node = vjp_of[id];
      const Node<T>& vjp_node = g.node(vjp_of[id]);
      grad_in = vjp_node.value().data();
      grad_out = g.node(vjp_node.inputs[1].node).value(vjp_node.inputs[1].output).data();
    }
    const T* p = node.value().data();
    const detail::Rows rows = detail::rows_along(shape, d.axis);
    summarize(d, rows, per_row, d.vjp_node.has_value(), [&](std::size_t offset, std::size_t stride) {
      SoftmaxRow r = row_stats(p + offset, rows.n, stride, threshold);
      if (d.vjp_node && !r.masked) r.gradient_gain = row_gain(grad_in, grad_out, offset, rows.n, stride);
      return r;
    });
    f(d);
  }
}

template <class T>
std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<T>& g, double threshold, bool per_row,
                                                    std::optional<std::size_t> group_axis) {
  std::vector<SoftmaxDiagnostics> out;
  for_each_softmax_diagnostics(g, threshold, per_row, group_axis, [&](const SoftmaxDiagnostics& d) { out.push_back(d); });
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
  d.in_backward = g.node(weights.id()).in_backward();
  d.row_shape = without_axis(shape, d.axis);
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
    if (d.vjp_node && !r.masked) r.gradient_gain = row_gain(grad_in, grad_out, offset, rows.n, stride);
    return r;
  });
  return d;
}

namespace {

// A node's or a group's statistics as members of `j`.
void stats_json(Json& j, const SoftmaxStats& s) {
  j["rows"] = s.row_count;
  j["masked_rows"] = s.masked_rows;
  j["saturated_fraction"] = encode_number(s.saturated_fraction);
  j["max_weight"] = summary_json(s.max_weight);
  j["entropy"] = summary_json(s.entropy);
  j["normalized_entropy"] = summary_json(s.normalized_entropy);
  j["effective_support"] = summary_json(s.effective_support);
  j["jacobian_norm"] = summary_json(s.jacobian_norm);
  if (s.gradient_gain) {
    j["gradient_gain"] = summary_json(*s.gradient_gain);
    j["rows_without_gradient"] = s.rows_without_gradient;
  }
}

// One element of diagnostics_to_json's array.
Json node_diagnostics_json(const SoftmaxDiagnostics& d, bool rows) {
  Json j{{"node", d.node}, {"axis", d.axis}, {"n", d.n}, {"threshold", d.threshold}};
  if (d.in_backward) j["in_backward"] = true;
  j["row_shape"] = d.row_shape;
  stats_json(j, d);
  if (d.vjp_node) j["vjp_node"] = *d.vjp_node;
  if (d.group_axis) {
    j["group_axis"] = *d.group_axis;
    Json groups = Json::array();
    for (const SoftmaxGroup& group : d.groups) {
      Json gj{{"index", group.index}};
      stats_json(gj, group);
      groups.push_back(std::move(gj));
    }
    j["groups"] = std::move(groups);
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
    column("masked", [](const SoftmaxRow& r) { return Json(r.masked); });
    if (d.vjp_node) {
      column("gradient_gain", [](const SoftmaxRow& r) { return r.gradient_gain ? encode_number(*r.gradient_gain) : Json(); });
    }
    j["per_row"] = std::move(per_row);
  }
  return j;
}

}  // namespace

Json diagnostics_to_json(const std::vector<SoftmaxDiagnostics>& diagnostics, bool rows) {
  Json out = Json::array();
  for (const auto& d : diagnostics) out.push_back(node_diagnostics_json(d, rows));
  return out;
}

template std::size_t softmax_row_count(const Graph<float>&);
template std::size_t softmax_row_count(const Graph<double>&);
template SoftmaxDiagnostics attention_weights_diagnostics(const Var<float>&, const Var<float>&, double, bool);
template SoftmaxDiagnostics attention_weights_diagnostics(const Var<double>&, const Var<double>&, double, bool);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<float>&, double, bool, std::optional<std::size_t>);
template std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<double>&, double, bool, std::optional<std::size_t>);
template void for_each_softmax_diagnostics(const Graph<float>&, double, bool, std::optional<std::size_t>,
                                           const std::function<void(const SoftmaxDiagnostics&)>&);
template void for_each_softmax_diagnostics(const Graph<double>&, double, bool, std::optional<std::size_t>,
                                           const std::function<void(const SoftmaxDiagnostics&)>&);

}  // namespace xgrad
