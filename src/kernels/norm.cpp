// Row norms: the scalar references and the dispatch. Per row: the canonical Σx² (reduce.h), one
// scale, then per element (x·scale)·w — the same operations in every SIMD variant.
#include "kernels/norm.h"

#include <cmath>

#include "core/detmath.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce.h"

namespace invar {

// scale = 1/sqrt(Σx²/N + eps)
void rmsnorm_rows_ref(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float mean = reduce_sum_sq_ref(xr, n) / float(n);
    const float scale = det_rsqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] * scale) * w[i];
  }
}

// scale = 1/max(sqrt(Σx²), eps)  (ggml_l2_norm)
void l2norm_rows_ref(const float* x, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float norm = std::sqrt(reduce_sum_sq_ref(xr, n));
    const float scale = 1.0f / (norm > eps ? norm : eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = xr[i] * scale;
  }
}

void rmsnorm_gated_rows_ref(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                            float eps, float* y) {
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * n;
    const float* zr = z + r * n;
    float* yr = y + r * n;
    const float mean = reduce_sum_sq_ref(xr, n) / float(n);
    const float scale = det_rsqrt(mean + eps);
    for (int64_t i = 0; i < n; ++i) yr[i] = ((xr[i] * scale) * w[i]) * det_silu(zr[i]);
  }
}

namespace {

// One LayerNorm row with the given canonical sums (the scalar references or their dispatch: the
// same bits either way, reduce.h).
template <typename Sum, typename SumSq>
void layernorm_row(const float* x, const float* w, const float* b, int64_t n, float eps, float* y,
                   Sum sum, SumSq sum_sq) {
  const float mean = sum(x, n) / float(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] - mean;
  const float var = sum_sq(y, n) / float(n);
  const float scale = det_rsqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) {
    const float t = (y[i] * scale) * w[i];
    y[i] = t + b[i];
  }
}

}  // namespace

void layernorm_rows_ref(const float* x, const float* w, const float* b, int64_t m, int64_t n,
                        float eps, float* y) {
  for (int64_t r = 0; r < m; ++r)
    layernorm_row(x + r * n, w, b, n, eps, y + r * n, reduce_sum_ref, reduce_sum_sq_ref);
}

// The row sums dispatch to the SIMD reductions; the element-wise steps are plain IEEE ops.
void layernorm_rows(const float* x, const float* w, const float* b, int64_t m, int64_t n, float eps,
                    float* y) {
  for (int64_t r = 0; r < m; ++r)
    layernorm_row(x + r * n, w, b, n, eps, y + r * n, reduce_sum, reduce_sum_sq);
}

void rmsnorm_rows(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y) {
  if (const IsaKernels* k = isa_kernels()) return k->rmsnorm_rows(x, w, m, n, eps, y);
  rmsnorm_rows_ref(x, w, m, n, eps, y);
}

void l2norm_rows(const float* x, int64_t m, int64_t n, float eps, float* y) {
  if (const IsaKernels* k = isa_kernels()) return k->l2norm_rows(x, m, n, eps, y);
  l2norm_rows_ref(x, m, n, eps, y);
}

void rmsnorm_gated_rows(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                        float eps, float* y) {
  if (const IsaKernels* k = isa_kernels()) return k->rmsnorm_gated_rows(x, w, z, m, n, eps, y);
  rmsnorm_gated_rows_ref(x, w, z, m, n, eps, y);
}

}  // namespace invar
