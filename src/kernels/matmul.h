// Matrix products y = x·Wᵀ for weights of every DType and F32 activations.
//
// Canonical order (rule N1, docs/numerics.md), the same for every weight type: with w[n][k] the
// exact F32 value of the weight (F16/BF16 widen exactly, quantised types dequantise as ggml's
// dequant_row), lane l (0..15) of output y[m][n] accumulates k = l, l+16, … in ascending order,
//     acc[l] = +0;  for k ≡ l (mod 16):  acc[l] = fma(w[n][k], x[m][k], acc[l])
// and y[m][n] is the fixed 16-lane tree of reduce.h over acc. It depends on K only, never on M,
// on the tiling, on the thread count or on the vector width. Activations are not quantised
// (unlike llama.cpp's integer dot products), which would add an error that F32 weights do not
// have.
//
// Memory: every type is read in place, where `data` points (the GGUF mapping), row by row as the
// file stores it (16 consecutive weights of a row are one vector of the order above); the only
// other memory is a per-thread buffer of a few dequantised rows in the caller's scratch.
#pragma once

#include <cstdint>
#include <span>

#include "core/thread_pool.h"
#include "quant/dtype.h"

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

// Floats of working memory matmul() needs on a pool of n_threads (a few weight rows widened to
// F32 and parked lane accumulators, one block per thread).
int64_t matmul_scratch_floats(int n_threads);

// y[M][N] = x[M][K] · Wᵀ (rows contiguous, strides K and N). Dispatches on simd_active(); splits
// N (outputs) across the pool in groups of 16, so every output is computed by one thread (M ≤ 4:
// balanced while running, as matmul_jobs does).
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
// threads by estimated cost (weight bytes plus multiply-adds); when every job has M ≤ 4 (decode)
// they are cut into pieces of about equal cost that the threads balance while they run
// (ThreadPool::parallel_balanced), since a thread's share of the memory bandwidth, and so its
// speed, is not known in advance. So a decode step's small matrices
// (the selected experts, the projections that read the same x) do not each pay a fork/join.
// Every output is computed exactly as matmul() computes it (the same kernel over the same
// aligned output groups), so the bits equal separate calls. Outputs must not overlap inputs.
void matmul_jobs(std::span<const MatmulJob> jobs, ThreadPool& pool, std::span<float> scratch);
// The scalar reference of the same canonical order (bit-identical to matmul()).
void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y);

// Tests only: balanced (decode) products are cut into pieces of at least `bytes` of weights
// instead of 64 KiB (0: back to that; at most 256 KiB), so that the small matrices of test models
// are shared between threads as a large model's are; and while such a minimum is set, the pieces
// run are counted (the counts start from zero at each call). Never changes a bit (rule N2).
void matmul_piece_bytes_min_set(double bytes);
struct MatmulPieceCounts {
  int64_t by_caller = 0;   // pieces run by the thread that called the product (index 0)
  int64_t by_workers = 0;  // pieces run by the pool's other threads
  int64_t moved = 0;       // pieces a thread ran outside the share it started with (taken over)
};
MatmulPieceCounts matmul_piece_counts();

}  // namespace invar
