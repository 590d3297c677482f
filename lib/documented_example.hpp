// The spec's documented example (DESIGN.md), in one place: its inputs and the closed forms of
// its attention weights, its output and the gradients of sum(output) w.r.t. q, k and v.
//
//   q = [[ln 2], [0]], k = [[1], [0]], v = [[3, 0], [0, 6]]  ->  out = [[2, 2], [1.5, 3]]
//
// Scores q k^T / sqrt(1) = [[ln 2, 0], [0, 0]], so the weights are [[2/3, 1/3], [1/2, 1/2]].
#pragma once

#include <cmath>

#include <xtensor/xarray.hpp>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// An array's closed form: as people write it, and its value in float64.
struct ClosedForm {
  const char* formula;  // "[[2/3, 1/3], [1/2, 1/2]]"
  xt::xarray<double> value;
};

struct DocumentedExample {
  xt::xarray<double> q, k, v;  // float64; cast to the dtype computed in (the spec's is float32)
  ClosedForm weights, output;
  ClosedForm grad_q, grad_k, grad_v;  // of sum(output), grad_out = ones
};

inline DocumentedExample documented_example() {
  const double ln2 = std::log(2.0);
  DocumentedExample e;
  e.q = matrix<double>({{ln2}, {0.0}});
  e.k = matrix<double>({{1.0}, {0.0}});
  e.v = matrix<double>({{3.0, 0.0}, {0.0, 6.0}});
  e.weights = {"[[2/3, 1/3], [1/2, 1/2]]", matrix<double>({{2.0 / 3, 1.0 / 3}, {0.5, 0.5}})};
  e.output = {"[[2, 2], [1.5, 3]]", matrix<double>({{2.0, 2.0}, {1.5, 3.0}})};
  e.grad_q = {"[[-2/3], [-3/4]]", matrix<double>({{-2.0 / 3}, {-0.75}})};
  e.grad_k = {"[[-(2/3) ln 2], [(2/3) ln 2]]", matrix<double>({{-2.0 / 3 * ln2}, {2.0 / 3 * ln2}})};
  e.grad_v = {"[[7/6, 7/6], [5/6, 5/6]]", matrix<double>({{7.0 / 6, 7.0 / 6}, {5.0 / 6, 5.0 / 6}})};
  return e;
}

}  // namespace xgrad
