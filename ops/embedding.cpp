// forward: y[i..., :] = table[ids[i...], :]                 (V, d), ids... -> (ids..., d)
// VJP:     grad_table = embedding_vjp(grad_out, ids, V)       (ids..., d) -> (V, d): scatter-add
//          embedding_vjp's: grad_grad_out = embedding(grad_y, ids)   (V, d) -> (ids..., d)
//          ids: no gradient (zeros for a Var of ids)
// saves:   nothing but the ids, an input (and V, embedding_vjp's attribute).
#include <xgrad/ops/embedding.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <type_traits>

#include <xtensor/xbuilder.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_rows = "rows";

// The largest integer below which float32 holds every integer: 2^24 (2^24 + 1 rounds to 2^24).
constexpr double float32_exact_ids = 16777216.0;

// An id as its message shows it: an integer as one, anything else with T's round-trip digits.
template <class T>
std::string id_str(T v) {
  char buf[48];
  if (std::isfinite(v) && v == std::floor(v) && std::abs(v) < 1e15) {
    std::snprintf(buf, sizeof buf, "%.0f", static_cast<double>(v));
  } else {
    std::snprintf(buf, sizeof buf, "%.*g", std::numeric_limits<T>::max_digits10, static_cast<double>(v));
  }
  return buf;
}

// The row of each id, in row-major order, after checking every id in that order (on the calling
// thread: the first bad id is the one named, whatever the thread count). ids is input 1 of x:
// an index leaf's int64 values or a T-valued array.
template <class T>
std::vector<std::size_t> checked_rows(const Args<T>& x, std::size_t rows) {
  const xt::xarray<std::int64_t>* index = x.indices.empty() ? nullptr : x.indices[1];
  const Shape shape = index ? shape_of(*index) : shape_of(*x[1]);
  const std::size_t n = shape_size(shape);
  std::vector<std::size_t> out(n);
  const auto out_of_range = [&](std::size_t i, const std::string& id) {
    throw error("id " + id + " at ids" + index_str(unravel_index(i, shape)) + " is out of range for a table of " + std::to_string(rows) +
                " rows");
  };
  for (std::size_t i = 0; i < n; ++i) {
    if (index) {
      const std::int64_t id = index->data()[i];
      if (id < 0) throw error("id " + std::to_string(id) + " at ids" + index_str(unravel_index(i, shape)) + " is negative");
      if (static_cast<std::uint64_t>(id) >= rows) out_of_range(i, std::to_string(id));
      out[i] = static_cast<std::size_t>(id);
      continue;
    }
    const T v = x[1]->data()[i];
    if (!std::isfinite(v) || v != std::floor(v)) throw error("id " + id_str(v) + " at ids" + index_str(unravel_index(i, shape)) + " is not an integer");
    if (v < 0) throw error("id " + id_str(v) + " at ids" + index_str(unravel_index(i, shape)) + " is negative");
    if (static_cast<double>(v) >= static_cast<double>(rows)) out_of_range(i, id_str(v));
    if (std::is_same_v<T, float> && static_cast<double>(v) >= float32_exact_ids) {
      throw error("id " + id_str(v) + " at ids" + index_str(unravel_index(i, shape)) +
                  " is 2^24 = 16777216 or more, where float32 no longer holds every integer: give such ids as an "
                  "index leaf (Graph::indices)");
    }
    out[i] = static_cast<std::size_t>(v);
  }
  return out;
}

// ONNX: input i of the node as int64 ids, an index leaf as it is, a Var of T through a Cast.
std::string onnx_ids(OnnxEmitter& e, const OnnxNode& n, std::size_t i) {
  if (n.index_inputs[i]) return n.inputs[i];
  return e.op("Cast", {n.inputs[i]}, {{"to", std::int64_t{7}}});  // 7: INT64
}

class EmbeddingOp final : public OpFor<EmbeddingOp> {
 public:
  std::string name() const override { return "embedding"; }
  // ONNX: Gather(table, ids) along axis 0, ids of T cast to int64 first.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Gather", {n.inputs[0], onnx_ids(e, n, 1)}, {{"axis", std::int64_t{0}}})};
  }
  std::size_t arity() const override { return 2; }
  bool accepts_indices(std::size_t i) const override { return i == 1; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0].size() != 2) throw error("table " + shape_str(x[0]) + " must be a matrix (V, d)");
    Shape y = x[1];
    y.push_back(x[0][1]);
    detail::check_elements(y, [&] {
      return "the output " + shape_str(y) + " (ids..., d) of table " + shape_str(x[0]) + " and ids " + shape_str(x[1]);
    });
    return y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const xt::xarray<T>& table = *x[0];
    const std::size_t d = table.shape()[1];
    const std::vector<std::size_t> rows = checked_rows(x, table.shape()[0]);
    const T* src = table.data();
    T* dst = y.data();
    detail::parallel_for(rows.size(), d + 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) std::copy(src + rows[i] * d, src + (rows[i] + 1) * d, dst + i * d);
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    const std::size_t rows = v.x[0].value().shape()[0];
    // No gradient for the ids: zeros for a Var of ids that asks for one.
    return {v.wanted[0] ? embedding_vjp(v.grad_out, v.x[1], rows) : Var<T>(), v.wanted[1] ? zeros_like(v.x[1]) : Var<T>()};
  }
};

class EmbeddingVjpOp final : public OpFor<EmbeddingVjpOp> {
 public:
  explicit EmbeddingVjpOp(std::size_t rows) : m_rows(rows) {}

  std::string name() const override { return "embedding_vjp"; }
  // ONNX: ScatterND(zeros (V, d), ids as (ids..., 1), grad_out, reduction add), which sums the
  // rows of repeated ids (in an order the engine chooses).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    const std::string zeros = e.op("Expand", {e.scalar(0), e.int64s(onnx_dims(n.output_shapes[0]))});
    const std::string ids = e.op("Unsqueeze", {onnx_ids(e, n, 1), e.int64s({-1})});
    return {e.op("ScatterND", {zeros, ids, n.inputs[0]}, {{"reduction", std::string("add")}})};
  }
  std::size_t arity() const override { return 2; }
  bool accepts_indices(std::size_t i) const override { return i == 1; }
  Json attrs() const override { return {{key_rows, m_rows}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const Shape& g = x[0];
    if (g.size() != x[1].size() + 1 || !std::equal(x[1].begin(), x[1].end(), g.begin())) {
      throw error("grad_out " + shape_str(g) + " must be (ids..., d) for ids " + shape_str(x[1]));
    }
    const Shape y = {m_rows, g.back()};
    detail::check_elements(y, [&] { return "the gradient " + shape_str(y) + " (V, d) of a table of " + std::to_string(m_rows) + " rows"; });
    return y;
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const std::vector<std::size_t> rows = checked_rows(x, m_rows);
    const std::size_t d = y.shape()[1];
    const T* g = x[0]->data();
    T* dst = y.data();
    std::fill(dst, dst + y.size(), T(0));
    // Each thread owns a range of columns and adds every position's contribution to them in
    // row-major order: each sum is taken in one order whatever the thread count.
    detail::parallel_for(d, rows.size() + 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = 0; i < rows.size(); ++i) {
        T* out = dst + rows[i] * d;
        const T* in = g + i * d;
        for (std::size_t c = begin; c < end; ++c) out[c] += in[c];
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {v.wanted[0] ? embedding(v.grad_out, v.x[1]) : Var<T>(), v.wanted[1] ? zeros_like(v.x[1]) : Var<T>()};
  }

 private:
  std::size_t m_rows;
};

}  // namespace

template <class T>
Var<T> embedding(const Var<T>& table, const Var<T>& ids) {
  return table.graph().apply(std::make_shared<EmbeddingOp>(), {table, ids});
}

template <class T>
Var<T> embedding_vjp(const Var<T>& grad_out, const Var<T>& ids, std::size_t rows) {
  return grad_out.graph().apply(std::make_shared<EmbeddingVjpOp>(rows), {grad_out, ids});
}

std::shared_ptr<const Op> make_embedding_op(const JsonCursor& attrs) { return from_no_attrs<EmbeddingOp>(attrs); }

std::shared_ptr<const Op> make_embedding_vjp_op(const JsonCursor& attrs) {
  attrs.check_object({key_rows});
  return std::make_shared<EmbeddingVjpOp>(attrs[key_rows].index());
}

template Var<float> embedding(const Var<float>&, const Var<float>&);
template Var<double> embedding(const Var<double>&, const Var<double>&);
template Var<float> embedding_vjp(const Var<float>&, const Var<float>&, std::size_t);
template Var<double> embedding_vjp(const Var<double>&, const Var<double>&, std::size_t);

}  // namespace xgrad
