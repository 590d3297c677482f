// forward: y = alpha * x                  same shape
// VJP:     grad_x = alpha * grad_out      same shape
// saves:   alpha.
#include <xgrad/ops/scale.hpp>

#include <xgrad/ops/common.hpp>

namespace xgrad {

namespace {

class ScaleOp final : public OpFor<ScaleOp> {
 public:
  explicit ScaleOp(double alpha) : m_alpha(alpha) {}

  std::string name() const override { return "scale"; }
  std::size_t arity() const override { return 1; }
  nlohmann::json attrs() const override { return {{"alpha", m_alpha}}; }

  Shape infer_shape(const std::vector<Shape>& x) const override { return x[0]; }

  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    const T alpha = static_cast<T>(m_alpha);
    const T* src = x[0]->data();
    T* dst = y.data();
    for (std::size_t i = 0, n = y.size(); i < n; ++i) dst[i] = alpha * src[i];
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

template Var<float> scale(const Var<float>&, double);
template Var<double> scale(const Var<double>&, double);

}  // namespace xgrad
