// Softmax saturation diagnostics: how concentrated each softmax row is, and how much of the
// gradient survives the softmax on the way back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// One row p (length n) of a softmax output, along the softmax's axis.
struct SoftmaxRow {
  double max_weight = 0;          // max_i p_i
  double entropy = 0;             // H = -sum p_i log p_i, in nats (0 log 0 = 0)
  double normalized_entropy = 0;  // H / log n, in [0, 1]; 0 when n = 1
  double effective_support = 0;   // exp(H): 1 for a one-hot row, n for a uniform one
  // ||diag(p) - p p^T||_F, the Frobenius norm of the softmax Jacobian, in closed form:
  // sqrt(sum p^2 - 2 sum p^3 + (sum p^2)^2). 0 for a one-hot row, sqrt(n - 1) / n for a uniform one.
  double jacobian_norm = 0;
  bool saturated = false;         // max_weight >= the threshold
  // When backward has run: ||grad w.r.t. the softmax input|| / ||grad w.r.t. its output|| over
  // the row, read from the softmax_vjp node of this softmax. 0 when the output's gradient is 0.
  // A row with n = 1 has H = 0, a Jacobian of 0 and a gain of 0.
  std::optional<double> gradient_gain;
};

struct Summary {
  double min = 0, mean = 0, max = 0;
};

struct SoftmaxDiagnostics {
  std::size_t node = 0;                   // the softmax node
  std::optional<std::size_t> vjp_node;    // the softmax_vjp node its gains were read from
  std::size_t axis = 0, n = 0;            // the normalised axis and its length
  double threshold = 0;
  std::size_t row_count = 0;              // the rows of the output along the axis
  std::vector<SoftmaxRow> rows;           // with per_row: each row, in the order of the output's
                                          // other axes, row-major
  Summary max_weight, entropy, normalized_entropy, effective_support, jacobian_norm;
  std::optional<Summary> gradient_gain;
  double saturated_fraction = 0;          // of the rows
};

// The statistics of one row of softmax weights (no gain).
SoftmaxRow softmax_row_stats(const double* p, std::size_t n, std::size_t stride, double threshold);
SoftmaxRow softmax_row_stats(const float* p, std::size_t n, std::size_t stride, double threshold);

// The most rows whose per-row statistics softmax_diagnostics keeps, over all the softmax nodes
// of a graph: 2^22 (256 MiB of SoftmaxRow, about 600 MiB as JSON text). The summaries have no
// limit: they take no memory per row.
inline constexpr std::size_t max_diagnostic_rows = std::size_t(1) << 22;

// The rows of all the softmax nodes of the graph together, as softmax_diagnostics counts them
// (their values' element counts over their axes' lengths; nodes a lean graph released count 0).
template <class T>
std::size_t softmax_row_count(const Graph<T>& graph);

// Diagnostics of every softmax node of the graph, in node order, in one pass over each node's
// values (no copy of them). The gains come from the last softmax_vjp node whose first input is
// the softmax's output (grad() builds one per backward pass). With per_row, `rows` holds each
// row's statistics; without, it stays empty and only the summaries and row_count are filled.
// Throws xgrad::error unless 0 < threshold <= 1, and, with per_row, if the softmax nodes have
// more than max_diagnostic_rows rows in all (before keeping any).
template <class T>
std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<T>& graph, double threshold = 0.99,
                                                    bool per_row = true);

// The same statistics of any node of attention weights w >= 0 along the last axis, rows
// normalised first: p = w / sum(w) per row (a row of sum 0, every key masked, gives p = 0:
// entropy 0, max weight 0). For sigmoid attention (lib/variant_attention.hpp), whose rows need
// not sum to 1 and which softmax_diagnostics does not see: its weights and logits nodes
// (VariantAttentionNodes). For a softmax node it agrees with softmax_diagnostics to rounding.
// Every statistic is of p, as if p were a softmax row: jacobian_norm is that of a softmax with
// output p, not the sigmoid's own. The gain is the weights' own: ||grad w.r.t. logits|| /
// ||grad w.r.t. weights|| per row, read from the gradients grad() recorded (Output::grad_of):
// the last gradient of `logits`, and the last gradient of `weights` made before it; vjp_node is
// then the node of the logits' gradient. logits must have the weights' shape. Throws
// xgrad::error for an empty Var, Vars of different graphs or shapes, a weights node of rank 0 or
// an empty last axis, a threshold outside (0, 1], and, with per_row, rows beyond
// max_diagnostic_rows.
template <class T>
SoftmaxDiagnostics attention_weights_diagnostics(const Var<T>& weights, const Var<T>& logits, double threshold = 0.99,
                                                 bool per_row = true);

// As JSON: per node its summaries, saturated fraction and, if `rows`, the per-row arrays (of
// the rows the diagnostics kept).
Json diagnostics_to_json(const std::vector<SoftmaxDiagnostics>& diagnostics, bool rows);

}  // namespace xgrad
