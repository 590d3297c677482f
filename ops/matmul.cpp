// forward: y = op(a) @ op(b)                  (..., m, k) x (..., k, n) -> (..., m, n), batch axes broadcast
// VJP:     grad_a = grad_out @ op(b)^T        (..., m, n) x (..., n, k) -> (..., m, k)
//          grad_b = op(a)^T @ grad_out        (..., k, m) x (..., m, n) -> (..., k, n)
//          (with transpose_a, grad_a is the transpose of the above: op(b) @ grad_out^T; same for b)
//          each summed over the batch axes its operand was broadcast along
// saves:   nothing beyond its inputs a and b.
//
// linear: y = x w + b                        (..., k) x (k, n) + (n) -> (..., n)
//          b's rows are written into y, then one GEMM adds x w to them (beta = 1).
// VJP:     grad_x = grad_out @ w^T, grad_w = x^T @ grad_out over all rows, grad_b = sum_to(grad_out, (n)).
#include <xgrad/ops/matmul.hpp>

#include <algorithm>
#include <climits>

#include <xgrad/graph/json.hpp>
#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/gemm.hpp>
#include <xgrad/ops/kernels/parallel.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/reshape.hpp>
#include <xgrad/ops/sum_to.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_transpose_a = "transpose_a";
constexpr const char* key_transpose_b = "transpose_b";

// Products of fewer multiply-adds than this run on the calling thread: about 50 us of work, well
// above the cost of waking a worker.
constexpr std::size_t min_split_work = std::size_t(1) << 21;

// Runs block(i0, i1, r0, r1), the products of batch indices [i0, i1) and rows [r0, r1) of y
// (m rows of n, inner size k), on the calling thread or split over xgrad's pool. With more than
// one thread the pool splits the product, by batch index or else by rows of y in multiples of
// 16, and each part runs on one OpenBLAS thread: OpenBLAS's own threads scale worse here, and
// would spin beside the pool's. A product of too few rows is left to OpenBLAS. Either way the
// last bits may depend on the thread count.
template <class F>
void split_products(std::size_t batch, std::size_t m, std::size_t n, std::size_t k, const F& block) {
  const std::size_t threads = detail::parallel_threads(), units = (m + 15) / 16;
  if (threads <= 1 || batch * m * n * k < min_split_work || (batch < threads && units < threads)) {
    block(0, batch, 0, m);
  } else if (batch >= threads) {
    detail::parallel_blas_chunks(batch, threads, [&](std::size_t, std::size_t i0, std::size_t i1) { block(i0, i1, 0, m); });
  } else {
    for (std::size_t i = 0; i < batch; ++i) {
      detail::parallel_blas_chunks(units, threads, [&](std::size_t, std::size_t u0, std::size_t u1) {
        block(i, i + 1, u0 * 16, std::min(u1 * 16, m));
      });
    }
  }
}

// a^T g over all rows of a (..., k) and g (..., n): the gradient of a weight (k, n) that
// multiplied every row of a, one product (k, rows) x (rows, n) rather than one per batch index;
// with `transposed`, g^T a, that of a weight (n, k) read transposed.
template <class T>
Var<T> rows_product(const Var<T>& a, const Var<T>& g, bool transposed) {
  const Shape as = a.shape();
  Var<T> a2 = a, g2 = g;
  if (as.size() > 2) {
    const std::size_t rows = shape_size(Shape(as.begin(), as.end() - 1));
    a2 = reshape(a, {rows, as.back()});  // a's reshape first, then g's: node ids
    g2 = reshape(g, {rows, g.shape().back()});
  }
  return transposed ? matmul(g2, a2, true, false) : matmul(a2, g2, true, false);
}

class MatmulOp final : public OpFor<MatmulOp> {
 public:
  MatmulOp(bool transpose_a, bool transpose_b) : m_ta(transpose_a), m_tb(transpose_b) {}

  std::string name() const override { return "matmul"; }
  // ONNX: MatMul (numpy's batch broadcasting), each flagged operand through a Transpose first.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const auto operand = [&](std::size_t i, bool transposed) {
      if (!transposed) return n.inputs[i];
      return e.op("Transpose", {n.inputs[i]}, {{"perm", onnx_swap_last_two(n.input_shapes[i].size())}});
    };
    return {e.op("MatMul", {operand(0, m_ta), operand(1, m_tb)})};
  }
  std::size_t arity() const override { return 2; }
  Json attrs() const override {
    return {{key_transpose_a, m_ta}, {key_transpose_b, m_tb}};
  }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const Shape& a = x[0];
    const Shape& b = x[1];
    const auto both = [&] { return "a is " + shape_str(a) + ", b is " + shape_str(b) + flags(); };
    if (a.size() < 2 || b.size() < 2) throw error("needs rank >= 2 operands: " + both());
    const std::optional<Shape> batch = detail::broadcast_shapes(batch_of(a), batch_of(b));
    if (!batch) {
      throw error("batch axes " + shape_str(batch_of(a)) + " and " + shape_str(batch_of(b)) +
                  " do not broadcast together: " + both());
    }
    const Dims d = dims(a, b);
    if (d.k != d.k_b) throw error("inner sizes differ: " + both());
    for (std::size_t v : {d.m, d.n, d.k}) {
      if (v > static_cast<std::size_t>(INT_MAX)) throw error("a matrix axis exceeds INT_MAX: " + both());
    }
    Shape y = *batch;
    y.push_back(d.m);
    y.push_back(d.n);
    detail::check_elements(y, [&] { return "the product " + shape_str(y) + " of a " + shape_str(a) + " and b " + shape_str(b); });
    // (The merged rows of one GEMM, below, fit int: they are rows of y, within 2^28 elements.)
    return y;
  }

  // The elements read and written, one multiply-add per element of y and of the inner axis, and
  // 16 visits per product of the batch (a GEMM call: a batch of 1 x 1 products took 6.4 ns a
  // visit here without it, 0.3 ns for large products).
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    const Dims d = dims(x[0], x[1]);
    const double products = d.m && d.n ? element_count(y[0]) / static_cast<double>(d.m * d.n) : 0.0;
    return Op::work(x, y) + multiply_add_work(element_count(y[0]) * static_cast<double>(d.k)) + 16 * products;
  }

  // A lean replay's views (Op::view_of): an operand whose matrices have columns of stride 1 (a
  // head split by permute, a reshape) is read in place, the rows' stride as BLAS's leading
  // dimension; its batch axes may have any strides. Not a transposed one (rows of stride 1):
  // reading it through the other transpose flag would change OpenBLAS's bits, and a lean
  // replay's values are a full replay's bits.
  bool reads_view(std::size_t i, const View& v) const override {
    const std::size_t rank = v.shape.size();
    if (i > 1 || rank < 2) return false;
    return (v.shape[rank - 1] <= 1 || v.strides[rank - 1] == 1) && v.strides[rank - 2] <= static_cast<std::size_t>(INT_MAX);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const View va = x.view(0) ? *x.view(0) : View::contiguous(shape_of(*x[0]));
    const View vb = x.view(1) ? *x.view(1) : View::contiguous(shape_of(*x[1]));
    const Shape &as = va.shape, &bs = vb.shape;
    Dims d = dims(as, bs);
    // The product of each batch index of y reads a and b at these offsets: a batch axis of 1 or
    // missing stretches with stride 0, so a broadcast operand is read in place, never copied.
    // A b without batch (a weight (k, n) or (1, k, n)) under an untransposed a is one GEMM of
    // all of a's rows: (B*T, k) x (k, n).
    const Shape batch(y.shape().begin(), y.shape().end() - 2);
    Operand<T> a = operand(*x[0], va, batch, m_ta), b = operand(*x[1], vb, batch, m_tb);
    const auto in_order = [&](std::size_t i) { return !x.view(i) || x.view(i)->is_contiguous(); };
    if (merges_rows(as, bs) && in_order(0) && in_order(1)) {
      d.m = shape_size(Shape(as.begin(), as.end() - 1));
      a.offsets = b.offsets = {0};
    }
    // The products of batch indices [i0, i1), rows [r0, r1) of y.
    const auto block = [&](std::size_t i0, std::size_t i1, std::size_t r0, std::size_t r1) {
      for (std::size_t i = i0; i < i1; ++i) {
        const T* ai = a.data + a.offsets[i] + (a.trans ? r0 : r0 * a.ld);
        detail::gemm(a.trans, b.trans, r1 - r0, d.n, d.k, T(1), ai, a.ld, b.data + b.offsets[i], b.ld, T(0),
                     y.data() + i * d.m * d.n + r0 * d.n, d.n);
      }
    };
    split_products(a.offsets.size(), d.m, d.n, d.k, block);
  }

  // Each gradient at the broadcast batch shape, summed back to its operand's (no node where
  // they agree). A weight b without batch under an untransposed a gets its gradient from one
  // product of a's and grad_out's merged rows, (k, B*T) x (B*T, n), not B products and a sum.
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& a = v.x[0];
    const Var<T>& b = v.x[1];
    const Var<T>& g = v.grad_out;
    Var<T> grad_a, grad_b;
    if (v.wanted[0]) {
      grad_a = sum_to_shape_of(m_ta ? matmul(b, g, m_tb, true) : matmul(g, b, false, !m_tb), a);
    }
    if (v.wanted[1]) {
      const Shape as = a.shape(), bs = b.shape();
      if (merges_rows(as, bs) && as.size() > 2) {
        const Var<T> product = rows_product(a, g, m_tb);
        grad_b = bs.size() == 2 ? product : reshape(product, bs);
      } else {
        grad_b = sum_to_shape_of(m_tb ? matmul(g, a, true, m_ta) : matmul(a, g, !m_ta, false), b);
      }
    }
    return {grad_a, grad_b};
  }

 private:
  static Shape batch_of(const Shape& s) { return Shape(s.begin(), s.end() - 2); }
  // True when b has no batch (all its batch axes 1) and a is read untransposed: a's rows then
  // form one matrix, y's rows likewise.
  bool merges_rows(const Shape& a, const Shape& b) const { return !m_ta && a.size() > 2 && shape_size(batch_of(b)) == 1; }
  // How BLAS reads an operand: the matrix of batch index i of y at data + offsets[i], row-major
  // with leading dimension ld, transposed when trans.
  template <class T>
  struct Operand {
    const T* data;
    std::vector<std::size_t> offsets;
    bool trans;
    std::size_t ld;
  };
  // The operand of op flag `flag` that array x holds as view v (columns of stride 1: row-major
  // matrices, ld the rows' stride), for y's batch axes `batch`: a batch axis of 1 or missing
  // stretches with stride 0.
  template <class T>
  static Operand<T> operand(const xt::xarray<T>& x, const View& v, const Shape& batch, bool flag) {
    const std::size_t rank = v.shape.size(), c = v.shape[rank - 1], rs = v.strides[rank - 2];
    Operand<T> o{x.data() + v.offset, {}, flag, std::max({rs, c, std::size_t(1)})};
    const std::size_t own = rank - 2, lead = batch.size() - own, count = shape_size(batch);
    std::vector<std::size_t> stride(batch.size(), 0);
    for (std::size_t i = 0; i < own; ++i) stride[lead + i] = v.shape[i] == 1 ? 0 : v.strides[i];
    o.offsets.resize(count);
    std::vector<std::size_t> index(batch.size(), 0);
    for (std::size_t f = 0, off = 0; f < count; ++f) {
      o.offsets[f] = off;
      for (std::size_t i = batch.size(); i-- > 0;) {  // the next index, row-major
        off += stride[i];
        if (++index[i] < batch[i]) break;
        off -= stride[i] * batch[i];
        index[i] = 0;
      }
    }
    return o;
  }
  struct Dims {
    std::size_t m, k, k_b, n;
  };
  Dims dims(const Shape& a, const Shape& b) const {
    const std::size_t ar = a[a.size() - 2], ac = a.back(), br = b[b.size() - 2], bc = b.back();
    return m_ta ? (m_tb ? Dims{ac, ar, bc, br} : Dims{ac, ar, br, bc})
                : (m_tb ? Dims{ar, ac, bc, br} : Dims{ar, ac, br, bc});
  }
  std::string flags() const {
    if (!m_ta && !m_tb) return "";
    return std::string(" (") + (m_ta ? "a" : "") + (m_ta && m_tb ? " and " : "") + (m_tb ? "b" : "") +
           " transposed)";
  }

  bool m_ta, m_tb;
};

class LinearOp final : public OpFor<LinearOp> {
 public:
  std::string name() const override { return "linear"; }
  // ONNX: MatMul then Add (Gemm takes 2-D operands only).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Add", {e.op("MatMul", {n.inputs[0], n.inputs[1]}), n.inputs[2]})};
  }
  std::size_t arity() const override { return 3; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const Shape &xs = x[0], &ws = x[1], &bs = x[2];
    const auto all = [&] { return "x is " + shape_str(xs) + ", w " + shape_str(ws) + ", b " + shape_str(bs); };
    if (xs.size() < 2) throw error("x must be (..., k) of rank >= 2: " + all());
    if (ws.size() != 2) throw error("w must be a matrix (k, n): " + all());
    if (xs.back() != ws[0]) throw error("x's last axis and w's first differ: " + all());
    if (bs.size() != 1 || bs[0] != ws[1]) throw error("b must be (n) = (" + std::to_string(ws[1]) + "): " + all());
    for (std::size_t v : {ws[0], ws[1]}) {
      if (v > static_cast<std::size_t>(INT_MAX)) throw error("a matrix axis exceeds INT_MAX: " + all());
    }
    Shape y = xs;
    y.back() = ws[1];
    detail::check_elements(y, [&] { return "the product " + shape_str(y) + " of x " + shape_str(xs) + " and w " + shape_str(ws); });
    return y;
  }
  // matmul's work (a product of all rows, one GEMM) and a write of b into each row.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + element_count(y[0]) + multiply_add_work(element_count(y[0]) * static_cast<double>(x[1][0]));
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* in = x[0]->data();
    const T* w = x[1]->data();
    const T* b = x[2]->data();
    const std::size_t k = x[1]->shape()[0], n = x[1]->shape()[1], rows = n ? y.size() / n : 0;
    // Rows [r0, r1): b into each, then x w added to them by the GEMM (beta = 1): no pass over y
    // after the product.
    split_products(1, rows, n, k, [&](std::size_t, std::size_t, std::size_t r0, std::size_t r1) {
      for (std::size_t r = r0; r < r1; ++r) std::copy(b, b + n, y.data() + r * n);
      detail::gemm(false, false, r1 - r0, n, k, T(1), in + r0 * k, k, w, n, T(1), y.data() + r0 * n, n);
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const Var<T>& g = v.grad_out;
    Var<T> grad_x, grad_w, grad_b;
    if (v.wanted[0]) grad_x = matmul(g, v.x[1], false, true);
    if (v.wanted[1]) grad_w = rows_product(v.x[0], g, false);
    if (v.wanted[2]) grad_b = sum_to_shape_of(g, v.x[2]);
    return {grad_x, grad_w, grad_b};
  }
};

}  // namespace

template <class T>
Var<T> matmul(const Var<T>& a, const Var<T>& b, bool transpose_a, bool transpose_b) {
  return a.graph().apply(std::make_shared<MatmulOp>(transpose_a, transpose_b), {a, b});
}

std::shared_ptr<const Op> make_matmul_op(const JsonCursor& attrs) {
  attrs.check_object({key_transpose_a, key_transpose_b});
  return std::make_shared<MatmulOp>(attrs[key_transpose_a].boolean(), attrs[key_transpose_b].boolean());
}

template <class T>
Var<T> linear(const Var<T>& x, const Var<T>& w, const Var<T>& b) {
  return x.graph().apply(std::make_shared<LinearOp>(), {x, w, b});
}

std::shared_ptr<const Op> make_linear_op(const JsonCursor& attrs) { return from_no_attrs<LinearOp>(attrs); }

template Var<float> matmul(const Var<float>&, const Var<float>&, bool, bool);
template Var<double> matmul(const Var<double>&, const Var<double>&, bool, bool);
template Var<float> linear(const Var<float>&, const Var<float>&, const Var<float>&);
template Var<double> linear(const Var<double>&, const Var<double>&, const Var<double>&);

}  // namespace xgrad
