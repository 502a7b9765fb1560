// Row norms. Every sum of squares uses the canonical row reduction (rule N1): 16 lane
// accumulators (element i goes to lane i % 16, added in index order), then the fixed pairwise
// tree ((l0+l8)+(l4+l12))... identical in the scalar path and every SIMD width; see reduce.h.
#pragma once

#include <cstdint>

namespace invar {

// y[M][N] = x / sqrt(mean(x²) + eps) * w[N]   (in-place allowed: y == x)
void rmsnorm_rows(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y);
void rmsnorm_rows_ref(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y);

// y[M][N] = x / max(sqrt(Σx²), eps)
void l2norm_rows(const float* x, int64_t m, int64_t n, float eps, float* y);
void l2norm_rows_ref(const float* x, int64_t m, int64_t n, float eps, float* y);

// Gated RMSNorm of Gated DeltaNet: y[M][N] = rmsnorm(x, w) * silu(z)
void rmsnorm_gated_rows(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                        float eps, float* y);
void rmsnorm_gated_rows_ref(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                            float eps, float* y);

// LayerNorm (ggml_norm, then weight and bias): with μ = Σx/N (canonical sum) and c = x − μ,
// y[M][N] = (c · 1/sqrt(Σc²/N + eps)) · w[N] + b[N]   (in-place allowed: y == x)
void layernorm_rows(const float* x, const float* w, const float* b, int64_t m, int64_t n, float eps,
                    float* y);
void layernorm_rows_ref(const float* x, const float* w, const float* b, int64_t m, int64_t n,
                        float eps, float* y);

}  // namespace invar
