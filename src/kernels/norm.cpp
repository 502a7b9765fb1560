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
