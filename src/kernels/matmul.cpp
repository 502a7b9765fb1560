// Matrix product: the scalar reference of the canonical order, embedding rows, and the dispatch
// to the SIMD paths, which read every type in place (qmatmul_tiles.h).
#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dequant.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/qmatmul.h"
#include "kernels/reduce.h"

namespace invar {
namespace {

// Weights of row n, k in [0, K), as exact F32 values, handed to `use(k, w)` in order of k.
template <class Use>
inline void row_each(const Matrix& w, int64_t n, Use&& use) {
  const int64_t K = w.k();
  const uint8_t* row = static_cast<const uint8_t*>(w.data()) + n * dtype_row_bytes(w.type(), K);
  switch (w.type()) {
    case DType::F32: {
      const float* r = reinterpret_cast<const float*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, r[k]);
      return;
    }
    case DType::F16: {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, f16_to_f32(r[k]));
      return;
    }
    case DType::BF16: {
      const uint16_t* r = reinterpret_cast<const uint16_t*>(row);
      for (int64_t k = 0; k < K; ++k) use(k, bf16_to_f32(r[k]));
      return;
    }
    default:
      break;
  }
  INVAR_CHECK(false, "row_each on a quantised dtype");
}

QuantView quant_view(const Matrix& w) {
  return {w.type(), static_cast<const uint8_t*>(w.data()), w.k(), w.n(),
          dtype_row_bytes(w.type(), w.k())};
}

// The canonical order, scalar: lane k % 16 of each output accumulates fma(w[n][k], x[m][k], ·)
// in ascending k from +0, then the reduce.h tree. Outputs n in [n0, n1) of every row.
void matmul_scalar_range(const Matrix& w, const float* x, int64_t m, float* y, int64_t n0,
                         int64_t n1) {
  if (dtype_is_quantized(w.type())) return qmatmul_ref_range(quant_view(w), x, m, y, n0, n1);
  const int64_t K = w.k(), N = w.n();
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * K;
      float acc[16] = {};
      row_each(w, n, [&](int64_t k, float wk) { acc[k % 16] = std::fma(wk, xr[k], acc[k % 16]); });
      y[r * N + n] = reduce_lanes_tree(acc);
    }
  }
}

void check_scratch(std::span<float> scratch, int n_threads) {
  INVAR_CHECK(int64_t(scratch.size()) >= matmul_scratch_floats(n_threads),
              "matmul: scratch of " + std::to_string(scratch.size()) + " floats, needs " +
                  std::to_string(matmul_scratch_floats(n_threads)));
}

}  // namespace

Matrix::Matrix(DType type, int64_t k, int64_t n, const void* data)
    : type_(type), k_(k), n_(n), data_(data) {
  INVAR_CHECK(k > 0 && n > 0,
              "matrix shape {" + std::to_string(k) + ", " + std::to_string(n) + "}");
  INVAR_CHECK(k % dtype_block_size(type) == 0, std::string(dtype_name(type)) +
                                                   " matrix with K = " + std::to_string(k) +
                                                   " not a multiple of its block size");
  INVAR_CHECK(data != nullptr);
}

void Matrix::row_to_f32(int64_t n, float* out) const {
  INVAR_CHECK(n >= 0 && n < n_, "row " + std::to_string(n) + " of " + std::to_string(n_));
  // Every type through ggml's dequantisation (core/dequant.h): the exact values the matmul
  // paths use.
  dequant_row(type_, static_cast<const uint8_t*>(data_) + n * dtype_row_bytes(type_, k_), out, k_);
}

void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y) {
  INVAR_CHECK(m >= 0);
  matmul_scalar_range(w, x, m, y, 0, w.n());
}

int64_t matmul_scratch_floats(int n_threads) {
  return kQScratchFloats * n_threads;
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool,
            std::span<float> scratch) {
  INVAR_CHECK(m >= 0);
  if (m == 0) return;
  const IsaKernels* isa = isa_kernels();
  if (isa == nullptr) {
    pool.parallel_for(
        w.n(), [&](int64_t b, int64_t e, int) { matmul_scalar_range(w, x, m, y, b, e); }, 16);
    return;
  }
  check_scratch(scratch, pool.size());
  const int64_t per_thread = matmul_scratch_floats(1);
  const QuantView q = quant_view(w);
  // Threads take whole groups of 16 outputs: a multiple of every kernel's group of rows.
  pool.parallel_for(
      w.n(),
      [&](int64_t b, int64_t e, int ti) {
        isa->qmatmul_rows(q, x, m, y, b, e, scratch.data() + ti * per_thread);
      },
      16);
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  std::vector<float> scratch(size_t(matmul_scratch_floats(pool.size())));
  matmul(w, x, m, y, pool, scratch);
}

}  // namespace invar
