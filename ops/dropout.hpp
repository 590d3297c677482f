// dropout: inverted dropout with a counter-based mask.
#pragma once

#include <cstdint>

#include <xgrad/graph/graph.hpp>

namespace xgrad {

// Inverted dropout, as torch.nn.functional.dropout in training mode: y = x * m, where m is
// 1 / (1 - p) (computed in T) for a kept element and 0 for a dropped one, each element kept with
// probability 1 - p. Active in training mode (the graph's default, Graph::set_training); in
// evaluation, and for p = 0, y is x bit for bit. p = 1 drops every element (y = x * 0: zeros,
// NaN where x is NaN or infinite, as x * 0 is; a dropped NaN or inf gives NaN likewise).
// The mask is a pure function of (seed, the graph's step, the element's row-major index): its
// 32 random bits are Philox4x32-10 keyed by seed with the counter (index / 4, step)
// (ops/kernels/philox.hpp), and the element is kept when they are below floor((1 - p) 2^32). So
// float32 and float64 graphs draw the same mask, a replay at the same step the same mask, and
// Graph::set_step(s) a new one. The VJP is dropout(grad_out, p, seed): the same mask at the same
// step. Two dropout nodes of one seed draw one mask (for inputs of one shape): give each
// its own seed. Throws xgrad::error naming p if it is not in [0, 1] (NaN included).
template <class T>
Var<T> dropout(const Var<T>& x, double p, std::uint64_t seed);

}  // namespace xgrad
