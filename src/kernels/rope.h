// Rotary position embedding, NEOX pairing: dims (j, j + R/2) for j < R/2 rotate by
// θ_j = pos · base^(−2j/R); dims R..D−1 pass through. Qwen3.5 (IMROPE) picks the position
// component of pair j from its section (t/h/w/e); for text t = h = w = pos and e = 0, so pairs
// that fall to e are not rotated (qwen3next-math.md, "RoPE = IMROPE").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace invar {

// Context-length scaling of the rotation ({arch}.rope.scaling.*), as llama.cpp's rope_yarn and
// HF's _compute_linear/yarn_parameters define it. With f = 1/factor and a pair's ramp
// r_j = clamp((j − low)/max(0.001, high − low), 0, 1), mix_j = (1 − r_j)·ext_factor:
//   θ_j = pos · base^(−2j/R) · (f·(1 − mix_j) + mix_j)      (linear: mix_j = 0)
//   low  = max(0, ⌊R·ln(n_orig/(2π·beta_fast))/(2·ln base)⌋)
//   high = min(R − 1, ⌈R·ln(n_orig/(2π·beta_slow))/(2·ln base)⌉)
// and cos/sin are multiplied by mscale (YaRN's attention factor, 1 + 0.1·ln factor by default);
// an IMROPE pair on the e component (angle 0) is multiplied by it too, as in ggml.
// Pairs below `low` (fast, many turns in the original context) keep their frequency; pairs above
// `high` are interpolated by f.
enum class RopeScalingType : uint8_t { none, linear, yarn };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;      // context multiple (freq_scale = 1/factor)
  int64_t n_ctx_orig = 0;   // yarn: the context the model was trained at
  double ext_factor = 1.0;  // yarn: weight of the extrapolated frequency in the ramp
  double beta_fast = 32.0;  // yarn: correction range, in turns over n_ctx_orig
  double beta_slow = 1.0;
  double mscale = 1.0;  // multiplies cos and sin (resolved from the file's attention factors)
};

struct RopeConfig {
  int64_t head_dim = 0;  // [D]
  int64_t n_rot = 0;     // [R] even, ≤ D
  double freq_base = 10000.0;
  bool imrope = false;
  std::array<int32_t, 4> sections{};  // imrope only
  RopeScaling scaling{};
};

// Per-pair inverse frequencies (scaling applied) and section flags, built once at load (det_pow,
// det_log_d: no libm).
struct RopeFreqs {
  RopeConfig cfg;
  std::vector<double> inv_freq;  // [R/2] base^(−2j/R), times the scaling's per-pair multiplier
  std::vector<uint8_t> rotated;  // [R/2] 0 if the pair takes the e component (not rotated)
  std::vector<uint8_t> axis;     // [R/2] rotated pairs: the position component, 0 t, 1 h, 2 w
  double mscale = 1.0;           // cos/sin multiplier (1 without YaRN: the product is exact)
};

// A token's IMROPE position (t, h, w); e is 0. A text token at position p is (p, p, p); an image
// token at merged row y, column x of an image starting at p is (p, p + y, p + x)
// (llama.cpp mtmd_image_tokens_get_decoder_pos, HF get_rope_index).
using RopePos = std::array<int64_t, 3>;
RopeFreqs rope_freqs_build(const RopeConfig& cfg);

// x[n_heads][D] at position pos, in place. cos/sin come from det_sincos(pos · inv_freq[j]) in
// double, rounded to float: a pure function of (pos, j).
void rope_apply(const RopeFreqs& f, float* x, int64_t n_heads, int64_t pos);
void rope_apply_ref(const RopeFreqs& f, float* x, int64_t n_heads, int64_t pos);
// q[nq][D] and k[nk][D] at the same position: the bits of rope_apply on each, with each pair's
// sincos computed once for both (an attention layer's RoPE is mostly its sincos).
void rope_apply_qk(const RopeFreqs& f, float* q, int64_t nq, float* k, int64_t nk, int64_t pos);
// The same at an IMROPE position: pair j turns by pos[axis[j]] · inv_freq[j]. At (p, p, p) the
// bits of rope_apply_qk at p.
void rope_apply_qk(const RopeFreqs& f, float* q, int64_t nq, float* k, int64_t nk,
                   const RopePos& pos);

// 2-D rotary embedding of the Qwen2-VL / Qwen3-VL vision tower (ggml's GGML_ROPE_TYPE_VISION
// with sections {D/4, D/4, D/4, D/4} and positions (y, x, y, x); HF: VisionRotaryEmbedding(D/2)
// with its frequencies indexed by (row, column)). Pair j rotates dims (j, j + D/2), j < D/2: the
// first D/4 pairs by y · base^(−4j/D), the next D/4 by x · base^(−4(j − D/4)/D).
struct Rope2d {
  int64_t head_dim = 0;          // [D], a multiple of 4
  std::vector<double> inv_freq;  // [D/4] base^(−4j/D)
};
Rope2d rope_2d_build(int64_t head_dim, double freq_base);
// q[nq][D] and k[nk][D] of the patch at row y, column x, in place (cos/sin as rope_apply's).
void rope_2d_apply_qk(const Rope2d& f, float* q, int64_t nq, float* k, int64_t nk, int64_t y,
                      int64_t x);

}  // namespace invar
