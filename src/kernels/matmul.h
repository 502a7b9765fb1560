// Matrix products y = x·Wᵀ for weights of every DType and F32 activations.
//
// Canonical order for F32, F16, BF16 (rule N1): each output y[m][n] = Σ_k W[n][k]·x[m][k]
// accumulates over k in a fixed order that depends on K only, never on M, on the tiling in M or N,
// on the thread count or on the vector width. Vectorise across outputs, not across k. Concretely,
// every output is one sequential FMA chain
//     acc = +0;  for k = 0 .. K-1:  acc = fma(w[n][k], x[m][k], acc);  y[m][n] = acc
// with w[n][k] the exact F32 value of the weight (F16/BF16 widen exactly). The scalar reference
// runs this chain per output; the AVX2 and AVX-512 paths run 8 or 16 such chains side by side,
// one per lane, so they give the same bits for any M, tile shape or thread split.
//
// Quantised weights (rule N7: Q8_0, the K-quants, IQ4, the legacy quants) have their own
// canonical order, 16 lane accumulators over k per output and a fixed tree (kernels/qmatmul.h,
// docs/numerics.md), and are read in place from the file: the weights are dequantised exactly
// (dequant_row's values) in registers or in a small per-thread buffer, never into a copy.
// Activations are not quantised (unlike llama.cpp's integer dot products), which would add an
// error that F32 weights do not have.
//
// Memory: every type is read in place, where `data` points (the GGUF mapping): F32/F16/BF16
// blocks of 16 rows × 16 steps of k are transposed in registers (matmul_rows.h), so no copy of a
// matrix exists besides a per-thread panel buffer in the caller's scratch.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace invar {

// A weight matrix of GGUF shape {K, N}: N rows of K elements, row-major, `data` in the file's
// dtype (not owned; usually the GGUF mapping), used as it is.
class Matrix {
 public:
  Matrix() = default;
  Matrix(DType type, int64_t k, int64_t n, const void* data);
  DType type() const { return type_; }
  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  const void* data() const { return data_; }
  // Row n dequantised to F32 (for embeddings): out[K].
  void row_to_f32(int64_t n, float* out) const;

 private:
  DType type_ = DType::F32;
  int64_t k_ = 0, n_ = 0;
  const void* data_ = nullptr;
};

// Floats of working memory matmul() needs on a pool of n_threads (weight panels packed to F32 and
// quantised weights' lane accumulators, one block per thread).
int64_t matmul_scratch_floats(int n_threads);

// y[M][N] = x[M][K] · Wᵀ (rows contiguous, strides K and N). Dispatches on simd_active(); splits
// N (outputs) across the pool in groups of 64, so every output is computed by one thread.
// `scratch` holds at least matmul_scratch_floats(pool.size()) floats; the caller sizes it once,
// so the call allocates nothing.
void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool,
            std::span<float> scratch);
// The same with scratch allocated for this call (tests and tools).
void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool);

// One product of a batch for matmul_jobs(): y[m][w.n()] = x[m][w.k()] · wᵀ.
struct MatmulJob {
  const Matrix* w;
  const float* x;
  int64_t m;
  float* y;
};
// Several products in ONE dispatch of the pool: the outputs of all jobs are split across the
// threads by estimated cost (weight bytes plus multiply-adds), so a decode step's small matrices
// (the selected experts, the projections that read the same x) do not each pay a fork/join.
// Every output is computed exactly as matmul() computes it (the same kernel over the same
// aligned output groups), so the bits equal separate calls. Outputs must not overlap inputs.
void matmul_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool, std::span<float> scratch);
// The scalar reference of the same canonical order (bit-identical to matmul()).
void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y);

}  // namespace invar
