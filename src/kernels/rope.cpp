// RoPE (NEOX pairing, optional IMROPE sections). Scalar only: per call it costs R/2 sincos and
// 6 flops per rotated pair and head, negligible next to the projections around it.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>

#include "core/detmath.h"
#include "core/error.h"

namespace invar {

namespace {

// YaRN's correction dimension: the pair index whose wavelength turns `turns` times over n_orig.
double yarn_corr_dim(int64_t n_rot, int64_t n_orig, double turns, double base) {
  constexpr double kTwoPi = 6.28318530717958647692;
  return double(n_rot) * det_log_d(double(n_orig) / (turns * kTwoPi)) / (2.0 * det_log_d(base));
}

// f.inv_freq[j] *= the scaling's multiplier of pair j (RopeScaling's formula); f.mscale set.
void rope_scale_freqs(const RopeConfig& cfg, RopeFreqs& f) {
  const RopeScaling& sc = cfg.scaling;
  if (sc.type == RopeScalingType::none) return;
  INVAR_CHECK(sc.factor > 0.0, "rope: scaling factor must be positive");
  const double fs = 1.0 / sc.factor;
  if (sc.type == RopeScalingType::linear) {
    for (double& v : f.inv_freq) v *= fs;
    f.mscale = sc.mscale;
    return;
  }
  INVAR_CHECK(sc.n_ctx_orig > 0, "rope: yarn needs the original context length");
  const double lo = std::max(
      0.0, std::floor(yarn_corr_dim(cfg.n_rot, sc.n_ctx_orig, sc.beta_fast, cfg.freq_base)));
  const double hi =
      std::min(double(cfg.n_rot - 1),
               std::ceil(yarn_corr_dim(cfg.n_rot, sc.n_ctx_orig, sc.beta_slow, cfg.freq_base)));
  const double width = std::max(0.001, hi - lo);
  for (size_t j = 0; j < f.inv_freq.size(); ++j) {
    const double ramp = std::min(1.0, std::max(0.0, (double(j) - lo) / width));
    const double mix = (1.0 - ramp) * sc.ext_factor;
    f.inv_freq[j] *= fs * (1.0 - mix) + mix;
  }
  f.mscale = sc.mscale;
}

}  // namespace

RopeFreqs rope_freqs_build(const RopeConfig& cfg) {
  INVAR_CHECK(cfg.n_rot > 0 && cfg.n_rot % 2 == 0 && cfg.n_rot <= cfg.head_dim,
              "rope: n_rot must be even and in (0, head_dim]");
  INVAR_CHECK(cfg.freq_base > 0.0, "rope: freq_base must be positive");
  RopeFreqs f;
  f.cfg = cfg;
  const int64_t half = cfg.n_rot / 2;
  f.inv_freq.resize(size_t(half));
  f.rotated.assign(size_t(half), 1);
  f.axis.assign(size_t(half), 0);
  for (int64_t j = 0; j < half; ++j)
    f.inv_freq[size_t(j)] = det_pow(cfg.freq_base, -2.0 * double(j) / double(cfg.n_rot));
  rope_scale_freqs(cfg, f);
  if (cfg.imrope) {
    const auto& sec = cfg.sections;
    const int64_t total = int64_t(sec[0]) + sec[1] + sec[2] + sec[3];
    INVAR_CHECK(total > 0, "rope: IMROPE sections sum to zero");
    // ggml_mrope_cache_init (imrope): sector = j mod Σsections picks t, h or w by sector mod 3
    // inside that section's 3·s_c range; the rest take e, which is 0 for text.
    for (int64_t j = 0; j < half; ++j) {
      const int64_t sector = j % total;
      const bool t = sector % 3 == 0 && sector < 3 * int64_t(sec[0]);
      const bool h = sector % 3 == 1 && sector < 3 * int64_t(sec[1]);
      const bool w = sector % 3 == 2 && sector < 3 * int64_t(sec[2]);
      f.rotated[size_t(j)] = (t || h || w) ? 1 : 0;
      f.axis[size_t(j)] = h ? 1 : w ? 2 : 0;
    }
  }
  return f;
}

namespace {

// Pair j of heads x[n_heads][D] rotated by (c, s).
// (x_j, x_{j+R/2}) ← (x_j·c − x_{j+R/2}·s, x_j·s + x_{j+R/2}·c), products rounded, then added.
void rotate_pair(float* x, int64_t n_heads, int64_t d, int64_t half, int64_t j, float c, float s) {
  for (int64_t hh = 0; hh < n_heads; ++hh) {
    float* xh = x + hh * d;
    const float x0 = xh[j], x1 = xh[j + half];
    const float a = x0 * c, b = x1 * s, e = x0 * s, g = x1 * c;
    xh[j] = a - b;
    xh[j + half] = e + g;
  }
}

// Every rotated pair j of q[nq][D] and k[nk][D] (nk may be 0), one sincos per pair.
void rope_pairs(const RopeFreqs& f, float* q, int64_t nq, float* k, int64_t nk,
                const RopePos& pos) {
  const int64_t d = f.cfg.head_dim;
  const int64_t half = f.cfg.n_rot / 2;
  // An IMROPE pair on the e component turns by 0: cos = mscale, sin = 0 (ggml scales it too).
  const float m = float(f.mscale);
  for (int64_t j = 0; j < half; ++j) {
    if (!f.rotated[size_t(j)]) {
      if (f.mscale != 1.0) {
        rotate_pair(q, nq, d, half, j, m, 0.0f);
        rotate_pair(k, nk, d, half, j, m, 0.0f);
      }
      continue;
    }
    const int64_t p = pos[f.axis[size_t(j)]];
    double sd, cd;
    det_sincos(double(p) * f.inv_freq[size_t(j)], &sd, &cd);
    const float s = float(sd * f.mscale), c = float(cd * f.mscale);
    rotate_pair(q, nq, d, half, j, c, s);
    rotate_pair(k, nk, d, half, j, c, s);
  }
}

}  // namespace

Rope2d rope_2d_build(int64_t head_dim, double freq_base) {
  INVAR_CHECK(head_dim > 0 && head_dim % 4 == 0, "rope_2d: head_dim must be a multiple of 4");
  INVAR_CHECK(freq_base > 0.0, "rope_2d: freq_base must be positive");
  Rope2d f;
  f.head_dim = head_dim;
  const int64_t quarter = head_dim / 4;
  f.inv_freq.resize(size_t(quarter));
  for (int64_t j = 0; j < quarter; ++j)
    f.inv_freq[size_t(j)] = det_pow(freq_base, -4.0 * double(j) / double(head_dim));
  return f;
}

void rope_2d_apply_qk(const Rope2d& f, float* q, int64_t nq, float* k, int64_t nk, int64_t y,
                      int64_t x) {
  const int64_t d = f.head_dim, half = d / 2, quarter = d / 4;
  for (int64_t j = 0; j < half; ++j) {
    const bool row = j < quarter;
    const double theta = double(row ? y : x) * f.inv_freq[size_t(row ? j : j - quarter)];
    double sd, cd;
    det_sincos(theta, &sd, &cd);
    const float s = float(sd), c = float(cd);
    rotate_pair(q, nq, d, half, j, c, s);
    rotate_pair(k, nk, d, half, j, c, s);
  }
}

void rope_apply_ref(const RopeFreqs& f, float* x, int64_t n_heads, int64_t pos) {
  rope_pairs(f, x, n_heads, nullptr, 0, {pos, pos, pos});
}

void rope_apply_qk(const RopeFreqs& f, float* q, int64_t nq, float* k, int64_t nk, int64_t pos) {
  rope_pairs(f, q, nq, k, nk, {pos, pos, pos});
}

void rope_apply_qk(const RopeFreqs& f, float* q, int64_t nq, float* k, int64_t nk,
                   const RopePos& pos) {
  rope_pairs(f, q, nq, k, nk, pos);
}

void rope_apply(const RopeFreqs& f, float* x, int64_t n_heads, int64_t pos) {
  rope_apply_ref(f, x, n_heads, pos);
}

}  // namespace invar
