// A test op that reads an index leaf: rows of a table picked by ids, ids checked on the thread
// pool. For the tests of index inputs and of value errors named with their node (embedding, in
// the next ops, is the real one).
#pragma once

#include <string>
#include <vector>

#include <xgrad/graph/graph.hpp>
#include <xgrad/ops/kernels/parallel.hpp>

namespace xgrad::test {

// out[i, :] = table[ids[i], :], table (V, d), ids (n) -> out (n, d). An id outside [0, V) throws
// "id <value> at [i] is out of range for a table of V rows", from whichever thread meets it.
class PickOp final : public OpFor<PickOp> {
 public:
  std::string name() const override { return "pick"; }
  std::size_t arity() const override { return 2; }
  bool accepts_indices(std::size_t i) const override { return i == 1; }
  Shape infer_shape(const std::vector<Shape>& x) const override {
    if (x[0].size() != 2 || x[1].size() != 1) {
      throw error("table " + shape_str(x[0]) + " must be (V, d) and ids " + shape_str(x[1]) + " (n)");
    }
    return {x[1][0], x[0][1]};
  }
  template <class T>
  void run_forward(const Args<T>& x, xt::xarray<T>& y) const {
    if (x.indices.empty() || !x.indices[1]) throw error("ids must be an index leaf");
    const xt::xarray<T>& table = *x[0];
    const std::int64_t* ids = x.indices[1]->data();
    const std::size_t rows = table.shape()[0], d = table.shape()[1];
    detail::parallel_for(y.shape()[0], d + 1, [&](std::size_t begin, std::size_t end) {
      for (std::size_t i = begin; i < end; ++i) {
        if (ids[i] < 0 || static_cast<std::size_t>(ids[i]) >= rows) {
          throw error("id " + std::to_string(ids[i]) + " at [" + std::to_string(i) + "] is out of range for a table of " +
                      std::to_string(rows) + " rows");
        }
        std::copy(table.data() + ids[i] * d, table.data() + (ids[i] + 1) * d, y.data() + i * d);
      }
    });
  }
  template <class T>
  std::vector<Var<T>> run_vjp(const VjpArgs<T>&) const {
    throw error("pick: the test op has no VJP (the tests do not differentiate it)");
  }
};

template <class T>
Var<T> pick(const Var<T>& table, const Var<T>& ids) {
  return table.graph().apply(std::make_shared<PickOp>(), {table, ids});
}

}  // namespace xgrad::test
