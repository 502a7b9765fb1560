// Matrix products y = x·Wᵀ for weights of type F32, F16, BF16, Q8_0 and F32 activations.
//
// Canonical order (rule N1): each output y[m][n] = Σ_k W[n][k]·x[m][k] accumulates over k in a
// fixed order that depends on K only, never on M, on the tiling in M or N, on the thread count
// or on the vector width. Vectorise across outputs, not across k. Q8_0 (rule N7): the integer
// dot product of each 32-block is exact; the block results are accumulated in block order.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"
#include "core/thread_pool.h"

namespace invar {

// A weight matrix of GGUF shape {K, N}: N rows of K elements, row-major, `data` in the file's
// dtype (not owned; usually the GGUF mapping). prepare() may build a packed copy for speed.
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
  // Implementation-private packed layout (nullptr until built at load time).
  std::shared_ptr<const void> packed;

 private:
  DType type_ = DType::F32;
  int64_t k_ = 0, n_ = 0;
  const void* data_ = nullptr;
};

// Builds the packed layout if the fast path wants one (call once at load time).
void matrix_prepare(Matrix& w);

// y[M][N] = x[M][K] · Wᵀ. Dispatches on simd_active(); splits N (outputs) across the pool.
void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool);
// The scalar reference of the same canonical order (bit-identical to matmul()).
void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y);

}  // namespace invar
