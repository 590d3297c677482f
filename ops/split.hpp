// split: an array cut into consecutive blocks along one axis, one output each.
#pragma once

#include <vector>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// The consecutive blocks of x along `axis` (negative counts from the end, as numpy), block k of
// length sizes[k], as torch.split(x, sizes, dim) and ONNX's Split: one node with one output per
// size (1 to 65536 of them), each a copy. The sizes are >= 0 (a block of length 0 is an empty
// output) and sum to x's length on the axis; x has rank >= 1. The gradient of x is the outputs'
// gradients joined along the axis (ops/concat.hpp), zeros (ops/pad.hpp) where no gradient reaches
// an output. Throws xgrad::error naming the op, the sizes, the axis and x's shape for sizes that do
// not sum to the axis's length, an axis out of range or an x of rank 0, and for no sizes or more
// than 65536; no node is added then.
template <class T>
std::vector<Var<T>> split(const Var<T>& x, const std::vector<std::size_t>& sizes, long axis);

// x cut into n parts along `axis` as torch.chunk(x, n, dim): parts of ceil(len / n), the last
// smaller, and fewer than n parts when those cover the axis sooner (len 5 into 4 gives 2, 2, 1;
// len 1 into 3 gives one part); an axis of length 0 gives n empty parts. One split node. Throws
// xgrad::error naming chunk, n, the axis and x's shape for n = 0 or above 65536, an axis out of
// range or an x of rank 0; no node is added then.
template <class T>
std::vector<Var<T>> chunk(const Var<T>& x, std::size_t n, long axis);

// The sizes chunk gives for an axis of length `length` cut into n parts (n >= 1).
std::vector<std::size_t> chunk_sizes(std::size_t length, std::size_t n);

}  // namespace xgrad
