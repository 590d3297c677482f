// forward: y = (x_0, x_1, ..., x_{k-1}) along axis       (..., n_i, ...) x k -> (..., sum n_i, ...)
// VJP:     grad_x_i = slice(grad_out, axis, o_i, o_i + n_i), o_i = n_0 + ... + n_{i-1}
// saves:   the axis and the count k.
#include <xgrad/ops/concat.hpp>

#include <algorithm>

#include <xgrad/graph/shape.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/registry.hpp>
#include <xgrad/ops/slice.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_axis = "axis";
constexpr const char* key_count = "count";

// The most inputs one concat takes: far more than a model writes, few enough that a hostile
// file cannot make an op of millions of inputs from two numbers.
constexpr std::size_t max_concat_inputs = 65536;

class ConcatOp final : public OpFor<ConcatOp> {
 public:
  ConcatOp(long axis, std::size_t count) : m_axis(axis), m_count(count) {
    if (count == 0 || count > max_concat_inputs) {
      throw error("concat: takes 1 to " + std::to_string(max_concat_inputs) + " inputs, got " + std::to_string(count));
    }
  }

  std::string name() const override { return "concat"; }
  // ONNX: Concat, the same axis.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Concat", n.inputs, {{"axis", onnx_axis(m_axis, n.input_shapes[0].size())}})};
  }
  std::size_t arity() const override { return m_count; }
  Json attrs() const override { return {{key_axis, m_axis}, {key_count, m_count}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    const auto all = [&] {
      std::string s;
      for (const Shape& xi : x) s += (s.empty() ? "" : ", ") + shape_str(xi);
      return s;
    };
    if (x[0].empty()) throw error("the inputs must have rank >= 1: they are " + all());
    const std::size_t a = detail::normalize_axis(m_axis, x[0]);
    Shape y = x[0];
    std::size_t total = 0;
    for (const Shape& xi : x) {
      bool fits = xi.size() == y.size();
      for (std::size_t k = 0; fits && k < xi.size(); ++k) fits = k == a || xi[k] == y[k];
      if (!fits) {
        throw error("the inputs must agree on every axis but axis " + std::to_string(m_axis) + ": they are " + all());
      }
      if (xi[a] > max_array_elements - std::min(total, max_array_elements)) total = max_array_elements + 1;
      else total += xi[a];
    }
    y[a] = total;
    if (total > max_array_elements || !bounded_size(y)) {
      throw error("joining " + all() + " along axis " + std::to_string(m_axis) + " makes more than " +
                  std::to_string(max_array_elements) + " elements");
    }
    return y;
  }

  // Each outer block of y is the blocks of the inputs, one after another.
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const Shape ys = shape_of(y);
    const std::size_t a = detail::normalize_axis(m_axis, ys);
    const detail::Rows r = detail::rows_along(ys, a);
    std::vector<std::size_t> block(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) block[i] = x[i]->shape()[a] * r.inner;
    T* dst = y.data();
    for (std::size_t o = 0; o < r.outer; ++o) {
      for (std::size_t i = 0; i < x.size(); ++i) {
        const T* src = x[i]->data() + o * block[i];
        dst = std::copy(src, src + block[i], dst);
      }
    }
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    std::vector<Var<T>> grads(v.x.size());
    std::size_t offset = 0;
    for (std::size_t i = 0; i < v.x.size(); ++i) {
      const Shape s = v.x[i].shape();
      const std::size_t n = s[detail::normalize_axis(m_axis, s)];
      if (v.wanted[i]) grads[i] = slice(v.grad_out, m_axis, offset, offset + n);
      offset += n;
    }
    return grads;
  }

 private:
  long m_axis;
  std::size_t m_count;
};

}  // namespace

template <class T>
Var<T> concat(const std::vector<Var<T>>& xs, long axis) {
  if (xs.empty()) throw error("concat: takes at least one input, got none");
  return xs[0].graph().apply(std::make_shared<ConcatOp>(axis, xs.size()), xs);
}

std::shared_ptr<const Op> make_concat_op(const JsonCursor& attrs) {
  attrs.check_object({key_axis, key_count});
  return std::make_shared<ConcatOp>(attrs[key_axis].integer(), attrs[key_count].index());
}

template Var<float> concat(const std::vector<Var<float>>&, long);
template Var<double> concat(const std::vector<Var<double>>&, long);

}  // namespace xgrad
