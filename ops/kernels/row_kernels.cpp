#include <xgrad/ops/kernels/row_kernels.hpp>

#include <cmath>

#include <limits>

#include <xgrad/ops/kernels/vexp.hpp>
#include <xgrad/ops/kernels/vexp_avx512.hpp>

// One clone of each entry point per instruction set; the loader picks the best the CPU has
// (GCC's target_clones; other compilers build the baseline only).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define XGRAD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define XGRAD_CLONES
#endif
#define XGRAD_INLINE inline __attribute__((always_inline))

namespace xgrad::detail {

namespace {

// The passes, inlined into each clone so that they are vectorised for its instruction set. A
// contiguous row gets an `omp simd` loop (reductions in vector lanes), a strided one a plain loop.
template <class T>
XGRAD_INLINE T max_pass(const T* x, std::size_t n, std::size_t stride) {
  T m = -std::numeric_limits<T>::infinity();
  if (stride == 1) {
#pragma omp simd reduction(max : m)
    for (std::size_t i = 0; i < n; ++i) m = x[i] > m ? x[i] : m;
  } else {
    for (std::size_t i = 0; i < n; ++i) m = x[i * stride] > m ? x[i * stride] : m;
  }
  return m;
}

template <class T>
XGRAD_INLINE T exp_pass(const T* x, T shift, T* y, std::size_t n, std::size_t stride) {
  T sum = 0;
  if (stride == 1) {
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < n; ++i) {
      const T e = vexp(x[i] - shift);
      y[i] = e;
      sum += e;
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      y[i * stride] = vexp(x[i * stride] - shift);
      sum += y[i * stride];
    }
  }
  return sum;
}

template <class T>
XGRAD_INLINE void scale_pass(const T* x, T a, T* y, std::size_t n, std::size_t stride) {
  if (stride == 1) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = a * x[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i * stride] = a * x[i * stride];
  }
}

template <class T>
XGRAD_INLINE void shift_pass(const T* x, T b, T* y, std::size_t n, std::size_t stride) {
  if (stride == 1) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] + b;
  } else {
    for (std::size_t i = 0; i < n; ++i) y[i * stride] = x[i * stride] + b;
  }
}

template <class T>
XGRAD_INLINE T sum_pass(const T* x, std::size_t n) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (std::size_t i = 0; i < n; ++i) sum += x[i];
  return sum;
}

template <class T>
XGRAD_INLINE T dot_pass(const T* a, const T* b, std::size_t n, std::size_t stride) {
  T sum = 0;
  if (stride == 1) {
#pragma omp simd reduction(+ : sum)
    for (std::size_t i = 0; i < n; ++i) sum += a[i] * b[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) sum += a[i * stride] * b[i * stride];
  }
  return sum;
}

template <class T>
XGRAD_INLINE void softmax_vjp_pass(const T* y, const T* g, T s, T* z, std::size_t n, std::size_t stride) {
  if (stride == 1) {
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) z[i] = y[i] * (g[i] - s);
  } else {
    for (std::size_t i = 0; i < n; ++i) z[i * stride] = y[i * stride] * (g[i * stride] - s);
  }
}

template <class T>
XGRAD_INLINE void rotate_pass(const T* x, const T* c, const T* s, T* y, std::size_t h) {
#pragma omp simd
  for (std::size_t i = 0; i < h; ++i) {
    const T x1 = x[i], x2 = x[i + h];
    y[i] = x1 * c[i] - x2 * s[i];
    y[i + h] = x2 * c[i] + x1 * s[i];
  }
}

template <class T>
XGRAD_INLINE void adam_pass(T* p, const T* g, T* m, T* v, std::size_t n, const AdamCoefficients<T>& c) {
#pragma omp simd
  for (std::size_t j = 0; j < n; ++j) {
    const T q = p[j] * c.decay;  // 1 exactly without weight decay: p unchanged
    const T mj = m[j] * c.beta1 + c.one_minus_beta1 * g[j];
    const T vj = v[j] * c.beta2 + c.one_minus_beta2 * g[j] * g[j];
    const T denom = std::sqrt(vj) / c.bias_correction2_sqrt + c.eps;
    m[j] = mj;
    v[j] = vj;
    p[j] = q + c.step_size * mj / denom;
  }
}

}  // namespace

XGRAD_CLONES void row_adam(float* p, const float* g, float* m, float* v, std::size_t n, const AdamCoefficients<float>& c) {
  adam_pass(p, g, m, v, n, c);
}
XGRAD_CLONES void row_adam(double* p, const double* g, double* m, double* v, std::size_t n,
                           const AdamCoefficients<double>& c) {
  adam_pass(p, g, m, v, n, c);
}
XGRAD_CLONES void row_rotate(const float* x, const float* c, const float* s, float* y, std::size_t h) {
  rotate_pass(x, c, s, y, h);
}
XGRAD_CLONES void row_rotate(const double* x, const double* c, const double* s, double* y, std::size_t h) {
  rotate_pass(x, c, s, y, h);
}
XGRAD_CLONES float row_max(const float* x, std::size_t n, std::size_t s) { return max_pass(x, n, s); }
XGRAD_CLONES double row_max(const double* x, std::size_t n, std::size_t s) { return max_pass(x, n, s); }
XGRAD_CLONES float portable_row_exp(const float* x, float shift, float* y, std::size_t n, std::size_t s) {
  return exp_pass(x, shift, y, n, s);
}
XGRAD_CLONES double portable_row_exp(const double* x, double shift, double* y, std::size_t n, std::size_t s) {
  return exp_pass(x, shift, y, n, s);
}

// exp is most of softmax's time: on AVX-512 CPUs it runs the vscalef form (ops/kernels/vexp_avx512.hpp).
float row_exp(const float* x, float shift, float* y, std::size_t n, std::size_t s) {
#ifdef XGRAD_AVX512_EXP
  if (avx512::available()) return avx512::row_exp<avx512::F32>(x, shift, y, n, s);
#endif
  return portable_row_exp(x, shift, y, n, s);
}
double row_exp(const double* x, double shift, double* y, std::size_t n, std::size_t s) {
#ifdef XGRAD_AVX512_EXP
  if (avx512::available()) return avx512::row_exp<avx512::F64>(x, shift, y, n, s);
#endif
  return portable_row_exp(x, shift, y, n, s);
}
XGRAD_CLONES void row_scale(const float* x, float a, float* y, std::size_t n, std::size_t s) { scale_pass(x, a, y, n, s); }
XGRAD_CLONES void row_scale(const double* x, double a, double* y, std::size_t n, std::size_t s) {
  scale_pass(x, a, y, n, s);
}
XGRAD_CLONES void row_shift(const float* x, float b, float* y, std::size_t n, std::size_t s) { shift_pass(x, b, y, n, s); }
XGRAD_CLONES void row_shift(const double* x, double b, double* y, std::size_t n, std::size_t s) {
  shift_pass(x, b, y, n, s);
}
XGRAD_CLONES float row_sum(const float* x, std::size_t n) { return sum_pass(x, n); }
XGRAD_CLONES double row_sum(const double* x, std::size_t n) { return sum_pass(x, n); }
XGRAD_CLONES float row_dot(const float* a, const float* b, std::size_t n, std::size_t s) { return dot_pass(a, b, n, s); }
XGRAD_CLONES double row_dot(const double* a, const double* b, std::size_t n, std::size_t s) {
  return dot_pass(a, b, n, s);
}
XGRAD_CLONES void row_softmax_vjp(const float* y, const float* g, float s, float* z, std::size_t n, std::size_t st) {
  softmax_vjp_pass(y, g, s, z, n, st);
}
XGRAD_CLONES void row_softmax_vjp(const double* y, const double* g, double s, double* z, std::size_t n,
                                  std::size_t st) {
  softmax_vjp_pass(y, g, s, z, n, st);
}

}  // namespace xgrad::detail
