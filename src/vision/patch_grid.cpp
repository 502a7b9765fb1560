#include "vision/patch_grid.h"

#include <string>

#include "core/error.h"

namespace invar {

PatchGrid patch_grid_of(const VisionHparams& hp, int64_t width, int64_t height) {
  const int64_t unit = hp.patch * hp.merge;
  if (width <= 0 || height <= 0 || width % unit != 0 || height % unit != 0)
    throw Error("image of " + std::to_string(width) + " × " + std::to_string(height) +
                " pixels: each side must be a positive multiple of " + std::to_string(unit) +
                " (patch " + std::to_string(hp.patch) + " × merge " + std::to_string(hp.merge) +
                ")");
  PatchGrid g;
  g.rows = height / hp.patch;
  g.cols = width / hp.patch;
  g.y.reserve(size_t(g.n_tokens()));
  g.x.reserve(size_t(g.n_tokens()));
  for (int64_t by = 0; by < g.rows; by += hp.merge)
    for (int64_t bx = 0; bx < g.cols; bx += hp.merge)
      for (int64_t dy = 0; dy < hp.merge; ++dy)
        for (int64_t dx = 0; dx < hp.merge; ++dx) {
          g.y.push_back(by + dy);
          g.x.push_back(bx + dx);
        }
  return g;
}

void patch_grid_pixels(const VisionHparams& hp, const PatchGrid& g, const VisionImage& img,
                       float* out) {
  const int64_t p = hp.patch, K = 3 * p * p;
  INVAR_CHECK(img.width == g.cols * p && img.height == g.rows * p &&
                  int64_t(img.chw.size()) == 3 * img.width * img.height,
              "patch_grid_pixels: image does not match its grid");
  for (int64_t t = 0; t < g.n_tokens(); ++t) {
    float* row = out + t * K;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t ky = 0; ky < p; ++ky) {
        const float* src = img.chw.data() + (c * img.height + g.y[size_t(t)] * p + ky) * img.width +
                           g.x[size_t(t)] * p;
        for (int64_t kx = 0; kx < p; ++kx) row[(c * p + ky) * p + kx] = src[kx];
      }
  }
}

namespace {

// Source coordinate of output i of n over a grid side G with aligned corners: i·(G−1)/(n−1).
struct Tap {
  int64_t lo, hi;  // neighbouring grid lines (hi = lo + 1, clamped to G − 1)
  double frac;     // weight of hi
};

Tap tap_of(int64_t i, int64_t n, int64_t G) {
  const double s = n > 1 ? double(i) * double(G - 1) / double(n - 1) : 0.0;
  int64_t lo = int64_t(s);
  if (lo > G - 1) lo = G - 1;
  return {lo, lo + 1 < G ? lo + 1 : G - 1, s - double(lo)};
}

}  // namespace

void patch_grid_add_pos(const VisionHparams& hp, const PatchGrid& g,
                        const std::vector<float>& table, float* out) {
  const int64_t C = hp.n_embd, G = hp.pos_side;
  INVAR_CHECK(int64_t(table.size()) == G * G * C, "patch_grid_add_pos: table size");
  for (int64_t t = 0; t < g.n_tokens(); ++t) {
    const Tap ty = tap_of(g.y[size_t(t)], g.rows, G), tx = tap_of(g.x[size_t(t)], g.cols, G);
    // The four weights in double, each rounded once to float.
    const float w00 = float((1.0 - ty.frac) * (1.0 - tx.frac));
    const float w01 = float((1.0 - ty.frac) * tx.frac);
    const float w10 = float(ty.frac * (1.0 - tx.frac));
    const float w11 = float(ty.frac * tx.frac);
    const float* e00 = table.data() + (ty.lo * G + tx.lo) * C;
    const float* e01 = table.data() + (ty.lo * G + tx.hi) * C;
    const float* e10 = table.data() + (ty.hi * G + tx.lo) * C;
    const float* e11 = table.data() + (ty.hi * G + tx.hi) * C;
    float* o = out + t * C;
    for (int64_t c = 0; c < C; ++c) {
      const float a = w00 * e00[c], b = w01 * e01[c], d = w10 * e10[c], e = w11 * e11[c];
      const float pos = ((a + b) + d) + e;
      o[c] = o[c] + pos;
    }
  }
}

}  // namespace invar
