// Causal depthwise conv + SiLU: scalar reference and dispatch. Channels are independent; each
// keeps its window (state column, then the new input) and runs the FMA chain j = 0..Kc−1.
#include "kernels/conv.h"

#include <cmath>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"

namespace invar {

void conv1d_silu_ref(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                     float* y) {
  INVAR_CHECK(kc >= 1 && kc <= 16, "conv1d_silu: kernel size must be in [1, 16]");
  float win[16];
  for (int64_t ch = 0; ch < c; ++ch) {
    for (int64_t j = 0; j + 1 < kc; ++j) win[j] = state[j * c + ch];
    for (int64_t tt = 0; tt < t; ++tt) {
      win[kc - 1] = x[tt * c + ch];
      float acc = 0.0f;
      for (int64_t j = 0; j < kc; ++j) acc = std::fma(win[j], w[ch * kc + j], acc);
      y[tt * c + ch] = det_silu(acc);
      for (int64_t j = 0; j + 1 < kc; ++j) win[j] = win[j + 1];
    }
    for (int64_t j = 0; j + 1 < kc; ++j) state[j * c + ch] = win[j];
  }
}

void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y) {
  INVAR_CHECK(kc >= 1 && kc <= 16, "conv1d_silu: kernel size must be in [1, 16]");
  if (const IsaKernels* k = isa_kernels()) return k->conv1d_silu(x, w, state, t, c, kc, y);
  conv1d_silu_ref(x, w, state, t, c, kc, y);
}

}  // namespace invar
