// Softmax saturation diagnostics: how concentrated each softmax row is, and how much of the
// gradient survives the softmax on the way back.
#pragma once

#include <functional>
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
  // Every key masked: a softmax of a row of only -inf is a row of zeros (ops/softmax.hpp), which
  // no softmax of finite scores gives. Masked rows are left out of every summary.
  bool masked = false;
  // When backward has run: ||grad w.r.t. the softmax input|| / ||grad w.r.t. its output|| over
  // the row, read from the softmax_vjp node of this softmax. Empty for a row whose incoming
  // gradient is exactly 0 (no loss reaches it: a padded query, say) and for a masked row, so
  // that neither counts as a saturated gain of 0. A row with n = 1 has H = 0, a Jacobian of 0
  // and a gain of 0.
  std::optional<double> gradient_gain;
};

struct Summary {
  double min = 0, mean = 0, max = 0;
};

// The statistics of a set of rows: a whole softmax node, or one group of it.
struct SoftmaxStats {
  std::size_t row_count = 0;              // the rows, masked ones included
  std::size_t masked_rows = 0;            // rows with every key masked (SoftmaxRow::masked)
  // Rows whose incoming gradient is exactly 0 (when backward has run), masked rows not counted.
  std::size_t rows_without_gradient = 0;
  // Over the rows that are not masked (all 0 when every row is).
  Summary max_weight, entropy, normalized_entropy, effective_support, jacobian_norm;
  // When backward has run: over the rows with a gradient (all 0 when no row has one).
  std::optional<Summary> gradient_gain;
  double saturated_fraction = 0;          // of the rows that are not masked
};

// The rows of one index along the group axis (softmax_diagnostics' group_axis).
struct SoftmaxGroup : SoftmaxStats {
  std::size_t index = 0;
};

struct SoftmaxDiagnostics : SoftmaxStats {
  std::size_t node = 0;                   // the softmax node
  std::optional<std::size_t> vjp_node;    // the softmax_vjp node its gains were read from
  std::size_t axis = 0, n = 0;            // the normalised axis and its length
  double threshold = 0;
  // Made by a VJP (Node::in_backward): the softmax inside log_softmax's backward pass, say, and
  // not a softmax of the model. `xgrad inspect` and the DOT shading leave these out by default.
  bool in_backward = false;
  // The output's shape without the softmax axis: one row per element of it, row-major (the last
  // axis fastest). For (B, H, T_q, T_k) scores along the last axis, (B, H, T_q), and row
  // (b * H + h) * T_q + t is query t of head h of batch b.
  Shape row_shape;
  std::vector<SoftmaxRow> rows;           // with per_row: each row, in row_shape's order
  // With a group axis that is one of this node's axes other than the softmax axis: that axis
  // (of the node's shape), and one group per index along it, in index order.
  std::optional<std::size_t> group_axis;
  std::vector<SoftmaxGroup> groups;
};

// The most saturated group of d (highest saturated fraction, then lowest mean normalised
// entropy, then lowest index); nullptr when d has no groups.
const SoftmaxGroup* worst_group(const SoftmaxDiagnostics& d);

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
// With group_axis K, each softmax node of which K is an axis other than the softmax axis also
// gets one SoftmaxGroup per index along K (for (B, H, T_q, T_k) scores K = 1 gives one per
// head); other nodes get none. Softmax nodes made by a VJP are in the list, marked in_backward.
// Throws xgrad::error unless 0 < threshold <= 1, if K is an axis other than the softmax axis of
// no softmax node (naming their shapes and axes), and, with per_row, if the softmax nodes have
// more than max_diagnostic_rows rows in all (before keeping any).
template <class T>
std::vector<SoftmaxDiagnostics> softmax_diagnostics(const Graph<T>& graph, double threshold = 0.99,
                                                    bool per_row = true,
                                                    std::optional<std::size_t> group_axis = std::nullopt);

// The same diagnostics given to `f` one softmax node at a time, in node order, each made when it
// is given and dropped after: what a graph's streamed export (write_json) holds of them is one
// node's. The same checks, all made before `f` is first called.
template <class T>
void for_each_softmax_diagnostics(const Graph<T>& graph, double threshold, bool per_row,
                                  std::optional<std::size_t> group_axis,
                                  const std::function<void(const SoftmaxDiagnostics&)>& f);

// The same statistics of any node of attention weights w >= 0 along the last axis, rows
// normalised first: p = w / sum(w) per row (a row of sum 0, every key masked, is a masked
// row). For sigmoid attention (lib/variant_attention.hpp), whose rows need not sum to 1 and
// which softmax_diagnostics does not see: its weights and logits nodes (VariantAttentionNodes).
// For a softmax node it agrees with softmax_diagnostics to rounding.
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

// As JSON (docs/saturation.md): per node its summaries, saturated fraction, row counts,
// "row_shape", "in_backward" when true, "group_axis" and "groups" when grouped and, if `rows`,
// the per-row arrays (of the rows the diagnostics kept; a gain of null for a row without one).
Json diagnostics_to_json(const std::vector<SoftmaxDiagnostics>& diagnostics, bool rows);

}  // namespace xgrad
