// Private to the matmul kernels: the packed weight layout built by matrix_prepare() and the
// scratch its per-ISA entry points (IsaKernels::matmul_panels, kernels_isa.h) need.
//
// Layout: the N rows of W are grouped into panels of kPanel = 16 consecutive rows (the last one
// zero-padded). A panel stores, for k = 0..K-1, the 16 weights w[n0..n0+15][k] next to each other,
// so one 16-lane vector load (or two 8-lane loads) fetches the k-th weight of 16 outputs:
//   F32        float    [K][16]
//   F16, BF16  uint16_t [K][16]                        (the file's bits, converted on load)
// The width is 16 whatever the SIMD level, so one packed copy serves scalar, AVX2 and AVX-512 and
// `simd_set` can change the level after load. Memory: one copy the size of the weights.
#pragma once

#include <cstdint>
#include <memory>

#include "core/dtype.h"

namespace invar {

inline constexpr int64_t kPanel = 16;

struct MatmulPacked {
  DType type = DType::F32;
  int64_t k = 0, n = 0;
  int64_t n_panels = 0;                                               // ceil(n / 16)
  int64_t panel_bytes = 0;                                            // bytes of one panel
  std::unique_ptr<uint8_t, void (*)(void*)> bytes{nullptr, nullptr};  // [n_panels][panel_bytes]

  const uint8_t* panel(int64_t p) const { return bytes.get() + p * panel_bytes; }
};

// Floats of the buffer a matmul thread widens its weight panels into (the many-rows path of a
// non-F32 matrix): the largest tile group of any ISA, kTilePanels × kKBlock × kPanel.
inline constexpr int64_t kMatmulScratchFloats = 2 * 256 * kPanel;

}  // namespace invar
