#include <xgrad/ops/kernels/vector_erf.hpp>

#include <algorithm>
#include <cmath>

#if defined(XGRAD_LIBMVEC)
#include <immintrin.h>

// libmvec's entry points (the x86-64 vector function ABI: b = SSE2, d = AVX2; N lanes, v = one
// vector argument). Each one picks its implementation for the CPU when the library loads.
// The AVX2 ones are declared for AVX2 callers only (their vector arguments pass in ymm registers).
extern "C" {
__m128 _ZGVbN4v_erff(__m128);
__m128d _ZGVbN2v_erf(__m128d);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_erff(__m256);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_erf(__m256d);
}
#endif

namespace xgrad::detail {

#if defined(XGRAD_LIBMVEC)
namespace {

const bool has_avx2 = __builtin_cpu_supports("avx2");

// Whole vectors, then the last n % width elements in a vector padded with zeros. (Plain loops:
// a lambda would not inherit the target attribute.)
#define XGRAD_ERF_LOOP(T, WIDTH, LOAD, STORE, CALL)   \
  std::size_t i = 0;                                   \
  for (; i + (WIDTH) <= n; i += (WIDTH)) STORE(y + i, CALL(LOAD(x + i)));  \
  if (i < n) {                                         \
    T in[WIDTH] = {}, out[WIDTH];                      \
    std::copy(x + i, x + n, in);                       \
    STORE(out, CALL(LOAD(in)));                        \
    std::copy(out, out + (n - i), y + i);              \
  }

__attribute__((target("avx2"))) void erf_avx2(const float* x, float* y, std::size_t n) {
  XGRAD_ERF_LOOP(float, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_erff)
}
__attribute__((target("avx2"))) void erf_avx2(const double* x, double* y, std::size_t n) {
  XGRAD_ERF_LOOP(double, 4, _mm256_loadu_pd, _mm256_storeu_pd, _ZGVdN4v_erf)
}
void erf_sse2(const float* x, float* y, std::size_t n) {
  XGRAD_ERF_LOOP(float, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_erff)
}
void erf_sse2(const double* x, double* y, std::size_t n) {
  XGRAD_ERF_LOOP(double, 2, _mm_loadu_pd, _mm_storeu_pd, _ZGVbN2v_erf)
}
#undef XGRAD_ERF_LOOP

template <class T>
void erf_any(const T* x, T* y, std::size_t n) {
  if (has_avx2) {
    erf_avx2(x, y, n);
  } else {
    erf_sse2(x, y, n);
  }
}

}  // namespace

void vector_erf(const float* x, float* y, std::size_t n) { erf_any(x, y, n); }
void vector_erf(const double* x, double* y, std::size_t n) { erf_any(x, y, n); }
const char* vector_erf_kind() { return has_avx2 ? "avx2" : "sse2"; }

#else

void vector_erf(const float* x, float* y, std::size_t n) { std::transform(x, x + n, y, [](float v) { return std::erf(v); }); }
void vector_erf(const double* x, double* y, std::size_t n) {
  std::transform(x, x + n, y, [](double v) { return std::erf(v); });
}
const char* vector_erf_kind() { return "scalar"; }

#endif

}  // namespace xgrad::detail
