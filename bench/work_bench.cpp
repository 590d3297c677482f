// The calibration of Op::work, the cost estimate an import charges against max_import_work: for
// each op at shapes that stress its per-row and per-call costs (rows of 1, strided rows, batches
// of tiny products), one forward's best time of 3 over its work, in ns per element visit. The
// limit (2^32 visits) means a few seconds only while every row stays within a few ns a visit;
// an op whose row grows past that needs a term in its work(). 2^24 elements per case, float64.
//   xgrad_work_bench      (tools/setup bench runs it; a ctest runs it, no time checked)
#include <xgrad/xgrad.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
using namespace xgrad;
using V = Var<double>;
int main() {
  xgrad::use_best_blas_kernels();  // OpenBLAS's best kernels for this CPU (docs/performance.md)
  std::printf("%-28s %15s %10s %15s\n", "op and shape", "work (visits)", "seconds", "ns per visit");
  const std::size_t E = std::size_t(1) << 24;
  struct Case { const char* name; Shape shape; std::function<V(Graph<double>&, V)> make; };
  std::vector<Case> cases = {
    {"scale", {E}, [](auto&, V x) { return scale(x, 2.0); }},
    // every unary row of ops/elementwise.def
#define XGRAD_UNARY(NAME, DOMAIN, COST, FORWARD, VJP, ONNX) {#NAME, {E}, [](auto&, V x) { return NAME(x); }},
#include <xgrad/ops/elementwise.def>
    {"pow 1.5", {E}, [](auto&, V x) { return pow(x, 1.5); }},
    {"pow 2", {E}, [](auto&, V x) { return pow(x, 2.0); }},
    {"less same", {E}, [](auto&, V x) { return less(x, x); }},
    {"where same", {E}, [](auto&, V x) { return where(x, x, x); }},
    {"where bcast rows", {E, 1}, [](auto& g, V x) { return where(g.constant("m", xt::xarray<double>(xt::ones<double>({std::size_t(1), std::size_t(1)}))), x, x); }},
    {"gelu none", {E}, [](auto&, V x) { return gelu(x); }},
    {"gelu tanh", {E}, [](auto&, V x) { return gelu(x, GeluApprox::tanh); }},
    {"dropout p=0.5", {E}, [](auto&, V x) { return dropout(x, 0.5, 1); }},
    {"add same", {E}, [](auto&, V x) { return add(x, x); }},
    {"sub same", {E}, [](auto&, V x) { return sub(x, x); }},
    {"div same", {E}, [](auto&, V x) { return div(x, x); }},
    {"add bcast rows", {E, 1}, [](auto& g, V x) { return add(x, g.input("r", xt::xarray<double>(xt::ones<double>({std::size_t(1), std::size_t(1)})))); }},
    {"add bcast (E/64,64)+(64)", {E / 64, 64}, [](auto& g, V x) { return add(x, g.input("r", xt::xarray<double>(xt::ones<double>({std::size_t(64)})))); }},
    {"mul bcast rows", {E, 1}, [](auto& g, V x) { return mul(x, g.input("r", xt::xarray<double>(xt::ones<double>({std::size_t(1), std::size_t(1)})))); }},
    {"softmax n=1", {E, 1}, [](auto&, V x) { return softmax(x); }},
    {"softmax n=8", {E / 8, 8}, [](auto&, V x) { return softmax(x); }},
    {"softmax n=1024", {E / 1024, 1024}, [](auto&, V x) { return softmax(x); }},
    {"softmax axis0 n=1024", {1024, E / 1024}, [](auto&, V x) { return softmax(x, 0); }},
    {"log_softmax n=1", {E, 1}, [](auto&, V x) { return log_softmax(x); }},
    {"softmax_vjp n=1", {E, 1}, [](auto&, V x) { return softmax_vjp(x, x); }},
    {"sum axis1 n=1", {E, 1}, [](auto&, V x) { return sum(x, {1}); }},
    {"sum axis0", {E / 1024, 1024}, [](auto&, V x) { return sum(x, {0}); }},
    {"sum all", {E}, [](auto&, V x) { return sum(x); }},
    {"mean axis1 n=1", {E, 1}, [](auto&, V x) { return mean(x, {1}); }},
    {"sum_to rows", {E / 64, 64}, [](auto&, V x) { return sum_to(x, {64}); }},
    {"sum_to (E,1)->(1,1)", {E, 1}, [](auto&, V x) { return sum_to(x, {1, 1}); }},
    {"broadcast_to (1)->(E)", {1}, [E](auto&, V x) { return broadcast_to(x, {E}); }},
    {"broadcast_to (1,1)->(E,1)", {1, 1}, [E](auto&, V x) { return broadcast_to(x, {E, 1}); }},
    {"transpose (E/2,2)", {E / 2, 2}, [](auto&, V x) { return transpose(x); }},
    {"transpose (E/4,2,2)", {E / 4, 2, 2}, [](auto&, V x) { return transpose(x); }},
    {"permute (E/64,8,8) 2,1,0", {E / 64, 8, 8}, [](auto&, V x) { return permute(x, {2, 1, 0}); }},
    {"permute (E,1,1)", {E, 1, 1}, [](auto&, V x) { return permute(x, {2, 1, 0}); }},
    {"reshape", {E}, [E](auto&, V x) { return reshape(x, {E / 2, 2}); }},
    {"slice n=2 of axis1", {E / 2, 2}, [](auto&, V x) { return slice(x, 1, 0, 1); }},
    {"pad axis1 1->2", {E / 2, 1}, [](auto&, V x) { return pad(x, 1, 0, 1); }},
    {"apply_mask rows", {E, 1}, [](auto& g, V x) { return apply_mask(x, g.constant("m", xt::xarray<double>(xt::ones<double>({std::size_t(1), std::size_t(1)}))), -1e9); }},
    {"matmul 1x1 batch", {E / 4, 1, 1}, [](auto&, V x) { return matmul(x, x); }},
    {"matmul 2x2 batch", {E / 16, 2, 2}, [](auto&, V x) { return matmul(x, x); }},
    {"matmul 8x8 batch", {E / 64, 8, 8}, [](auto&, V x) { return matmul(x, x); }},
    {"matmul 1024^2", {1024, 1024}, [](auto&, V x) { return matmul(x, x); }},
    {"matmul E x 1 @ 1 x 1", {E / 4, 1}, [](auto& g, V x) { return matmul(x, g.input("w", xt::xarray<double>(xt::ones<double>({std::size_t(1), std::size_t(1)})))); }},
    {"matmul 1 x E @ E x 1", {1, E / 4}, [](auto&, V x) { return matmul(x, transpose(x)); }},
  };
  for (auto& c : cases) {
    Graph<double> g;
    // Values in [0.5, 1.5): inside every row's domain, away from libm's fast paths at 0 and 1.
    xt::xarray<double> value = 0.5 + xt::abs(xt::sin(xt::arange<double>(0, static_cast<double>(shape_size(c.shape)))));
    value.reshape(c.shape);
    auto x = g.input("x", value);
    V y = c.make(g, x);
    const Node<double>& n = y.node();
    std::vector<Shape> in;
    Args<double> args;
    for (const Slot& i : n.inputs) { in.push_back(xgrad::shape_of(g.node(i.node).value(i.output))); args.push_back(&g.node(i.node).value(i.output)); }
    const std::vector<Shape> ys = {xgrad::shape_of(n.value())};
    const double work = n.op->work(in, ys);
    xt::xarray<double> out = n.value();
    double best = 1e9;
    for (int r = 0; r < 3; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      n.op->forward(args, out);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-28s %15.3g %10.4f %15.2f\n", c.name, work, best, best / work * 1e9);
  }
}
