// Causal depthwise conv + SiLU: scalar reference and dispatch. Channels are independent; each
// keeps its window (state column, then the new input) and runs the FMA chain j = 0..Kc−1.
#include "kernels/conv.h"

#include <cmath>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"

namespace invar {

namespace {

void check_kernel(int64_t kc) {
  INVAR_CHECK(kc >= 1 && kc <= 16, "conv1d_silu: kernel size must be in [1, 16]");
}

// Channels [ch0, ch1) of the [T][C] rows.
void conv1d_silu_ref_channels(const float* x, const float* w, float* state, int64_t t, int64_t c,
                              int64_t kc, float* y, int64_t ch0, int64_t ch1) {
  float win[16];
  for (int64_t ch = ch0; ch < ch1; ++ch) {
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

void conv1d_silu_channels(const float* x, const float* w, float* state, int64_t t, int64_t c,
                          int64_t kc, float* y, int64_t ch0, int64_t ch1) {
  if (const IsaKernels* k = isa_kernels())
    return k->conv1d_silu(x, w, state, t, c, kc, y, ch0, ch1);
  conv1d_silu_ref_channels(x, w, state, t, c, kc, y, ch0, ch1);
}

}  // namespace

void conv1d_silu_ref(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                     float* y) {
  check_kernel(kc);
  conv1d_silu_ref_channels(x, w, state, t, c, kc, y, 0, c);
}

void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y) {
  check_kernel(kc);
  conv1d_silu_channels(x, w, state, t, c, kc, y, 0, c);
}

void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y, ThreadPool& pool) {
  check_kernel(kc);
  // A decode step's few tokens cost less to run here than to hand out: only prefill splits.
  const int64_t grain = t >= 8 ? 16 : c;
  pool.parallel_for(
      c, [&](int64_t a, int64_t b, int) { conv1d_silu_channels(x, w, state, t, c, kc, y, a, b); },
      grain);
}

}  // namespace invar
