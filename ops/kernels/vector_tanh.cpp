#include <xgrad/ops/kernels/vector_tanh.hpp>

#include <algorithm>
#include <cmath>

#if defined(XGRAD_LIBMVEC)
#include <immintrin.h>

// libmvec's entry points (the x86-64 vector function ABI, as ops/kernels/vector_erf.cpp's).
extern "C" {
__m128 _ZGVbN4v_tanhf(__m128);
__m128d _ZGVbN2v_tanh(__m128d);
__attribute__((target("avx2"))) __m256 _ZGVdN8v_tanhf(__m256);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_tanh(__m256d);
}
#endif

namespace xgrad::detail {

#if defined(XGRAD_LIBMVEC)
namespace {

const bool has_avx2 = __builtin_cpu_supports("avx2");

// Whole vectors, then the last n % width elements in a vector padded with zeros.
#define XGRAD_TANH_LOOP(T, WIDTH, LOAD, STORE, CALL)  \
  std::size_t i = 0;                                   \
  for (; i + (WIDTH) <= n; i += (WIDTH)) STORE(y + i, CALL(LOAD(x + i)));  \
  if (i < n) {                                         \
    T in[WIDTH] = {}, out[WIDTH];                      \
    std::copy(x + i, x + n, in);                       \
    STORE(out, CALL(LOAD(in)));                        \
    std::copy(out, out + (n - i), y + i);              \
  }

__attribute__((target("avx2"))) void tanh_avx2(const float* x, float* y, std::size_t n) {
  XGRAD_TANH_LOOP(float, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_tanhf)
}
__attribute__((target("avx2"))) void tanh_avx2(const double* x, double* y, std::size_t n) {
  XGRAD_TANH_LOOP(double, 4, _mm256_loadu_pd, _mm256_storeu_pd, _ZGVdN4v_tanh)
}
void tanh_sse2(const float* x, float* y, std::size_t n) {
  XGRAD_TANH_LOOP(float, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_tanhf)
}
void tanh_sse2(const double* x, double* y, std::size_t n) {
  XGRAD_TANH_LOOP(double, 2, _mm_loadu_pd, _mm_storeu_pd, _ZGVbN2v_tanh)
}
#undef XGRAD_TANH_LOOP

template <class T>
void tanh_any(const T* x, T* y, std::size_t n) {
  if (has_avx2) {
    tanh_avx2(x, y, n);
  } else {
    tanh_sse2(x, y, n);
  }
}

}  // namespace

void vector_tanh(const float* x, float* y, std::size_t n) { tanh_any(x, y, n); }
void vector_tanh(const double* x, double* y, std::size_t n) { tanh_any(x, y, n); }
const char* vector_tanh_kind() { return has_avx2 ? "avx2" : "sse2"; }

#else

void vector_tanh(const float* x, float* y, std::size_t n) {
  std::transform(x, x + n, y, [](float v) { return std::tanh(v); });
}
void vector_tanh(const double* x, double* y, std::size_t n) {
  std::transform(x, x + n, y, [](double v) { return std::tanh(v); });
}
const char* vector_tanh_kind() { return "scalar"; }

#endif

}  // namespace xgrad::detail
