// The ops (docs/ops.md) as module functions, and the arithmetic operators of xgrad.Var.
#include "common.hpp"

namespace xgrad::python {

namespace {

// A Python number beside a Var: the constant leaf the C++ operators make of a double.
using Operand = std::variant<PyVar, double>;

// f(a, b) for two operands, at least one a Var; a number becomes scalar_constant beside the Var.
template <class F>
PyVar binary(F&& f, const Operand& a, const Operand& b, const char* name) {
  const PyVar* var = std::get_if<PyVar>(&a) ? &std::get<PyVar>(a) : std::get_if<PyVar>(&b);
  if (!var) throw error(std::string(name) + ": needs a Var on one side (two numbers make no node)");
  return std::visit(
      [&](const auto& t) {
        using T = typename std::decay_t<decltype(t)>::type;
        const auto side = [&](const Operand& o) {
          return std::holds_alternative<PyVar>(o) ? typed<T>(std::get<PyVar>(o)).var : scalar_constant(t.var, std::get<double>(o));
        };
        return wrap(t.box, locked(t.box, [&] { return f(side(a), side(b)); }));
      },
      var->v);
}

GeluApprox gelu_approx(const std::string& approximate) {
  if (approximate == "none") return GeluApprox::none;
  if (approximate == "tanh") return GeluApprox::tanh;
  throw error("gelu: approximate \"" + approximate + "\" is neither \"none\" nor \"tanh\"");
}

std::vector<long> axes_or_all(const std::optional<std::vector<long>>& axes, const PyVar& x) {
  if (axes) return *axes;
  const std::size_t rank = std::visit([](const auto& t) { return t.var.shape().size(); }, x.v);
  std::vector<long> all(rank);
  for (std::size_t i = 0; i < rank; ++i) all[i] = static_cast<long>(i);
  return all;
}

}  // namespace

void bind_ops(py::module_& m) {
  // Elementwise, one row of ops/elementwise.def each.
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX)                                                        \
  m.def(#NAME, [](const PyVar& x) { return call([](const auto& v) { return xgrad::NAME(v); }, x); }, py::arg("x"), \
        "Elementwise " #NAME " (docs/ops.md): y = " #FORWARD ".");
#define XGRAD_BINARY(NAME, DOMAIN, COST, FORWARD, VJP_A, VJP_B, ONNX)                                          \
  m.def(#NAME,                                                                                                 \
        [](const Operand& a, const Operand& b) {                                                               \
          return binary([](const auto& x, const auto& y) { return xgrad::NAME(x, y); }, a, b, #NAME);          \
        },                                                                                                     \
        py::arg("a"), py::arg("b"),                                                                            \
        "Elementwise " #NAME " with numpy broadcasting (docs/ops.md): y = " #FORWARD                           \
        ". A Python number on one side becomes a constant of shape ().");
#include <xgrad/ops/elementwise.def>

  m.def("silu", [](const PyVar& x) { return call([](const auto& v) { return silu(v); }, x); }, py::arg("x"),
        "x * sigmoid(x).");
  m.def("matmul", [](const PyVar& a, const PyVar& b, bool ta, bool tb) {
    return call([&](const auto& x, const auto& y) { return matmul(x, y, ta, tb); }, a, b);
  }, py::arg("a"), py::arg("b"), py::arg("transpose_a") = false, py::arg("transpose_b") = false,
        "a @ b over the last two axes, batch axes broadcasting (numpy's matmul); a flag reads that operand transposed.");
  m.def("linear", [](const PyVar& x, const PyVar& w, const PyVar& b) {
    return call([](const auto& xv, const auto& wv, const auto& bv) { return linear(xv, wv, bv); }, x, w, b);
  }, py::arg("x"), py::arg("w"), py::arg("b"), "x @ w + b: x (..., in), w (in, out), b (out); one node, the bias inside the GEMM.");
  m.def("transpose", [](const PyVar& x) { return call([](const auto& v) { return transpose(v); }, x); }, py::arg("x"),
        "Swaps the last two axes.");
  m.def("scale", [](const PyVar& x, double alpha) { return call([&](const auto& v) { return scale(v, alpha); }, x); },
        py::arg("x"), py::arg("alpha"), "alpha * x.");
  m.def("softmax", [](const PyVar& x, long axis) { return call([&](const auto& v) { return softmax(v, axis); }, x); },
        py::arg("x"), py::arg("axis") = -1, "Softmax along axis; a row of only -inf gives zeros.");
  m.def("log_softmax", [](const PyVar& x, long axis) { return call([&](const auto& v) { return log_softmax(v, axis); }, x); },
        py::arg("x"), py::arg("axis") = -1, "log(softmax(x)) along axis, computed stably.");
  m.def("softmax_vjp", [](const PyVar& y, const PyVar& g, long axis) {
    return call([&](const auto& yv, const auto& gv) { return softmax_vjp(yv, gv, axis); }, y, g);
  }, py::arg("y"), py::arg("grad_out"), py::arg("axis") = -1, "softmax's VJP as one node: y * (g - sum(g * y)).");
  m.def("layer_norm", [](const PyVar& x, const PyVar& gamma, const PyVar& beta, double eps) {
    return call([&](const auto& xv, const auto& gv, const auto& bv) { return layer_norm(xv, gv, bv, eps); }, x, gamma, beta);
  }, py::arg("x"), py::arg("gamma"), py::arg("beta"), py::arg("eps") = 1e-5,
        "Layer normalisation over the last axis, as torch.nn.functional.layer_norm.");
  m.def("rms_norm", [](const PyVar& x, const PyVar& gamma, double eps) {
    return call([&](const auto& xv, const auto& gv) { return rms_norm(xv, gv, eps); }, x, gamma);
  }, py::arg("x"), py::arg("gamma"), py::arg("eps") = 1e-5, "RMS normalisation over the last axis.");
  m.def("gelu", [](const PyVar& x, const std::string& approximate) {
    const GeluApprox a = gelu_approx(approximate);
    return call([&](const auto& v) { return gelu(v, a); }, x);
  }, py::arg("x"), py::arg("approximate") = "none", "GELU, exact (erf) or \"tanh\" (GPT-2's), as torch's.");
  m.def("gelu_vjp", [](const PyVar& x, const PyVar& g, const std::string& approximate) {
    const GeluApprox a = gelu_approx(approximate);
    return call([&](const auto& xv, const auto& gv) { return gelu_vjp(xv, gv, a); }, x, g);
  }, py::arg("x"), py::arg("grad_out"), py::arg("approximate") = "none", "gelu's VJP as one node.");
  m.def("embedding", [](const PyVar& table, const PyVar& ids) {
    return call([](const auto& t, const auto& i) { return embedding(t, i); }, table, ids);
  }, py::arg("table"), py::arg("ids"), "Rows of table (V, d) at the ids of an index leaf: (ids..., d).");
  m.def("dropout", [](const PyVar& x, double p, std::uint64_t seed) {
    return call([&](const auto& v) { return dropout(v, p, seed); }, x);
  }, py::arg("x"), py::arg("p"), py::arg("seed"),
        "Inverted dropout with probability p; the mask follows (seed, the graph's step); evaluation mode copies x.");
  m.def("pow", [](const PyVar& x, double p) { return call([&](const auto& v) { return pow(v, p); }, x); },
        py::arg("x"), py::arg("exponent"), "x ** exponent.");
  m.def("mean", [](const PyVar& x, const std::optional<std::vector<long>>& axes, bool keepdims) {
    const auto a = axes_or_all(axes, x);
    return call([&](const auto& v) { return axes ? mean(v, a, keepdims) : mean(v); }, x);
  }, py::arg("x"), py::arg("axes") = py::none(), py::arg("keepdims") = false, "The mean over axes (all by default).");
  m.def("sum", [](const PyVar& x, const std::optional<std::vector<long>>& axes, bool keepdims) {
    const auto a = axes_or_all(axes, x);
    return call([&](const auto& v) { return axes ? sum(v, a, keepdims) : sum(v); }, x);
  }, py::arg("x"), py::arg("axes") = py::none(), py::arg("keepdims") = false, "The sum over axes (all by default).");
  m.def("reshape", [](const PyVar& x, const Shape& shape) { return call([&](const auto& v) { return reshape(v, shape); }, x); },
        py::arg("x"), py::arg("shape"), "x with a new shape of as many elements.");
  m.def("permute", [](const PyVar& x, const std::vector<std::size_t>& axes) {
    return call([&](const auto& v) { return permute(v, axes); }, x);
  }, py::arg("x"), py::arg("axes"), "x's axes in the given order (numpy's transpose(x, axes)).");
  m.def("broadcast_to", [](const PyVar& x, const Shape& shape) {
    return call([&](const auto& v) { return broadcast_to(v, shape); }, x);
  }, py::arg("x"), py::arg("shape"), "x broadcast to shape (numpy's rules).");
  m.def("sum_to", [](const PyVar& x, const Shape& shape) { return call([&](const auto& v) { return sum_to(v, shape); }, x); },
        py::arg("x"), py::arg("shape"), "x summed down to shape (the inverse of broadcast_to).");
  m.def("slice", [](const PyVar& x, long axis, std::size_t begin, std::size_t end) {
    return call([&](const auto& v) { return slice(v, axis, begin, end); }, x);
  }, py::arg("x"), py::arg("axis"), py::arg("begin"), py::arg("end"), "x[begin:end] along axis.");
  m.def("pad", [](const PyVar& x, long axis, std::size_t before, std::size_t after) {
    return call([&](const auto& v) { return pad(v, axis, before, after); }, x);
  }, py::arg("x"), py::arg("axis"), py::arg("before"), py::arg("after"), "x with zeros before and after along axis.");
  m.def("concat", [](const std::vector<PyVar>& xs, long axis) {
    if (xs.empty()) throw error("concat: no Vars to join");
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const std::vector<Var<T>> vars = typed<T>(xs);
      return wrap(t.box, locked(t.box, [&] { return concat(vars, axis); }));
    }, xs.front().v);
  }, py::arg("xs"), py::arg("axis"), "The Vars joined along axis.");
  m.def("split", [](const PyVar& x, const std::vector<std::size_t>& sizes, long axis) {
    return call([&](const auto& v) { return split(v, sizes, axis); }, x);
  }, py::arg("x"), py::arg("sizes"), py::arg("axis"), "x cut along axis into parts of these sizes: a list of Vars.");
  m.def("chunk", [](const PyVar& x, std::size_t n, long axis) { return call([&](const auto& v) { return chunk(v, n, axis); }, x); },
        py::arg("x"), py::arg("n"), py::arg("axis"), "x cut along axis into n equal parts: a list of Vars.");
  m.def("where", [](const PyVar& cond, const PyVar& a, const PyVar& b) {
    return call([](const auto& c, const auto& x, const auto& y) { return where(c, x, y); }, cond, a, b);
  }, py::arg("cond"), py::arg("a"), py::arg("b"), "a where cond is nonzero, else b (broadcasting).");
  m.def("apply_mask", [](const PyVar& x, const PyVar& mask, double fill) {
    return call([&](const auto& xv, const auto& mv) { return apply_mask(xv, mv, fill); }, x, mask);
  }, py::arg("x"), py::arg("mask"), py::arg("fill"), "x where mask is nonzero, fill elsewhere (mask broadcasting to x).");
  m.def("rope", [](const PyVar& x, const PyVar& positions, double base) {
    return call([&](const auto& xv, const auto& pv) { return rope(xv, pv, base); }, x, positions);
  }, py::arg("x"), py::arg("positions"), py::arg("base") = 10000.0, "Rotary position embedding of x (..., T, d).");
  m.def("take_label", [](const PyVar& x, const PyVar& labels, std::optional<std::int64_t> ignore_index) {
    return call([&](const auto& xv, const auto& lv) { return take_label(xv, lv, ignore_index); }, x, labels);
  }, py::arg("x"), py::arg("labels"), py::arg("ignore_index") = py::none(), "x[..., label] per position of an index leaf.");
  m.def("embedding_vjp", [](const PyVar& g, const PyVar& ids, std::size_t rows) {
    return call([&](const auto& gv, const auto& iv) { return embedding_vjp(gv, iv, rows); }, g, ids);
  }, py::arg("grad_out"), py::arg("ids"), py::arg("rows"), "embedding's VJP: grad_out's rows summed into a (rows, d) table.");
  m.def("layer_norm_vjp", [](const PyVar& x, const PyVar& gamma, const PyVar& mean_, const PyVar& rstd, const PyVar& g) {
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const auto r = locked(t.box, [&] {
        return layer_norm_vjp(t.var, typed<T>(gamma).var, typed<T>(mean_).var, typed<T>(rstd).var, typed<T>(g).var);
      });
      return wrap(t.box, std::vector<Var<T>>{r.grad_x, r.grad_gamma, r.grad_beta});
    }, x.v);
  }, py::arg("x"), py::arg("gamma"), py::arg("mean"), py::arg("rstd"), py::arg("grad_y"),
        "layer_norm's VJP as one node: [grad_x, grad_gamma, grad_beta].");
  m.def("rms_norm_vjp", [](const PyVar& x, const PyVar& gamma, const PyVar& rstd, const PyVar& g) {
    return std::visit([&](const auto& t) {
      using T = typename std::decay_t<decltype(t)>::type;
      const auto r = locked(t.box, [&] { return rms_norm_vjp(t.var, typed<T>(gamma).var, typed<T>(rstd).var, typed<T>(g).var); });
      return wrap(t.box, std::vector<Var<T>>{r.grad_x, r.grad_gamma});
    }, x.v);
  }, py::arg("x"), py::arg("gamma"), py::arg("rstd"), py::arg("grad_y"), "rms_norm's VJP as one node: [grad_x, grad_gamma].");

  // The operators of xgrad.Var: the C++ ones (lib/operators.hpp), Python numbers as doubles.
  auto var = py::reinterpret_borrow<py::class_<PyVar>>(m.attr("Var"));
  const auto op = [&](const char* name, auto f, bool reflected) {
    var.def(name, [f, reflected](const PyVar& self, const Operand& other) {
      return reflected ? binary(f, other, self, "operator") : binary(f, self, other, "operator");
    }, py::is_operator());
  };
  op("__add__", [](const auto& a, const auto& b) { return a + b; }, false);
  op("__radd__", [](const auto& a, const auto& b) { return a + b; }, true);
  op("__sub__", [](const auto& a, const auto& b) { return a - b; }, false);
  op("__rsub__", [](const auto& a, const auto& b) { return a - b; }, true);
  op("__truediv__", [](const auto& a, const auto& b) { return a / b; }, false);
  op("__rtruediv__", [](const auto& a, const auto& b) { return a / b; }, true);
  // x * s is scale(x, s), no constant node (lib/operators.hpp).
  var.def("__mul__", [](const PyVar& x, const Operand& other) {
    if (const double* s = std::get_if<double>(&other)) return call([&](const auto& v) { return v * *s; }, x);
    return binary([](const auto& a, const auto& b) { return a * b; }, x, other, "operator *");
  }, py::is_operator());
  var.def("__rmul__", [](const PyVar& x, double s) { return call([&](const auto& v) { return s * v; }, x); }, py::is_operator());
  var.def("__matmul__", [](const PyVar& a, const PyVar& b) {
    return call([](const auto& x, const auto& y) { return matmul(x, y); }, a, b);
  }, py::is_operator());
  var.def("__neg__", [](const PyVar& x) { return call([](const auto& v) { return -v; }, x); });
}

}  // namespace xgrad::python
