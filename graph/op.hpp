// The Op interface: what graph/ knows about an operation. Ops live in ops/, one file pair each.
#pragma once

#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>

#include <xgrad/graph/error.hpp>
#include <xgrad/graph/onnx.hpp>
#include <xgrad/graph/shape.hpp>

namespace xgrad {

template <class T>
class Var;

// The most elements xgrad accepts in an array read from a file, and in all the nodes of an
// imported graph together: 2^28 (2 GiB of float64). An axis of length 0 counts as 1 here, so an
// empty array cannot carry an absurd axis either.
inline constexpr std::size_t max_array_elements = std::size_t(1) << 28;

// The most work an import runs (see Op::work): 2^32 element visits, typically 1-3 s on one core
// here and at most about 8 s (bench/work_bench.cpp measures every op: 0.1-1.8 ns a visit,
// float64, AMD EPYC).
inline constexpr double max_import_work = 4294967296.0;

// A running total of work (Op::work, in element visits) against a limit: what an import may
// compute. The graph import charges every node before it builds any; the ONNX import charges each
// node before its forward runs (Graph::limit_work) and what it computes at import itself.
class WorkBudget {
 public:
  // `raise` says how to raise the limit, for the message ("give ImportOptions::max_work").
  WorkBudget(double limit, std::string raise) : m_limit(limit), m_raise(std::move(raise)) {}
  // Adds `work` (the cost of `what`: an op's name); false, adding nothing, if the total would
  // pass the limit (or the work is not a number).
  bool add(double work) {
    if (!(m_used + work <= m_limit)) return false;
    m_used += work;
    return true;
  }
  // Why add(work) refused, naming the limit, the total, the op and how to raise the limit.
  std::string refusal(const std::string& what, double work) const {
    char text[400];
    std::snprintf(text, sizeof text,
                  "computing the graph takes more than %.0f element visits (Op::work), the most this import runs: "
                  "%.0f in all, this %s %.0f",
                  m_limit, m_used + work, what.c_str(), work);
    return text + (m_raise.empty() ? std::string() : "; " + m_raise);
  }
  double used() const { return m_used; }
  double limit() const { return m_limit; }

 private:
  double m_limit;
  double m_used = 0;
  std::string m_raise;
};

// The element count of `shape` with axes of length 0 counted as 1, if it is at most `limit`;
// nullopt otherwise. Never overflows.
inline std::optional<std::size_t> bounded_size(const Shape& shape, std::size_t limit = max_array_elements) {
  std::size_t count = 1;
  for (std::size_t d : shape) {
    const std::size_t f = d == 0 ? 1 : d;
    if (count > limit / f) return std::nullopt;
    count *= f;
  }
  return count;
}

// JSON as xgrad reads and writes it: keys keep the order they were written in.
using Json = nlohmann::ordered_json;

// One output of one node: node `node`'s output `output` (0 for the many ops with one output).
struct Slot {
  std::size_t node = 0;
  std::size_t output = 0;
  friend bool operator==(const Slot& a, const Slot& b) { return a.node == b.node && a.output == b.output; }
  friend bool operator!=(const Slot& a, const Slot& b) { return !(a == b); }
};

// A strided view of an array's elements, as a lean replay hands it to an op that reads views
// (Op::view_of, Op::reads_view): element (i_0, ..., i_{r-1}) of the view, of this shape, is
// data[offset + i_0 strides[0] + ... + i_{r-1} strides[r-1]] of the array viewed.
struct View {
  Shape shape;
  std::size_t offset = 0;
  std::vector<std::size_t> strides;
  // The row-major array of this shape itself (strides of the axes after each).
  static View contiguous(const Shape& shape) {
    View v{shape, 0, std::vector<std::size_t>(shape.size())};
    std::size_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      v.strides[i] = stride;
      stride *= shape[i];
    }
    return v;
  }
  // Laid out as the row-major array of its shape (axes of length 1 may have any stride).
  bool is_contiguous() const {
    std::size_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
      if (shape[i] != 1 && strides[i] != stride) return false;
      stride *= shape[i];
    }
    return true;
  }
};

// The values of a node's inputs, in order. An input that is an index leaf (Graph::indices) is a
// null pointer here and its int64 array is indices[i]; indices is empty when no input is one.
// Only an op that accepts indices at i (Op::accepts_indices) ever sees one.
// step and training are the graph's run state (Graph::set_step, Graph::set_training), for ops
// whose forward depends on it (dropout); default-constructed Args, as for a direct op call,
// mean step 0 in training mode.
// views: empty unless an input is a view (a lean replay's, only for an op whose reads_view
// accepted it); then views[i], when not null, is how to read input i: x[i] is the array it views,
// and views[i]->shape, not x[i]'s, is input i's shape.
template <class T>
struct Args : std::vector<const xt::xarray<T>*> {
  using std::vector<const xt::xarray<T>*>::vector;
  std::vector<const xt::xarray<std::int64_t>*> indices;
  std::vector<const View*> views;
  const View* view(std::size_t i) const { return i < views.size() ? views[i] : nullptr; }
  std::uint64_t step = 0;
  bool training = true;
};

// Where a forward writes: one array per output, each already of the shape infer_shapes gave.
template <class T>
using Outs = std::vector<xt::xarray<T>*>;

// What a VJP rule may read: the node's inputs x, its outputs ys, the gradients grad_outs of the
// loss w.r.t. each output (an empty Var where none flows), and which inputs need a gradient
// (wanted[i] false: return an empty Var for input i). y and grad_out are ys[0] and
// grad_outs[0], all that an op with one output reads.
template <class T>
struct VjpArgs {
  const std::vector<Var<T>>& x;
  const std::vector<Var<T>>& ys;
  const std::vector<Var<T>>& grad_outs;
  const std::vector<bool>& wanted;
  const Var<T>& y = ys[0];
  const Var<T>& grad_out = grad_outs[0];
};

// An operation: a pure function of its inputs and typed attributes. One Op object serves float
// and double graphs alike (the float32 -> float64 replay of gradcheck shares it). Most ops have
// one output and derive from OpFor<Derived> below; an op with several derives from
// OpFor<Derived, N> and writes infer_shapes.
class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;  // lowercase, as in the file name and the JSON "op"
  virtual std::size_t arity() const = 0;
  virtual std::size_t output_count() const { return 1; }
  // The shape of each output for these input shapes; throws xgrad::error naming the shapes if
  // they are invalid. The graph prefixes the message with "<op> (node N): ". An op with one
  // output writes infer_shape instead.
  virtual std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const { return {infer_shape(x)}; }
  virtual Shape infer_shape(const std::vector<Shape>& x) const;
  // Writes each output into y[k], which already has the shape infer_shapes gave. May throw
  // xgrad::error for input values it rejects (an id out of range), naming the position and the
  // value; the graph prefixes it as a shape error ("<op> (node N): "). Code it runs on the
  // thread pool may throw too (detail::parallel_for hands the first throw to the caller).
  virtual void forward(const Args<float>& x, const Outs<float>& y) const = 0;
  virtual void forward(const Args<double>& x, const Outs<double>& y) const = 0;
  // forward for an op with one output, for callers outside the graph (tests, benchmarks).
  template <class T>
  void forward(const Args<T>& x, xt::xarray<T>& y) const { forward(x, Outs<T>{&y}); }
  // Builds, as ordinary nodes of the same graph, one gradient per input (empty if not wanted).
  virtual std::vector<Var<float>> vjp(const VjpArgs<float>& a) const = 0;
  virtual std::vector<Var<double>> vjp(const VjpArgs<double>& a) const = 0;
  // True if input i may be an index leaf (int64 values, Graph::indices); such an input is never
  // differentiated. The graph refuses index inputs anywhere else.
  virtual bool accepts_indices(std::size_t i) const {
    (void)i;
    return false;
  }
  // True if forward(x, y) is also right when y is the very array x[i] (the same elements, in y's
  // shape): the op reads each element of its inputs, or a whole row of them, before it writes
  // the output there (reshape then copies nothing). Lean replays (Graph::keep_only) then write
  // the output over input i, when it has as many elements and nothing reads it later. Only ops
  // with one output are asked. An op that returns true is added to the aliasing test
  // (lean/ops_that_overwrite_inputs_give_the_same_bits); the property test fails otherwise.
  virtual bool overwrites_input(std::size_t i) const {
    (void)i;
    return false;
  }
  // Views, for lean replays (Graph::keep_only): an op of one input whose output only rearranges
  // that input's elements (permute, transpose, a reshape) returns its output of shape y as a view
  // of what x views, or nullopt where no strides describe it (a reshape of a permuted view). A
  // lean replay then runs no forward for such a node when every node that reads it takes the
  // view (reads_view) or is such a node itself: the copy is left out, and materialised only where
  // a reader needs the elements in order (the op's own forward then runs, and its time shows in
  // the node profile).
  virtual std::optional<View> view_of(const View& x, const Shape& y) const {
    (void)x;
    (void)y;
    return std::nullopt;
  }
  // True if forward reads input i correctly through Args::views[i] = v (x[i] the array viewed).
  virtual bool reads_view(std::size_t i, const View& v) const {
    (void)i;
    (void)v;
    return false;
  }
  // Writes the op as ONNX nodes of the default domain through e (graph/onnx.hpp) and returns the
  // names of the values holding its outputs, one per output: its lowering, beside its forward and
  // VJP. The default refuses: it throws xgrad::error ("has no ONNX lowering"), which to_onnx
  // (lib/onnx_export.hpp) reports with the node.
  virtual std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const;
  // Typed attributes, for export; {} when the op has none. The op's factory reads them back.
  virtual Json attrs() const { return Json::object(); }
  // The cost of one forward on inputs of shapes x giving outputs of shapes y, in element
  // visits: an element read or written by a pass over memory. The default counts the elements
  // of the inputs and the outputs; an op whose forward does more per element says so (matmul
  // counts its multiply-adds, the fused attention the weights it computes tile by tile). An
  // import sums it over the nodes and refuses a graph above its work limit (max_import_work)
  // before it runs any node, so that a small file cannot make it compute without bound.
  virtual double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const {
    double count = 0;
    for (const auto& s : x) count += element_count(s);
    for (const auto& s : y) count += element_count(s);
    return count;
  }

  // A product's multiply-adds in element visits: OpenBLAS's GEMMs run about 8 in the time a pass
  // over memory reads or writes one element (one core, float64; see max_import_work).
  static double multiply_add_work(double multiply_adds) { return multiply_adds / 8; }
  // The elements of an array of this shape, as a double (no overflow).
  static double element_count(const Shape& shape) {
    double count = 1;
    for (std::size_t d : shape) count *= static_cast<double>(d);
    return count;
  }
};

inline std::vector<std::string> Op::to_onnx(OnnxEmitter&, const OnnxNode&) const {
  throw error("has no ONNX lowering (an op's to_onnx writes one, or says why there is none: docs/custom-ops.md)");
}

inline Shape Op::infer_shape(const std::vector<Shape>&) const {
  throw error("has " + std::to_string(output_count()) + " outputs: it writes infer_shapes, not infer_shape");
}

// Routes both dtypes to one pair of member templates of Derived. With one output (Outputs = 1):
//   template <class T> void run_forward(const Args<T>& x, xt::xarray<T>& y) const;
// with several:
//   template <class T> void run_forward(const Args<T>& x, const Outs<T>& y) const;
// and in both cases
//   template <class T> std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const;
template <class Derived, std::size_t Outputs = 1>
class OpFor : public Op {
 public:
  std::size_t output_count() const final { return Outputs; }
  void forward(const Args<float>& x, const Outs<float>& y) const final { run(x, y); }
  void forward(const Args<double>& x, const Outs<double>& y) const final { run(x, y); }
  using Op::forward;
  std::vector<Var<float>> vjp(const VjpArgs<float>& a) const final { return self().run_vjp(a); }
  std::vector<Var<double>> vjp(const VjpArgs<double>& a) const final { return self().run_vjp(a); }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
  template <class T>
  void run(const Args<T>& x, const Outs<T>& y) const {
    if constexpr (Outputs == 1) {
      self().run_forward(x, *y[0]);
    } else {
      self().run_forward(x, y);
    }
  }
};

}  // namespace xgrad
