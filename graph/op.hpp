// The Op interface: what graph/ knows about an operation. Ops live in ops/, one file pair each.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <xtensor/xarray.hpp>

namespace xgrad {

template <class T>
class Var;

using Shape = std::vector<std::size_t>;

// The most elements xgrad accepts in an array read from a file, and in all the nodes of an
// imported graph together: 2^28 (2 GiB of float64). An axis of length 0 counts as 1 here, so an
// empty array cannot carry an absurd axis either.
inline constexpr std::size_t max_array_elements = std::size_t(1) << 28;

// The most work an import runs (see Op::work): 2^32 element visits, typically 1-3 s on one core
// here and at most about 8 s (bench/work_bench.cpp measures every op: 0.1-1.8 ns a visit,
// float64, AMD EPYC).
inline constexpr double max_import_work = 4294967296.0;

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

// The values of a node's inputs, in order.
template <class T>
using Args = std::vector<const xt::xarray<T>*>;

// What a VJP rule may read: the node's inputs x, its output y, the gradient grad_out of the loss
// w.r.t. y, and which inputs need a gradient (wanted[i] false: return an empty Var for input i).
template <class T>
struct VjpArgs {
  const std::vector<Var<T>>& x;
  const Var<T>& y;
  const Var<T>& grad_out;
  const std::vector<bool>& wanted;
};

// An operation: a pure function of its inputs and typed attributes. One Op object serves float
// and double graphs alike (the float32 -> float64 replay of gradcheck shares it).
class Op {
 public:
  virtual ~Op() = default;
  virtual std::string name() const = 0;  // lowercase, as in the file name and the JSON "op"
  virtual std::size_t arity() const = 0;
  // The output shape for these input shapes; throws xgrad::error naming the shapes if they are
  // invalid. The graph prefixes the message with "<op> (node N): ".
  virtual Shape infer_shape(const std::vector<Shape>& x) const = 0;
  // Writes the output into y, which already has the shape infer_shape returned.
  virtual void forward(const Args<float>& x, xt::xarray<float>& y) const = 0;
  virtual void forward(const Args<double>& x, xt::xarray<double>& y) const = 0;
  // Builds, as ordinary nodes of the same graph, one gradient per input (empty if not wanted).
  virtual std::vector<Var<float>> vjp(const VjpArgs<float>& a) const = 0;
  virtual std::vector<Var<double>> vjp(const VjpArgs<double>& a) const = 0;
  // True if forward(x, y) is also right when y is the very array x[i] (same shape): the op reads
  // each element of its inputs, or a whole row of them, before it writes the output there.
  // Lean replays (Graph::keep_only) then write the output over input i when nothing reads that
  // input later. An op that returns true is added to the aliasing test
  // (lean/ops_that_overwrite_inputs_give_the_same_bits); the property test fails otherwise.
  virtual bool overwrites_input(std::size_t i) const {
    (void)i;
    return false;
  }
  // Typed attributes, for export; {} when the op has none. The op's factory reads them back.
  virtual Json attrs() const { return Json::object(); }
  // The cost of one forward on inputs of shapes x giving an output of shape y, in element
  // visits: an element read or written by a pass over memory. The default counts the elements
  // of the inputs and the output; an op whose forward does more per element says so (matmul
  // counts its multiply-adds, the fused attention the weights it computes tile by tile). An
  // import sums it over the nodes and refuses a graph above its work limit (max_import_work)
  // before it runs any node, so that a small file cannot make it compute without bound.
  virtual double work(const std::vector<Shape>& x, const Shape& y) const {
    double count = element_count(y);
    for (const auto& s : x) count += element_count(s);
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

// Routes both dtypes to one pair of member templates of Derived:
//   template <class T> void run_forward(const Args<T>& x, xt::xarray<T>& y) const;
//   template <class T> std::vector<Var<T>> run_vjp(const VjpArgs<T>& a) const;
template <class Derived>
class OpFor : public Op {
 public:
  void forward(const Args<float>& x, xt::xarray<float>& y) const final { self().run_forward(x, y); }
  void forward(const Args<double>& x, xt::xarray<double>& y) const final { self().run_forward(x, y); }
  std::vector<Var<float>> vjp(const VjpArgs<float>& a) const final { return self().run_vjp(a); }
  std::vector<Var<double>> vjp(const VjpArgs<double>& a) const final { return self().run_vjp(a); }

 private:
  const Derived& self() const { return static_cast<const Derived&>(*this); }
};

}  // namespace xgrad
