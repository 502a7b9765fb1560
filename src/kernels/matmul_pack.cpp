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

// Q8_0 rows [N][K/32 blocks of {d, q[32]}] into panel blocks {d[16], q[32][16]}; padded rows get
// d = 0 and q = 0 (weight +0).
void pack_q8(const uint8_t* src, int64_t k, int64_t n, MatmulPacked& pk) {
  const int64_t n_blocks = k / kQ8Block;
  const int64_t row_bytes = n_blocks * kQ8BlockBytes;
  std::memset(pk.bytes.get(), 0, size_t(pk.n_panels * pk.panel_bytes));
  for (int64_t p = 0; p < pk.n_panels; ++p) {
    uint8_t* pan = pk.bytes.get() + p * pk.panel_bytes;
    for (int64_t j = 0; j < kPanel && p * kPanel + j < n; ++j) {
      const uint8_t* row = src + (p * kPanel + j) * row_bytes;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* blk = row + b * kQ8BlockBytes;
        uint8_t* dst = pan + b * kQ8PanelBlockBytes;
        std::memcpy(dst + j * 2, blk, 2);
        int8_t* q = reinterpret_cast<int8_t*>(dst + kPanel * 2);
        const int8_t* qs = reinterpret_cast<const int8_t*>(blk + 2);
        for (int64_t i = 0; i < kQ8Block; ++i) q[i * kPanel + j] = qs[i];
      }
    }
  }
}

}  // namespace

void matrix_prepare(Matrix& w) {
  if (w.packed) return;
  // The other block-quantised types have no packed layout yet: matmul() runs their scalar chain.
  if (w.type() != DType::F32 && w.type() != DType::F16 && w.type() != DType::BF16 &&
      w.type() != DType::Q8_0)
    return;
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
    case DType::Q8_0:
      pk->panel_bytes = w.k() / kQ8Block * kQ8PanelBlockBytes;
      break;
    default:
      return;
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
    case DType::Q8_0:
      pack_q8(static_cast<const uint8_t*>(w.data()), w.k(), w.n(), *pk);
      break;
    default:
      return;
  }
  w.packed = std::move(pk);
}

}  // namespace invar
