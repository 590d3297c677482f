// forward: y = alpha * x                  same shape
// VJP:     grad_x = alpha * grad_out      same shape
// saves:   alpha.
#include <xgrad/ops/scale.hpp>

#include <xgrad/graph/json.hpp>
#include <xgrad/ops/kernels/common.hpp>
#include <xgrad/ops/kernels/row_kernels.hpp>
#include <xgrad/ops/op_forms.hpp>
#include <xgrad/ops/registry.hpp>

namespace xgrad {

namespace {

class ScaleOp final : public AttrOp<ScaleOp, double> {
 public:
  static constexpr const char* key = "alpha";
  using AttrOp::AttrOp;

  std::string name() const override { return "scale"; }
  // ONNX: Mul by alpha rounded to T, as the forward rounds it (OnnxEmitter::factor).
  std::vector<std::string> to_onnx(OnnxEmitter& e, const OnnxNode& n) const override {
    return {e.op("Mul", {n.inputs[0], e.factor(m_value, n.input_shapes[0])})};
  }
  bool overwrites_input(std::size_t) const override { return true; }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T* src = x[0]->data();
    T* dst = y.data();
    const T alpha = static_cast<T>(m_value);
    detail::parallel_for(y.size(), 1, [&](std::size_t begin, std::size_t end) {
      detail::row_scale(src + begin, alpha, dst + begin, end - begin, 1);
    });
  }

  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>& v) const {
    return {scale(v.grad_out, m_value)};
  }
};

}  // namespace

template <class T>
Var<T> scale(const Var<T>& x, double alpha) {
  return x.graph().apply(std::make_shared<ScaleOp>(alpha), {x});
}

std::shared_ptr<const Op> make_scale_op(const JsonCursor& attrs) { return ScaleOp::from_attrs(attrs); }

template Var<float> scale(const Var<float>&, double);
template Var<double> scale(const Var<double>&, double);

}  // namespace xgrad
