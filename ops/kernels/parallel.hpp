// Splitting the element-wise passes of ops (softmax rows, scale) over threads.
#pragma once

#include <cstddef>
#include <functional>

namespace xgrad::detail {

// Calls f(begin, end) on contiguous chunks covering [0, count), one chunk per thread, when the
// work (count * cost, in elements touched) is worth waking threads for; else f(0, count) on the
// calling thread. f must be safe to run on disjoint chunks at once. If f throws on any thread, the
// first exception is rethrown here once every chunk has ended (the other chunks run to their end).
// Threads: as many as OpenBLAS is set to use (OPENBLAS_NUM_THREADS, openblas_set_num_threads),
// so one setting governs both. The workers sleep on a condition variable between jobs: they do
// not spin beside OpenBLAS's threads. Results do not depend on the thread count: each element
// is computed by one thread, by the same code.
void parallel_for(std::size_t count, std::size_t cost, const std::function<void(std::size_t, std::size_t)>& f);

// The number of threads parallel_for uses (at least 1).
std::size_t parallel_threads();

// parallel_for for callers that may already run on one of its threads (inside
// parallel_blas_chunks, where parallel_threads() is 1): f(0, count) directly then, with no
// std::function to allocate.
template <class F>
void parallel_rows(std::size_t count, std::size_t cost, F&& f) {
  if (parallel_threads() <= 1) {
    if (count > 0) f(std::size_t(0), count);
  } else {
    parallel_for(count, cost, f);
  }
}

// Calls f(chunk, begin, end) once for each of `chunks` contiguous chunks covering [0, count) in
// order (chunk i is [count i / chunks, count (i + 1) / chunks)), each on its own thread, with
// OpenBLAS held at 1 thread meanwhile, so that each chunk's GEMMs run on the thread that calls
// them. For work made of many GEMMs too small for OpenBLAS to split well (the tiles of the
// fused attention), whose spinning threads would also compete with these. With chunks <= 1:
// f(0, 0, count) on the calling thread, OpenBLAS left as set. A throw of f is rethrown here, as
// by parallel_for. OpenBLAS's thread
// count is process-wide: GEMMs of other threads of the program run on 1 thread meanwhile.
void parallel_blas_chunks(std::size_t count, std::size_t chunks,
                          const std::function<void(std::size_t, std::size_t, std::size_t)>& f);

}  // namespace xgrad::detail
