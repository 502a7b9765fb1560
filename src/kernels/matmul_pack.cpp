// Builds the packed panel layout (matmul_packed.h) from a matrix in the file's row-major layout.
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/matmul_packed.h"

namespace invar {
namespace {

// Copies element-sized items of row-major rows [N][K] into panels [K][16], zero-padding rows >= N.
template <class E>
void pack_elements(const E* src, int64_t k, int64_t n, MatmulPacked& pk) {
  for (int64_t p = 0; p < pk.n_panels; ++p) {
    E* dst = reinterpret_cast<E*>(pk.bytes.get() + p * pk.panel_bytes);
    for (int64_t j = 0; j < kPanel; ++j) {
      const int64_t row = p * kPanel + j;
      if (row >= n) {
        for (int64_t i = 0; i < k; ++i) dst[i * kPanel + j] = E{};
        continue;
      }
      const E* s = src + row * k;
      for (int64_t i = 0; i < k; ++i) dst[i * kPanel + j] = s[i];
    }
  }
}

}  // namespace

void matrix_prepare(Matrix& w) {
  // Quantised weights are read in place (qmatmul.h): nothing to build.
  if (w.packed || dtype_is_quantized(w.type())) return;
  auto pk = std::make_shared<MatmulPacked>();
  pk->type = w.type();
  pk->k = w.k();
  pk->n = w.n();
  pk->n_panels = (w.n() + kPanel - 1) / kPanel;
  switch (w.type()) {
    case DType::F32:
      pk->panel_bytes = w.k() * kPanel * 4;
      break;
    case DType::F16:
    case DType::BF16:
      pk->panel_bytes = w.k() * kPanel * 2;
      break;
    default:
      INVAR_CHECK(false, "matrix_prepare: unexpected dtype");
  }
  // 64-byte alignment: each panel step of F32 weights is one cache line.
  const size_t total = size_t(pk->n_panels * pk->panel_bytes);
  void* mem = std::aligned_alloc(64, (total + 63) / 64 * 64);
  INVAR_CHECK(mem != nullptr, "out of memory packing a " + std::to_string(total) + "-byte matrix");
  pk->bytes = {static_cast<uint8_t*>(mem), &std::free};
  switch (w.type()) {
    case DType::F32:
      pack_elements(static_cast<const uint32_t*>(w.data()), w.k(), w.n(), *pk);
      break;
    case DType::F16:
    case DType::BF16:
      pack_elements(static_cast<const uint16_t*>(w.data()), w.k(), w.n(), *pk);
      break;
    default:
      break;
  }
  w.packed = std::move(pk);
}

int64_t matrix_copy_bytes(const Matrix& w) {
  const auto* pk = static_cast<const MatmulPacked*>(w.packed.get());
  return pk ? pk->n_panels * pk->panel_bytes : 0;
}

}  // namespace invar
