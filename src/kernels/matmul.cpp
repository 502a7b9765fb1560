// Matrix product: the scalar reference of the canonical order, embedding rows, and the dispatch
// to the SIMD paths over the packed panels (matmul_packed.h).
#include "kernels/matmul.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/matmul_packed.h"

namespace invar {
namespace {

// Q8_0 block b of a row: its F16 scale and 32 quants.
struct Q8Block {
  uint16_t d;
  int8_t q[kQ8Block];
};
static_assert(sizeof(Q8Block) == kQ8BlockBytes);

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
    case DType::Q8_0: {
      for (int64_t b = 0; b < K / kQ8Block; ++b) {
        Q8Block blk;
        std::memcpy(&blk, row + b * kQ8BlockBytes, sizeof blk);
        const float d = f16_to_f32(blk.d);
        // d·q is exact in F32 (≤ 11 + 8 significant bits): the weight the chain sees.
        for (int64_t j = 0; j < kQ8Block; ++j) use(b * kQ8Block + j, d * float(blk.q[j]));
      }
      return;
    }
  }
  INVAR_CHECK(false, "unknown dtype");
}

// The canonical order, scalar: for each output, acc = fma(w[n][k], x[m][k], acc), k ascending,
// from +0. Outputs n in [n0, n1) of every row.
void matmul_scalar_range(const Matrix& w, const float* x, int64_t m, float* y, int64_t n0,
                         int64_t n1) {
  const int64_t K = w.k(), N = w.n();
  for (int64_t n = n0; n < n1; ++n) {
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * K;
      float acc = 0.0f;
      row_each(w, n, [&](int64_t k, float wk) { acc = std::fma(wk, xr[k], acc); });
      y[r * N + n] = acc;
    }
  }
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
  row_each(*this, n, [&](int64_t k, float wk) { out[k] = wk; });
}

void matmul_ref(const Matrix& w, const float* x, int64_t m, float* y) {
  INVAR_CHECK(m >= 0);
  matmul_scalar_range(w, x, m, y, 0, w.n());
}

int64_t matmul_scratch_floats(int n_threads) {
  return kMatmulScratchFloats * n_threads;
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool,
            std::span<float> scratch) {
  INVAR_CHECK(m >= 0);
  if (m == 0) return;
  const IsaKernels* isa = isa_kernels();
  const auto* packed = static_cast<const MatmulPacked*>(w.packed.get());
  if (isa == nullptr || packed == nullptr) {
    // Without matrix_prepare() the scalar chain runs: the same bits, only slower.
    pool.parallel_for(
        w.n(), [&](int64_t b, int64_t e, int) { matmul_scalar_range(w, x, m, y, b, e); }, kPanel);
    return;
  }
  INVAR_CHECK(packed->k == w.k() && packed->n == w.n() && packed->type == w.type(),
              "packed layout does not match its matrix");
  INVAR_CHECK(int64_t(scratch.size()) >= matmul_scratch_floats(pool.size()),
              "matmul: scratch of " + std::to_string(scratch.size()) + " floats, needs " +
                  std::to_string(matmul_scratch_floats(pool.size())));
  // Threads take whole groups of 4 panels (64 outputs): a multiple of every tile width.
  pool.parallel_for(
      packed->n_panels,
      [&](int64_t b, int64_t e, int ti) {
        isa->matmul_panels(*packed, x, m, y, b, e, scratch.data() + ti * kMatmulScratchFloats);
      },
      4);
}

void matmul(const Matrix& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  std::vector<float> scratch(size_t(matmul_scratch_floats(pool.size())));
  matmul(w, x, m, y, pool, scratch);
}

}  // namespace invar
