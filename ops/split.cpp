// forward: y_k = x[..., o_k : o_k + n_k, ...] along axis, o_k = n_0 + ... + n_{k-1}   (..., sum n_k, ...) -> (..., n_k, ...) x K
// VJP:     grad_x = concat(grad_y_0, ..., grad_y_{K-1}) along axis, zeros (pad) for a grad_y_k none reaches
// saves:   the axis and the sizes.
#include <xgrad/ops/split.hpp>

#include <algorithm>
#include <limits>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/concat.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/pad.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axis = "axis";
constexpr const char* key_sizes = "sizes";

// The most outputs one split makes: as concat's inputs, far more than a model writes, few enough
// that a hostile file cannot make a node of millions of outputs.
constexpr std::size_t max_split_outputs = 65536;

std::string count_problem(std::size_t count) {
  return "takes 1 to " + std::to_string(max_split_outputs) + " sizes, got " + std::to_string(count);
}

std::string sizes_str(const std::vector<std::size_t>& sizes) {
  std::string s;
  for (std::size_t n : sizes) s += (s.empty() ? "" : ", ") + std::to_string(n);
  return "[" + s + "]";
}

// An op of as many outputs as it has sizes, a number known when it is made: it derives from Op
// itself (OpFor fixes the count at compile time) and routes both dtypes to its member templates.
class SplitOp final : public Op {
 public:
  SplitOp(std::vector<std::size_t> sizes, long axis) : m_sizes(std::move(sizes)), m_axis(axis) {
    if (m_sizes.empty() || m_sizes.size() > max_split_outputs) throw error("split: " + count_problem(m_sizes.size()));
  }

  std::string name() const override { return "split"; }
  std::size_t arity() const override { return 1; }
  std::size_t output_count() const override { return m_sizes.size(); }
  Json attrs() const override { return {{key_axis, m_axis}, {key_sizes, m_sizes}}; }
  // ONNX: Split, the sizes as its second input (opset 13 on), the same axis.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    std::vector<std::int64_t> sizes(m_sizes.begin(), m_sizes.end());
    return e.emit("Split", {n.inputs[0], e.int64s(sizes)}, {{"axis", onnx_axis(m_axis, n.input_shapes[0].size())}},
                  m_sizes.size());
  }

  std::vector<Shape> infer_shapes(const std::vector<Shape>& x) const override {
    const Shape& s = x[0];
    if (s.empty()) throw error("x must have rank >= 1 to be split: x is " + shape_str(s));
    const std::size_t a = detail::normalize_axis(m_axis, s);
    std::size_t total = 0;
    bool overflow = false;
    for (std::size_t n : m_sizes) {
      overflow = overflow || n > std::numeric_limits<std::size_t>::max() - total;
      if (!overflow) total += n;
    }
    if (overflow || total != s[a]) {
      const std::string sum = overflow ? "more than " + std::to_string(std::numeric_limits<std::size_t>::max()) : std::to_string(total);
      throw error("sizes " + sizes_str(m_sizes) + " sum to " + sum + ", not to the length " + std::to_string(s[a]) +
                  " of axis " + std::to_string(m_axis) + " of x " + shape_str(s));
    }
    std::vector<Shape> y(m_sizes.size(), s);
    for (std::size_t k = 0; k < m_sizes.size(); ++k) y[k][a] = m_sizes[k];
    return y;
  }

  void forward(const Args<float>& x, const Outs<float>& y) const override { run_forward(x, y); }
  void forward(const Args<double>& x, const Outs<double>& y) const override { run_forward(x, y); }
  using Op::forward;
  std::vector<Var<float>> vjp(const VjpArgs<float>& a) const override { return run_vjp(a); }
  std::vector<Var<double>> vjp(const VjpArgs<double>& a) const override { return run_vjp(a); }

 private:
  // Each outer block of x is the blocks of the outputs, one after another.
  template <class T>
  void run_forward(const Args<T>& x, const Outs<T>& y) const {
    const Shape xs = shape_of(*x[0]);
    const std::size_t a = detail::normalize_axis(m_axis, xs);
    const detail::Rows r = detail::rows_along(xs, a);
    const T* src = x[0]->data();
    for (std::size_t o = 0; o < r.outer; ++o) {
      for (std::size_t k = 0; k < m_sizes.size(); ++k) {
        const std::size_t block = m_sizes[k] * r.inner;
        std::copy(src, src + block, y[k]->data() + o * block);
        src += block;
      }
    }
  }

  // The gradients that reach outputs, each after the zeros of the outputs before it that none
  // reaches (pad), the last also before the zeros of those after it; one concat of them.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    if (!v.wanted[0]) return {Var<T>()};
    std::vector<Var<T>> parts;
    std::vector<std::size_t> zeros_before;
    std::size_t zeros = 0;
    for (std::size_t k = 0; k < m_sizes.size(); ++k) {
      if (!v.grad_outs[k].valid()) {
        zeros += m_sizes[k];
        continue;
      }
      parts.push_back(v.grad_outs[k]);
      zeros_before.push_back(zeros);
      zeros = 0;
    }
    if (parts.empty()) return {zeros_like(v.x[0])};
    for (std::size_t i = 0; i < parts.size(); ++i) {
      const std::size_t after = i + 1 == parts.size() ? zeros : 0;
      if (zeros_before[i] > 0 || after > 0) parts[i] = pad(parts[i], m_axis, zeros_before[i], after);
    }
    return {parts.size() == 1 ? parts[0] : concat(parts, m_axis)};
  }

  std::vector<std::size_t> m_sizes;
  long m_axis;
};

}  // namespace

template <class T>
std::vector<Var<T>> split(const Var<T>& x, const std::vector<std::size_t>& sizes, long axis) {
  return x.graph().apply_outputs(std::make_shared<SplitOp>(sizes, axis), {x});
}

std::vector<std::size_t> chunk_sizes(std::size_t length, std::size_t n) {
  if (length == 0) return std::vector<std::size_t>(n, 0);
  const std::size_t part = (length + n - 1) / n, parts = (length + part - 1) / part;
  std::vector<std::size_t> sizes(parts, part);
  sizes.back() = length - part * (parts - 1);
  return sizes;
}

template <class T>
std::vector<Var<T>> chunk(const Var<T>& x, std::size_t n, long axis) {
  if (n == 0 || n > max_split_outputs) {
    throw error("chunk: n must be from 1 to " + std::to_string(max_split_outputs) + ", got " + std::to_string(n));
  }
  const Shape s = x.shape();
  const long rank = static_cast<long>(s.size());
  if (s.empty()) throw error("chunk: x must have rank >= 1 to be split: x is " + shape_str(s));
  if (axis < -rank || axis >= rank) {
    throw error("chunk: axis " + std::to_string(axis) + " is out of range for a " + shape_str(s) + " input");
  }
  return split(x, chunk_sizes(s[detail::normalize_axis(axis, s)], n), axis);
}

std::shared_ptr<const Op> make_split_op(const JsonCursor& attrs) {
  attrs.check_object({key_axis, key_sizes});
  const JsonCursor c = attrs[key_sizes];
  const std::size_t count = c.array_size();
  if (count == 0 || count > max_split_outputs) c.fail("split " + count_problem(count));
  std::vector<std::size_t> sizes;
  sizes.reserve(count);
  for (std::size_t k = 0; k < count; ++k) sizes.push_back(c[k].index());
  return std::make_shared<SplitOp>(std::move(sizes), attrs[key_axis].integer());
}

template std::vector<Var<float>> split(const Var<float>&, const std::vector<std::size_t>&, long);
template std::vector<Var<double>> split(const Var<double>&, const std::vector<std::size_t>&, long);
template std::vector<Var<float>> chunk(const Var<float>&, std::size_t, long);
template std::vector<Var<double>> chunk(const Var<double>&, std::size_t, long);

}  // namespace xgrad
