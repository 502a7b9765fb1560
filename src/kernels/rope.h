// Rotary position embedding, NEOX pairing: dims (j, j + R/2) for j < R/2 rotate by
// θ_j = pos · base^(−2j/R); dims R..D−1 pass through. Qwen3.5 (IMROPE) picks the position
// component of pair j from its section (t/h/w/e); for text t = h = w = pos and e = 0, so pairs
// that fall to e are not rotated (qwen3next-math.md, "RoPE = IMROPE").
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace invar {

struct RopeConfig {
  int64_t head_dim = 0;  // [D]
  int64_t n_rot = 0;     // [R] even, ≤ D
  double freq_base = 10000.0;
  bool imrope = false;
  std::array<int32_t, 4> sections{};  // imrope only
};

// Per-pair inverse frequencies and section flags, built once at load (det_pow, no libm).
struct RopeFreqs {
  RopeConfig cfg;
  std::vector<double> inv_freq;  // [R/2] base^(−2j/R)
  std::vector<uint8_t> rotated;  // [R/2] 0 if the pair takes the e component (not rotated)
  std::vector<uint8_t> axis;     // [R/2] rotated pairs: the position component, 0 t, 1 h, 2 w
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
