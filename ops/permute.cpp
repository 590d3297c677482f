// forward: y[i_0, ..., i_n] = x[j] with j[axes[a]] = i_a       shape[axes[a]] -> axis a
// VJP:     grad_x = permute(grad_out, inverse(axes))
// saves:   the axes.
#include <xgrad/ops/permute.hpp>

#include <algorithm>

#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axes = "axes";

std::string axes_str(const std::vector<std::size_t>& axes) {
  std::string s = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? ", " : "") + std::to_string(axes[i]);
  return s + "]";
}

class PermuteOp final : public OpFor<PermuteOp> {
 public:
  explicit PermuteOp(std::vector<std::size_t> axes) : m_axes(std::move(axes)) {}

  std::string name() const override { return "permute"; }
  // ONNX: Transpose with perm = axes.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Transpose", {n.inputs[0]}, {{"perm", std::vector<std::int64_t>(m_axes.begin(), m_axes.end())}})};
  }
  std::size_t arity() const override { return 1; }
  Json attrs() const override { return {{key_axes, m_axes}}; }
  // A lean replay's view: axis i of y is axis axes[i] of x.
  std::optional<View> view_of(const View& x, const Shape& y) const override {
    View v{y, x.offset, std::vector<std::size_t>(m_axes.size())};
    for (std::size_t i = 0; i < m_axes.size(); ++i) v.strides[i] = x.strides[m_axes[i]];
    return v;
  }
  // Each output element also costs 4 visits (an odometer step over the axes: permuting (E/64, 8, 8) took 4.5 ns a visit here without it).
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override { return Op::work(x, y) + 4 * element_count(y[0]); }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    std::vector<bool> seen(x[0].size(), false);
    bool ok = m_axes.size() == x[0].size();
    for (std::size_t a : m_axes) {
      ok = ok && a < seen.size() && !seen[a];
      if (ok) seen[a] = true;
    }
    if (!ok) throw error("axes " + axes_str(m_axes) + " are not a permutation of the axes of x " + shape_str(x[0]));
    Shape y;
    for (std::size_t a : m_axes) y.push_back(x[0][a]);
    return y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& a = *x[0];
    std::size_t rank = m_axes.size();
    // Trailing axes that stay where they are make one contiguous run in x and in y (the head
    // split (B, T, H, d) -> (B, H, T, d) copies runs of d): copy runs, and walk the others.
    std::size_t run = 1;
    while (rank > 0 && m_axes[rank - 1] == rank - 1) run *= y.shape()[--rank];
    if (y.size() == 0) return;
    // x's row-major strides, read in y's axis order.
    std::vector<std::size_t> stride(m_axes.size(), 1), in_stride(rank);
    for (std::size_t i = m_axes.size(); i-- > 1;) stride[i - 1] = stride[i] * a.shape()[i];
    for (std::size_t i = 0; i < rank; ++i) in_stride[i] = stride[m_axes[i]];
    const T* src = a.data();
    T* dst = y.data();
    detail::parallel_for(y.size() / run, run + 4, [&](std::size_t begin, std::size_t end) {
      std::vector<std::size_t> index(rank, 0);
      std::size_t offset = 0;
      for (std::size_t i = rank, rest = begin; i-- > 0;) {  // the index of run `begin`, and its offset in x
        index[i] = rest % y.shape()[i];
        rest /= y.shape()[i];
        offset += index[i] * in_stride[i];
      }
      for (std::size_t r = begin; r < end; ++r) {
        std::copy_n(src + offset, run, dst + r * run);
        for (std::size_t i = rank; i-- > 0;) {  // the next run of y, in row-major order
          offset += in_stride[i];
          if (++index[i] < y.shape()[i]) break;
          offset -= in_stride[i] * index[i];
          index[i] = 0;
        }
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    std::vector<std::size_t> inverse(m_axes.size());
    for (std::size_t i = 0; i < m_axes.size(); ++i) inverse[m_axes[i]] = i;
    return {permute(v.grad_out, inverse)};
  }

 private:
  std::vector<std::size_t> m_axes;
};

}  // namespace

template <class T>
Var<T> permute(const Var<T>& x, const std::vector<std::size_t>& axes) {
  return x.graph().apply(std::make_shared<PermuteOp>(axes), {x});
}

std::shared_ptr<const Op> make_permute_op(const JsonCursor& attrs) {
  attrs.check_object({key_axes});
  const JsonCursor list = attrs[key_axes];
  std::vector<std::size_t> axes;
  for (std::size_t i = 0, n = list.array_size(); i < n; ++i) axes.push_back(list[i].index());
  return std::make_shared<PermuteOp>(axes);
}

template Var<float> permute(const Var<float>&, const std::vector<std::size_t>&);
template Var<double> permute(const Var<double>&, const std::vector<std::size_t>&);

}  // namespace xgrad
