// Counts every operator new and delete of a program, for the memory checks of tests/resources/
// and the heap peaks of bench/attention_bench: include it in one source file of the program (it
// defines the global operators). Bytes are counted as asked for.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace xgrad::heap {

inline std::atomic<std::size_t> current{0}, peak{0};
// Allocations that would take `current` above this fail (std::bad_alloc), as under ulimit -v.
inline std::atomic<std::size_t> limit{SIZE_MAX};

inline void* allocate(std::size_t n) {
  if (n > limit - std::min<std::size_t>(current, limit)) throw std::bad_alloc();
  // A 16-byte header keeps the size (and the alignment of new) for the matching delete.
  auto* p = static_cast<unsigned char*>(std::malloc(n + 16));
  if (!p) throw std::bad_alloc();
  *reinterpret_cast<std::size_t*>(p) = n;
  const std::size_t now = current += n;
  for (std::size_t old = peak; now > old && !peak.compare_exchange_weak(old, now);) {
  }
  return p + 16;
}

inline void release(void* q) noexcept {
  if (!q) return;
  auto* p = static_cast<unsigned char*>(q) - 16;
  current -= *reinterpret_cast<std::size_t*>(p);
  std::free(p);
}

}  // namespace xgrad::heap

void* operator new(std::size_t n) { return xgrad::heap::allocate(n); }
void* operator new[](std::size_t n) { return xgrad::heap::allocate(n); }
void operator delete(void* p) noexcept { xgrad::heap::release(p); }
void operator delete[](void* p) noexcept { xgrad::heap::release(p); }
void operator delete(void* p, std::size_t) noexcept { xgrad::heap::release(p); }
void operator delete[](void* p, std::size_t) noexcept { xgrad::heap::release(p); }
