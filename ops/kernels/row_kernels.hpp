// The passes of the row ops (softmax, log_softmax, softmax_vjp, and scale as one long row) over one row of n elements at a
// stride, and the optimizers' update. Contiguous rows (stride 1) run vectorised, with exp from ops/kernels/vexp.hpp, and dispatch at
// run time to AVX-512, AVX2 or the baseline x86-64 code (GCC target_clones); strided rows
// run the same formulas element by element (row_exp: see below). Sums are vector reductions: their order is fixed by
// n and the dispatch, so a run repeats its bits on one machine.
#pragma once

#include <cstddef>

namespace xgrad::detail {

// The largest element; NaN entries are ignored or returned (either way a NaN row stays NaN
// through the passes below). -inf for a row of only -inf.
float row_max(const float* x, std::size_t n, std::size_t stride);
double row_max(const double* x, std::size_t n, std::size_t stride);
// y = exp(x - shift); returns the sum of y (y may be x). In GCC x86-64 builds on CPUs with
// AVX-512F, the form of ops/kernels/vexp_avx512.hpp, for contiguous and strided rows alike; elsewhere
// portable_row_exp.
float row_exp(const float* x, float shift, float* y, std::size_t n, std::size_t stride);
double row_exp(const double* x, double shift, double* y, std::size_t n, std::size_t stride);
// row_exp with vexp (ops/kernels/vexp.hpp) in every case, dispatched over the same clones as the other
// passes (strided rows element by element): what row_exp runs without AVX-512F or outside GCC
// x86-64 builds; tests call it directly.
float portable_row_exp(const float* x, float shift, float* y, std::size_t n, std::size_t stride);
double portable_row_exp(const double* x, double shift, double* y, std::size_t n, std::size_t stride);
// y = a * x, and y = x + b (y may be x).
void row_scale(const float* x, float a, float* y, std::size_t n, std::size_t stride);
void row_scale(const double* x, double a, double* y, std::size_t n, std::size_t stride);
void row_shift(const float* x, float b, float* y, std::size_t n, std::size_t stride);
void row_shift(const double* x, double b, double* y, std::size_t n, std::size_t stride);
// The sum of x (a vector reduction, as row_dot's).
float row_sum(const float* x, std::size_t n);
double row_sum(const double* x, std::size_t n);
// The sum of a * b.
float row_dot(const float* a, const float* b, std::size_t n, std::size_t stride);
double row_dot(const double* a, const double* b, std::size_t n, std::size_t stride);
// z = y * (g - s): softmax's VJP once s = row_dot(g, y) is known (z may be y or g).
void row_softmax_vjp(const float* y, const float* g, float s, float* z, std::size_t n, std::size_t stride);
void row_softmax_vjp(const double* y, const double* g, double s, double* z, std::size_t n, std::size_t stride);
// Rotary embedding's rotation of one row of 2h elements (x and y contiguous; y may be x):
// y_i = x_i c_i - x_{i+h} s_i, y_{i+h} = x_{i+h} c_i + x_i s_i, i < h, rounded in that order.
void row_rotate(const float* x, const float* c, const float* s, float* y, std::size_t h);
void row_rotate(const double* x, const double* c, const double* s, double* y, std::size_t h);
// One Adam update of n elements in place (lib/optim.cpp's Adam and AdamW), element by element
// in this order of roundings: p = p decay; m = beta1 m + (1 - beta1) g;
// v = beta2 v + ((1 - beta2) g) g; p = p + (step_size m) / (sqrt(v) / bias_correction2_sqrt + eps).
template <class T>
struct AdamCoefficients {
  T decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps, step_size;
};
void row_adam(float* p, const float* g, float* m, float* v, std::size_t n, const AdamCoefficients<float>& c);
void row_adam(double* p, const double* g, double* m, double* v, std::size_t n, const AdamCoefficients<double>& c);
// Whether the row holds a NaN (a plain loop: the rare path of an all -inf maximum).
template <class T>
bool row_has_nan(const T* x, std::size_t n, std::size_t stride) {
  for (std::size_t i = 0; i < n; ++i) {
    if (x[i * stride] != x[i * stride]) return true;
  }
  return false;
}

}  // namespace xgrad::detail
