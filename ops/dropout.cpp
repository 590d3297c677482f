// forward: y = x * m, m = (bits(seed, step, i) < floor((1 - p) 2^32)) / (1 - p)    same shape
//          (training; in evaluation, or for p = 0, y = x)
// VJP:     grad_x = dropout(grad_out, p, seed) = grad_out * m (the same mask at the same step)
// saves:   p and seed; the mask is drawn again, never stored.
#include <xgrad/ops/dropout.hpp>

#include <algorithm>
#include <cmath>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/philox.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_p = "p";
constexpr const char* key_seed = "seed";

class DropoutOp final : public OpFor<DropoutOp> {
 public:
  DropoutOp(double p, std::uint64_t seed) : m_p(p), m_seed(seed) {}

  std::string name() const override { return "dropout"; }
  std::size_t arity() const override { return 1; }
  // Each element is read before its output is written, by the thread that writes it.
  bool overwrites_input(std::size_t) const override { return true; }
  Json attrs() const override { return {{key_p, m_p}, {key_seed, m_seed}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (!(m_p >= 0 && m_p <= 1)) throw error("p must be in [0, 1], got " + number_str(m_p));
    return x[0];
  }

  // Philox costs about 6 element visits an element (10 rounds for 4 elements), beyond the
  // default's reading of x and writing of y.
  double work(const std::vector<Shape>& x, const std::vector<Shape>& y) const override {
    return Op::work(x, y) + 6 * element_count(x[0]);
  }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    const std::size_t n = y.size();
    if (!x.training || m_p == 0) {
      if (dst != src) std::copy(src, src + n, dst);
      return;
    }
    const std::uint64_t threshold = this->threshold();
    const T kept = T(1) / static_cast<T>(1.0 - m_p);  // unused when p = 1: nothing is kept
    const std::uint64_t seed = m_seed, step = x.step;
    detail::parallel_for(n, 8, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end;) {
        // One Philox call gives the bits of the 4 elements of block i / 4.
        const detail::PhiloxCounter bits = detail::philox_block(seed, step, i / 4);
        for (std::size_t w = i % 4; w < 4 && i < end; ++w, ++i) dst[i] = src[i] * (bits[w] < threshold ? kept : T(0));
      }
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {dropout(v.grad_out, m_p, m_seed)};
  }

  // ONNX: Mul by the mask of the graph's step, drawn here as the forward draws it and stored as
  // an initializer of x's shape (ONNX has no counter-based generator to draw it again); Identity
  // in evaluation or for p = 0. The exported model drops the same elements at every run.
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    if (!n.training || m_p == 0) return {e.op("Identity", {n.inputs[0]})};
    const Shape& shape = n.input_shapes[0];
    const double kept = e.float32() ? double(1.0f / static_cast<float>(1.0 - m_p)) : 1.0 / (1.0 - m_p);
    const std::uint64_t threshold = this->threshold();
    std::vector<double> mask(shape_size(shape));
    for (std::size_t i = 0; i < mask.size(); ++i) {
      mask[i] = detail::philox_block(m_seed, n.step, i / 4)[i % 4] < threshold ? kept : 0.0;
    }
    return {e.op("Mul", {n.inputs[0], e.floats(mask, shape)})};
  }

 private:
  // An element is kept when its 32 random bits are below this: the same decision in float32 and
  // float64.
  std::uint64_t threshold() const { return static_cast<std::uint64_t>(std::floor(std::ldexp(1.0 - m_p, 32))); }

  double m_p;
  std::uint64_t m_seed;
};

}  // namespace

template <class T>
Var<T> dropout(const Var<T>& x, double p, std::uint64_t seed) {
  return x.graph().apply(std::make_shared<DropoutOp>(p, seed), {x});
}

std::shared_ptr<const Op> make_dropout_op(const JsonCursor& attrs) {
  attrs.check_object({key_p, key_seed});
  return std::make_shared<DropoutOp>(attrs[key_p].number(), attrs[key_seed].uint64());
}

template Var<float> dropout(const Var<float>&, double, std::uint64_t);
template Var<double> dropout(const Var<double>&, double, std::uint64_t);

}  // namespace xgrad
