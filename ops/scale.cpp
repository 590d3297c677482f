// forward: y = alpha * x                  same shape
// VJP:     grad_x = alpha * grad_out      same shape
// saves:   alpha.
#include <xgrad/ops/scale.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>

namespace xgrad {

namespace {

// Attribute keys, for attrs() and the factory alike.
constexpr const char* key_alpha = "alpha";

class ScaleOp final : public OpFor<ScaleOp> {
 public:
  explicit ScaleOp(double alpha) : m_alpha(alpha) {}

  std::string name() const override { return "scale"; }
  // ONNX: Mul by alpha rounded to T, as the forward rounds it (OnnxEmitter::factor).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Mul", {n.inputs[0], e.factor(m_alpha, n.input_shapes[0])})};
  }
  std::size_t arity() const override { return 1; }
  bool overwrites_input(std::size_t) const override { return true; }
  Json attrs() const override { return {{key_alpha, m_alpha}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    const T alpha = static_cast<T>(m_alpha);
    detail::parallel_for(y.size(), 1, [&](std::size_t begin, std::size_t end) {
      detail::row_scale(src + begin, alpha, dst + begin, end - begin, 1);
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {scale(v.grad_out, m_alpha)};
  }

 private:
  double m_alpha;
};

}  // namespace

template <class T>
Var<T> scale(const Var<T>& x, double alpha) {
  return x.graph().apply(std::make_shared<ScaleOp>(alpha), {x});
}

std::shared_ptr<const Op> make_scale_op(const JsonCursor& attrs) {
  attrs.check_object({key_alpha});
  return std::make_shared<ScaleOp>(attrs[key_alpha].number());
}

template Var<float> scale(const Var<float>&, double);
template Var<double> scale(const Var<double>&, double);

}  // namespace xgrad
