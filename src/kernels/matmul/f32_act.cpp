// The scalar reference of the quantised product's canonical order (f32_act.h): each weight block
// dequantised by dequant_row, 16 lane accumulators per output, the reduce.h tree.
#include "kernels/matmul/f32_act.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "kernels/reduce.h"
#include "quant/dequant.h"

namespace invar {

void qmatmul_ref_range(const QuantView& w, const float* x, int64_t m, float* y, int64_t n0,
                       int64_t n1) {
  constexpr int64_t kRows = 16;  // activation rows sharing one dequantised block
  const int64_t bs = dtype_block_size(w.type), bb = dtype_block_bytes(w.type);
  float wb[256];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    for (int64_t r0 = 0; r0 < m; r0 += kRows) {
      const int64_t rows = std::min(kRows, m - r0);
      float acc[kRows][16] = {};
      for (int64_t b = 0; b < w.k / bs; ++b) {
        dequant_row(w.type, row + b * bb, wb, bs);
        for (int64_t r = 0; r < rows; ++r) {
          const float* xb = x + (r0 + r) * w.k + b * bs;
          for (int64_t j = 0; j < bs; ++j) acc[r][j % 16] = std::fma(wb[j], xb[j], acc[r][j % 16]);
        }
      }
      for (int64_t r = 0; r < rows; ++r) y[(r0 + r) * w.n + n] = reduce_lanes_tree(acc[r]);
    }
  }
}

int64_t qprefill_panel_floats() {
  static const int64_t floats = [] {
    const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);  // per core; 0 or −1 when unknown
    if (l2 <= 0) return kQPanelFloats;
    return std::min<int64_t>(kQPanelFloats, int64_t(l2) / 4 * 3 / 4);
  }();
  return floats;
}

}  // namespace invar
