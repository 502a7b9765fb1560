// Matrix product: the scalar reference of the canonical order, embedding rows, and the dispatch
// to the SIMD paths over the packed panels (matmul_packed.h).
#include "kernels/matmul.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dequant.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/matmul_packed.h"

namespace invar {
namespace {

// The canonical order, scalar: for each output, acc = fma(w[n][k], x[m][k], acc), k ascending,
// from +0. Outputs n in [n0, n1) of every row. Each weight row is widened once into a K-float
// buffer (never the whole matrix) and then read by every row of x.
void matmul_scalar_range(const Matrix& w, const float* x, int64_t m, float* y, int64_t n0,
                         int64_t n1) {
  const int64_t K = w.k(), N = w.n();
  std::vector<float> buf(static_cast<size_t>(K));
  for (int64_t n = n0; n < n1; ++n) {
    const float* wr = buf.data();
    if (w.type() == DType::F32) {
      wr = static_cast<const float*>(w.data()) + n * K;
    } else {
      w.row_to_f32(n, buf.data());
    }
    for (int64_t r = 0; r < m; ++r) {
      const float* xr = x + r * K;
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) acc = std::fma(wr[k], xr[k], acc);
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
  // Every type through ggml's dequantisation (core/dequant.h); for F16/BF16/Q8_0 these are the
  // exact values the SIMD paths widen to.
  dequant_row(type_, static_cast<const uint8_t*>(data_) + n * dtype_row_bytes(type_, k_), out, k_);
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
