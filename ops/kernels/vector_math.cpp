#include <xgrad/ops/kernels/vector_math.hpp>

#include <algorithm>
#include <cmath>

#if defined(XGRAD_LIBMVEC)
#include <immintrin.h>

// libmvec's entry points (the x86-64 vector function ABI: b = SSE2, d = AVX2; N lanes, v = one
// vector argument). Each one picks its implementation for the CPU when the library loads. The
// AVX2 ones are declared for AVX2 callers only (their vector arguments pass in ymm registers).
#define XGRAD_MVEC_DECLARE(F)                                          \
  __m128 _ZGVbN4v_##F##f(__m128);                                      \
  __m128d _ZGVbN2v_##F(__m128d);                                       \
  __attribute__((target("avx2"))) __m256 _ZGVdN8v_##F##f(__m256);      \
  __attribute__((target("avx2"))) __m256d _ZGVdN4v_##F(__m256d);
extern "C" {
XGRAD_MVEC_DECLARE(erf)
XGRAD_MVEC_DECLARE(tanh)
XGRAD_MVEC_DECLARE(sin)
XGRAD_MVEC_DECLARE(cos)
}
#undef XGRAD_MVEC_DECLARE
#endif

namespace xgrad::detail {

#if defined(XGRAD_LIBMVEC)
namespace {

const bool has_avx2 = __builtin_cpu_supports("avx2");

// Whole vectors, then the last n % WIDTH elements in a vector padded with zeros. (Plain loops:
// a lambda would not inherit the target attribute.)
#define XGRAD_MVEC_LOOP(T, WIDTH, LOAD, STORE, CALL)                        \
  std::size_t i = 0;                                                         \
  for (; i + (WIDTH) <= n; i += (WIDTH)) STORE(y + i, CALL(LOAD(x + i)));    \
  if (i < n) {                                                               \
    T in[WIDTH] = {}, out[WIDTH];                                            \
    std::copy(x + i, x + n, in);                                             \
    STORE(out, CALL(LOAD(in)));                                              \
    std::copy(out, out + (n - i), y + i);                                    \
  }

// F over an array at the widest width the CPU has: its AVX2 and SSE2 loops, and the dispatch.
#define XGRAD_MVEC_DEFINE(F)                                                                   \
  __attribute__((target("avx2"))) void F##_avx2(const float* x, float* y, std::size_t n) {    \
    XGRAD_MVEC_LOOP(float, 8, _mm256_loadu_ps, _mm256_storeu_ps, _ZGVdN8v_##F##f)              \
  }                                                                                            \
  __attribute__((target("avx2"))) void F##_avx2(const double* x, double* y, std::size_t n) {  \
    XGRAD_MVEC_LOOP(double, 4, _mm256_loadu_pd, _mm256_storeu_pd, _ZGVdN4v_##F)                \
  }                                                                                            \
  void F##_sse2(const float* x, float* y, std::size_t n) {                                    \
    XGRAD_MVEC_LOOP(float, 4, _mm_loadu_ps, _mm_storeu_ps, _ZGVbN4v_##F##f)                    \
  }                                                                                            \
  void F##_sse2(const double* x, double* y, std::size_t n) {                                  \
    XGRAD_MVEC_LOOP(double, 2, _mm_loadu_pd, _mm_storeu_pd, _ZGVbN2v_##F)                      \
  }                                                                                            \
  template <class T>                                                                           \
  void F##_any(const T* x, T* y, std::size_t n) {                                              \
    if (has_avx2) {                                                                            \
      F##_avx2(x, y, n);                                                                       \
    } else {                                                                                   \
      F##_sse2(x, y, n);                                                                       \
    }                                                                                          \
  }
XGRAD_MVEC_DEFINE(erf)
XGRAD_MVEC_DEFINE(tanh)
XGRAD_MVEC_DEFINE(sin)
XGRAD_MVEC_DEFINE(cos)
#undef XGRAD_MVEC_DEFINE
#undef XGRAD_MVEC_LOOP

}  // namespace

void vector_erf(const float* x, float* y, std::size_t n) { erf_any(x, y, n); }
void vector_erf(const double* x, double* y, std::size_t n) { erf_any(x, y, n); }
void vector_tanh(const float* x, float* y, std::size_t n) { tanh_any(x, y, n); }
void vector_tanh(const double* x, double* y, std::size_t n) { tanh_any(x, y, n); }
void vector_sin(const float* x, float* y, std::size_t n) { sin_any(x, y, n); }
void vector_sin(const double* x, double* y, std::size_t n) { sin_any(x, y, n); }
void vector_cos(const float* x, float* y, std::size_t n) { cos_any(x, y, n); }
void vector_cos(const double* x, double* y, std::size_t n) { cos_any(x, y, n); }
const char* vector_math_kind() { return has_avx2 ? "avx2" : "sse2"; }

#else

namespace {
template <class T, class F>
void scalar_loop(const T* x, T* y, std::size_t n, F f) {
  std::transform(x, x + n, y, [&](T v) { return f(v); });
}
}  // namespace

void vector_erf(const float* x, float* y, std::size_t n) { scalar_loop(x, y, n, [](float v) { return std::erf(v); }); }
void vector_erf(const double* x, double* y, std::size_t n) { scalar_loop(x, y, n, [](double v) { return std::erf(v); }); }
void vector_tanh(const float* x, float* y, std::size_t n) { scalar_loop(x, y, n, [](float v) { return std::tanh(v); }); }
void vector_tanh(const double* x, double* y, std::size_t n) { scalar_loop(x, y, n, [](double v) { return std::tanh(v); }); }
void vector_sin(const float* x, float* y, std::size_t n) { scalar_loop(x, y, n, [](float v) { return std::sin(v); }); }
void vector_sin(const double* x, double* y, std::size_t n) { scalar_loop(x, y, n, [](double v) { return std::sin(v); }); }
void vector_cos(const float* x, float* y, std::size_t n) { scalar_loop(x, y, n, [](float v) { return std::cos(v); }); }
void vector_cos(const double* x, double* y, std::size_t n) { scalar_loop(x, y, n, [](double v) { return std::cos(v); }); }
const char* vector_math_kind() { return "scalar"; }

#endif

}  // namespace xgrad::detail
