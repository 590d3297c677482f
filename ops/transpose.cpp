// forward: y = swap of the last two axes of x      (..., m, n) -> (..., n, m)
// VJP:     grad_x = transpose(grad_out)             (..., n, m) -> (..., m, n)
// saves:   nothing.
#include <xgrad/ops/transpose.hpp>

#include <utility>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

class TransposeOp final : public OpFor<TransposeOp> {
 public:
  std::string name() const override { return "transpose"; }
  // ONNX: Transpose swapping the last two axes.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Transpose", {n.inputs[0]}, {{"perm", onnx_swap_last_two(n.input_shapes[0].size())}})};
  }
  std::size_t arity() const override { return 1; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0].size() < 2) throw error("needs rank >= 2, x is " + shape_str(x[0]));
    Shape y = x[0];
    std::swap(y[y.size() - 1], y[y.size() - 2]);
    return y;
  }

  // A lean replay's view: the last two axes (and their strides) swapped.
  std::optional<View> view_of(const View& x, const Shape& y) const override {
    View v = x;
    v.shape = y;
    std::swap(v.strides[v.strides.size() - 1], v.strides[v.strides.size() - 2]);
    return v;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& a = *x[0];
    const std::size_t m = a.shape()[a.dimension() - 2], n = a.shape().back();
    const std::size_t batch = m * n == 0 ? 0 : a.size() / (m * n);
    for (std::size_t b = 0; b < batch; ++b) transpose_matrix(a.data() + b * m * n, y.data() + b * m * n, m, n);
  }

  // dst (n x m) = src (m x n)^T; the two do not overlap (transpose never writes over its input).
  // By blocks of 8 x 8 of fixed size, a band of 8 output rows at a time: each block reads 8 rows
  // of 8 adjacent elements and writes 8 rows of 8, and with the bounds known at compile time GCC
  // turns the block into vector shuffles. This took a third of the time of 16 x 16 tiles with
  // run-time bounds (9 against 27 us for 512 x 64 doubles, 19 against 61 us for 1024 x 64).
  // Writing down output columns instead (8 rows m elements apart, the same cache set when m is a
  // power of 2) took 8x as long.
  template <class T>
  static void transpose_matrix(const T* __restrict src, T* __restrict dst, std::size_t m, std::size_t n) {
    constexpr std::size_t block = 8;
    const std::size_t m_full = m - m % block, n_full = n - n % block;
    for (std::size_t j0 = 0; j0 < n_full; j0 += block) {
      for (std::size_t i0 = 0; i0 < m_full; i0 += block) {
        for (std::size_t j = 0; j < block; ++j) {
          for (std::size_t i = 0; i < block; ++i) dst[(j0 + j) * m + i0 + i] = src[(i0 + i) * n + j0 + j];
        }
      }
    }
    // What the blocks leave: the last m % 8 columns of the first n_full output rows, and the
    // last n % 8 output rows whole.
    for (std::size_t j = 0; j < n; ++j) {
      for (std::size_t i = j < n_full ? m_full : 0; i < m; ++i) dst[j * m + i] = src[i * n + j];
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {transpose(v.grad_out)};
  }
};

}  // namespace

template <class T>
Var<T> transpose(const Var<T>& x) {
  return x.graph().apply(std::make_shared<TransposeOp>(), {x});
}

std::shared_ptr<const Op> make_transpose_op(const JsonCursor& attrs) { return from_no_attrs<TransposeOp>(attrs); }

template Var<float> transpose(const Var<float>&);
template Var<double> transpose(const Var<double>&);

}  // namespace xgrad
