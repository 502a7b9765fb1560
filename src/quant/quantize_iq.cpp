// Quantisers of the lattice types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S and IQ1_M
// (layouts: quant/blocks.h, grids: quant/iq_grids.h). No importance matrix: every choice
// minimises the plain squared error.
//
// A scale group (the values sharing one sub-scale: 16 or 32) is coded, for a given real scale λ,
// group of 8 by group of 8: signs from the values (for the types with a parity bit, the smallest
// magnitude takes the flip that makes the count of negatives even), then the grid point nearest
// to |x| / λ (IQ1: to x / λ − δ for both δ = ±1/8, the better kept). λ itself starts from 0.65,
// 0.9 and 1.15 times max |x| / (largest grid value), each followed by one least-squares refit
// λ = Σ x·v / Σ v² over the chosen points (more starts or wider neighbour lists gain under 1% of
// the error at several times the cost). The block's F16 d maps the largest λ to the top
// sub-scale code; each group then takes the code (of the two nearest its λ) whose scale, computed
// exactly as dequantisation will, gives the smaller error, and is coded again with that scale.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "quant/blocks.h"
#include "quant/iq_grids.h"
#include "quant/quantize_fit.h"

namespace invar {

using namespace quant_fit;

namespace {

// A grid as a subset of the lattice levels^dims: for each lattice point, its grid index (or −1)
// and, off the grid, the grid points nearest to it (the candidates when rounding each coordinate
// on its own lands off the grid; ggml's quantisers keep such neighbour lists too).
struct IqLattice {
  int dims = 0;
  std::vector<float> levels;     // distinct coordinate values, increasing
  std::vector<float> mids;       // midpoints between consecutive levels
  std::vector<float> points;     // [n][dims] coordinate values of each grid entry
  std::vector<int> index_of;     // [levels^dims] grid index of a lattice point, −1 off the grid
  std::vector<uint32_t> nb_off;  // [levels^dims + 1] range of the point's neighbours in nb
  std::vector<uint16_t> nb;      // grid indices
};

// Grid entry i's coordinate j: byte j of a little-endian u64 / u32 (IQ1: signed).
template <class T>
float grid_coord(const T* table, int i, int j, bool is_signed) {
  const uint8_t b = uint8_t(table[i] >> (8 * j));
  return is_signed ? float(int8_t(b)) : float(b);
}

template <class T>
IqLattice lattice_make(const T* table, int n, int dims, bool is_signed) {
  IqLattice g;
  g.dims = dims;
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < dims; ++j) {
      const float v = grid_coord(table, i, j, is_signed);
      g.points.push_back(v);
      if (std::find(g.levels.begin(), g.levels.end(), v) == g.levels.end()) g.levels.push_back(v);
    }
  std::sort(g.levels.begin(), g.levels.end());
  const int L = int(g.levels.size());
  for (int k = 0; k + 1 < L; ++k)
    g.mids.push_back(0.5f * (g.levels[size_t(k)] + g.levels[size_t(k) + 1]));
  int size = 1;
  for (int j = 0; j < dims; ++j) size *= L;
  g.index_of.assign(size_t(size), -1);
  auto level_index = [&](float v) {
    return int(std::find(g.levels.begin(), g.levels.end(), v) - g.levels.begin());
  };
  for (int i = 0; i < n; ++i) {
    int code = 0;
    for (int j = dims - 1; j >= 0; --j)
      code = code * L + level_index(g.points[size_t(i * dims + j)]);
    g.index_of[size_t(code)] = i;
  }
  // Neighbours of an off-grid point: the grid points at the two smallest squared distances.
  g.nb_off.assign(size_t(size) + 1, 0);
  std::vector<float> dist(static_cast<size_t>(n));
  for (int code = 0; code < size; ++code) {
    g.nb_off[size_t(code)] = uint32_t(g.nb.size());
    if (g.index_of[size_t(code)] >= 0) continue;
    float c[8];
    for (int j = 0, r = code; j < dims; ++j, r /= L) c[j] = g.levels[size_t(r % L)];
    float d1 = INFINITY, d2 = INFINITY;
    for (int i = 0; i < n; ++i) {
      const float* p = &g.points[size_t(i * dims)];
      float d = 0;
      for (int j = 0; j < dims; ++j) d += (p[j] - c[j]) * (p[j] - c[j]);
      dist[size_t(i)] = d;
      if (d < d1) {
        d2 = d1;
        d1 = d;
      } else if (d > d1 && d < d2) {
        d2 = d;
      }
    }
    for (int i = 0; i < n; ++i)
      if (dist[size_t(i)] <= d2) g.nb.push_back(uint16_t(i));
  }
  g.nb_off[size_t(size)] = uint32_t(g.nb.size());
  return g;
}

// The grid entry nearest to t (dims values, in grid units): exact when each coordinate's nearest
// level gives a grid point, else the best of that point's neighbours.
int lattice_nearest(const IqLattice& g, const float* t) {
  const int L = int(g.levels.size());
  int code = 0;
  for (int j = g.dims - 1; j >= 0; --j) {
    int nearest_level = 0;  // the count of midpoints below t[j] (a tie takes the lower level)
    for (float m : g.mids) nearest_level += t[j] > m;
    code = code * L + nearest_level;
  }
  if (g.index_of[size_t(code)] >= 0) return g.index_of[size_t(code)];
  int best = -1;
  float best_e = INFINITY;
  for (uint32_t k = g.nb_off[size_t(code)]; k < g.nb_off[size_t(code) + 1]; ++k) {
    const float* p = &g.points[size_t(g.nb[k]) * size_t(g.dims)];
    float e = 0;
    for (int j = 0; j < g.dims; ++j) e += (p[j] - t[j]) * (p[j] - t[j]);
    if (e < best_e) {
      best_e = e;
      best = g.nb[k];
    }
  }
  return best;
}

// How one type codes its values (see the file comment).
struct IqSpec {
  const IqLattice& grid;
  bool grid_signed;  // IQ1: the grid holds the signs and the values get + δ
  bool sign_parity;  // 7 sign bits stored, the 8th makes the count of negatives even
  int delta_group;   // IQ1: values sharing one δ (32 for IQ1_S, 8 for IQ1_M); 0: no δ
};

constexpr float kDelta = 0.125f;  // IQ1's δ

// The codes of up to 32 values: grid index per group of 8 (IQ3: per 4), sign bits per 8, and
// IQ1's δ signs (bit per group of 8, set = −δ).
struct IqCodes {
  uint16_t grid[8] = {};
  uint8_t signs[4] = {};
  uint8_t delta_neg = 0;
};

// Codes 8 values x (group g of the scale group) with scale λ: fills v (x ≈ λ·v) and c; returns
// the squared error.
double code_eight(const IqSpec& s, const float* x, float lambda, float delta, int g, float* v,
                  IqCodes& c) {
  const float inv = lambda > 0 ? 1.0f / lambda : 0.0f;
  float t[8];
  if (s.grid_signed) {
    for (int j = 0; j < 8; ++j) t[j] = x[j] * inv - delta;
    const int idx = lattice_nearest(s.grid, t);
    c.grid[g] = uint16_t(idx);
    for (int j = 0; j < 8; ++j) v[j] = s.grid.points[size_t(idx * 8 + j)] + delta;
  } else {
    uint8_t signs = 0;
    for (int j = 0; j < 8; ++j)
      if (x[j] < 0) signs |= uint8_t(1 << j);
    if (s.sign_parity && (std::popcount(signs) & 1)) {
      int k = 0;
      for (int j = 1; j < 8; ++j)
        if (std::fabs(x[j]) < std::fabs(x[k])) k = j;
      signs ^= uint8_t(1 << k);
    }
    c.signs[g] = signs;
    for (int j = 0; j < 8; ++j) t[j] = ((signs >> j) & 1 ? -x[j] : x[j]) * inv;
    const int per = s.grid.dims;  // 8 (IQ2) or 4 (IQ3: two entries per group)
    for (int h = 0; h < 8 / per; ++h) {
      const int idx = lattice_nearest(s.grid, t + per * h);
      c.grid[g * (8 / per) + h] = uint16_t(idx);
      for (int j = 0; j < per; ++j) v[per * h + j] = s.grid.points[size_t(idx * per + j)];
    }
    for (int j = 0; j < 8; ++j) v[j] = (signs >> j) & 1 ? -v[j] : v[j];
  }
  double e = 0;
  for (int j = 0; j < 8; ++j) {
    const double r = double(lambda) * v[j] - x[j];
    e += r * r;
  }
  return e;
}

// Codes a scale group of n values (16 or 32) with scale λ; returns the squared error.
double code_group(const IqSpec& s, const float* x, int n, float lambda, float* v, IqCodes& c) {
  c = IqCodes{};
  if (!s.grid_signed) {
    double e = 0;
    for (int g = 0; g < n / 8; ++g) e += code_eight(s, x + 8 * g, lambda, 0, g, v + 8 * g, c);
    return e;
  }
  // IQ1: each δ group takes the δ sign with the smaller error.
  double e = 0;
  for (int d0 = 0; d0 < n; d0 += s.delta_group) {
    double best = INFINITY;
    IqCodes best_c;
    float best_v[32];
    for (int neg = 0; neg < 2; ++neg) {
      IqCodes ci = c;
      float vi[32];
      double ei = 0;
      for (int g = d0 / 8; g < (d0 + s.delta_group) / 8; ++g) {
        ei += code_eight(s, x + 8 * g, lambda, neg ? -kDelta : kDelta, g, vi + 8 * g, ci);
        if (neg) ci.delta_neg |= uint8_t(1 << g);
      }
      if (ei < best) {
        best = ei;
        best_c = ci;
        std::memcpy(best_v + d0, vi + d0, sizeof(float) * size_t(s.delta_group));
      }
    }
    c = best_c;
    std::memcpy(v + d0, best_v + d0, sizeof(float) * size_t(s.delta_group));
    e += best;
  }
  return e;
}

// The real scale of a group: the best of a few starts and their least-squares refits.
float group_scale(const IqSpec& s, const float* x, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  if (amax == 0) return 0;
  const float vmax = std::max(std::fabs(s.grid.levels.front()), std::fabs(s.grid.levels.back())) +
                     (s.grid_signed ? kDelta : 0.0f);
  float v[32];
  IqCodes c;
  float best = 0;
  double best_e = INFINITY;
  for (int k = 0; k <= 2; ++k) {
    float lambda = amax / vmax * (0.65f + 0.25f * float(k));
    for (int refit = 0; refit < 2; ++refit) {
      const double e = code_group(s, x, n, lambda, v, c);
      if (e < best_e) {
        best_e = e;
        best = lambda;
      }
      double sxv = 0, svv = 0;
      for (int i = 0; i < n; ++i) {
        sxv += double(x[i]) * v[i];
        svv += double(v[i]) * v[i];
      }
      if (!(sxv > 0 && svv > 0)) break;
      lambda = float(sxv / svv);
    }
  }
  return best;
}

// A type's sub-scale: the F32 scale of code `sc` under block scale d, as dequantisation
// computes it.
using ScaleOf = float (*)(float d, int sc);

struct IqBlockFit {
  float d = 0;
  int sc[16] = {};
  IqCodes codes[16];
};

// Fits a block of 256 in groups of `n`: real scales, the F16 d, the sub-scale codes in
// [0, n_sc), and the codes under the scales as stored.
IqBlockFit fit_block(const IqSpec& s, const float* x, int n, int n_sc, ScaleOf scale_of) {
  IqBlockFit f;
  const int groups = kQK_K / n;
  float lambda[16], max_l = 0;
  for (int g = 0; g < groups; ++g) {
    lambda[g] = group_scale(s, x + n * g, n);
    max_l = std::max(max_l, lambda[g]);
  }
  f.d = f16_round(max_l / scale_of(1.0f, n_sc - 1));
  float v[32];
  for (int g = 0; g < groups; ++g) {
    // The code nearest λ and its neighbour on the other side, each tried with its exact scale.
    int near = 0;
    for (int k = 1; k < n_sc; ++k)
      if (std::fabs(scale_of(f.d, k) - lambda[g]) < std::fabs(scale_of(f.d, near) - lambda[g]))
        near = k;
    const int other = clampi(scale_of(f.d, near) < lambda[g] ? near + 1 : near - 1, 0, n_sc - 1);
    double best = INFINITY;
    for (int k : {near, other}) {
      IqCodes c;
      const double e = code_group(s, x + n * g, n, scale_of(f.d, k), v, c);
      if (e < best) {
        best = e;
        f.sc[g] = k;
        f.codes[g] = c;
      }
    }
  }
  return f;
}

float scale_iq2(float d, int sc) {
  return d * (0.5f + float(sc)) * 0.25f;
}
float scale_iq3xxs(float d, int sc) {
  return d * (0.5f + float(sc)) * 0.5f;
}
float scale_odd(float d, int sc) {  // IQ3_S, IQ1_S, IQ1_M
  return d * float(1 + 2 * sc);
}

// The lattice of a grid table (a u64 entry: 8 values, a u32: 4), built on first use.
template <const auto& kTable, bool kSigned>
const IqLattice& lattice_of() {
  static const IqLattice g =
      lattice_make(kTable, int(std::size(kTable)), int(sizeof kTable[0]), kSigned);
  return g;
}

// IQ2_XXS / IQ3_XXS: the u32 of a sub-block's 4 × 7 sign bits and its 4-bit scale.
uint32_t signs_and_scale(const IqCodes& c, int sc) {
  uint32_t aux = uint32_t(sc) << 28;
  for (int l = 0; l < 4; ++l) aux |= uint32_t(c.signs[l] & 127) << (7 * l);
  return aux;
}

}  // namespace

void quantize_iq2_xxs(const float* x, BlockIQ2_XXS& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ2XXSGrid, false>(), false, true, 0}, x, 32, 16, scale_iq2);
  b.d = f32_to_f16(f.d);
  for (int ib = 0; ib < 8; ++ib) {
    const IqCodes& c = f.codes[ib];
    uint32_t aux[2] = {0, signs_and_scale(c, f.sc[ib])};
    for (int l = 0; l < 4; ++l) aux[0] |= uint32_t(c.grid[l]) << (8 * l);
    std::memcpy(b.qs + 4 * ib, aux, 8);
  }
}

void quantize_iq2_xs(const float* x, BlockIQ2_XS& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ2XSGrid, false>(), false, true, 0}, x, 16, 16, scale_iq2);
  b.d = f32_to_f16(f.d);
  for (int ib = 0; ib < 8; ++ib) {
    b.scales[ib] = uint8_t(f.sc[2 * ib] | (f.sc[2 * ib + 1] << 4));
    for (int l = 0; l < 4; ++l) {
      const IqCodes& c = f.codes[2 * ib + l / 2];
      b.qs[4 * ib + l] = uint16_t(c.grid[l % 2] | ((c.signs[l % 2] & 127) << 9));
    }
  }
}

void quantize_iq2_s(const float* x, BlockIQ2_S& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ2SGrid, false>(), false, false, 0}, x, 16, 16, scale_iq2);
  b.d = f32_to_f16(f.d);
  std::memset(b.qh, 0, sizeof b.qh);
  for (int ib = 0; ib < 8; ++ib) {
    b.scales[ib] = uint8_t(f.sc[2 * ib] | (f.sc[2 * ib + 1] << 4));
    for (int l = 0; l < 4; ++l) {
      const IqCodes& c = f.codes[2 * ib + l / 2];
      const int idx = c.grid[l % 2];
      b.qs[4 * ib + l] = uint8_t(idx & 255);
      b.qh[ib] |= uint8_t((idx >> 8) << (2 * l));
      b.qs[32 + 4 * ib + l] = c.signs[l % 2];
    }
  }
}

void quantize_iq3_xxs(const float* x, BlockIQ3_XXS& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ3XXSGrid, false>(), false, true, 0}, x, 32, 16, scale_iq3xxs);
  b.d = f32_to_f16(f.d);
  for (int ib = 0; ib < 8; ++ib) {
    const IqCodes& c = f.codes[ib];
    for (int k = 0; k < 8; ++k) b.qs[8 * ib + k] = uint8_t(c.grid[k]);
    const uint32_t aux = signs_and_scale(c, f.sc[ib]);
    std::memcpy(b.qs + 64 + 4 * ib, &aux, 4);
  }
}

void quantize_iq3_s(const float* x, BlockIQ3_S& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ3SGrid, false>(), false, false, 0}, x, 32, 16, scale_odd);
  b.d = f32_to_f16(f.d);
  std::memset(b.qh, 0, sizeof b.qh);
  std::memset(b.scales, 0, sizeof b.scales);
  for (int ib = 0; ib < 8; ++ib) {
    const IqCodes& c = f.codes[ib];
    for (int k = 0; k < 8; ++k) {
      b.qs[8 * ib + k] = uint8_t(c.grid[k] & 255);
      b.qh[ib] |= uint8_t((c.grid[k] >> 8) << k);
    }
    for (int l = 0; l < 4; ++l) b.signs[4 * ib + l] = c.signs[l];
    b.scales[ib / 2] |= uint8_t(f.sc[ib] << (4 * (ib % 2)));
  }
}

void quantize_iq1_s(const float* x, BlockIQ1_S& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ1SGrid, true>(), true, false, 32}, x, 32, 8, scale_odd);
  b.d = f32_to_f16(f.d);
  for (int ib = 0; ib < 8; ++ib) {
    const IqCodes& c = f.codes[ib];
    int qh = (f.sc[ib] << 12) | (c.delta_neg ? 0x8000 : 0);
    for (int l = 0; l < 4; ++l) {
      b.qs[4 * ib + l] = uint8_t(c.grid[l] & 255);
      qh |= (c.grid[l] >> 8) << (3 * l);
    }
    b.qh[ib] = uint16_t(qh);
  }
}

void quantize_iq1_m(const float* x, BlockIQ1_M& b) {
  const IqBlockFit f =
      fit_block({lattice_of<kIQ1SGrid, true>(), true, false, 8}, x, 16, 8, scale_odd);
  uint16_t sc[4] = {};
  std::memset(b.qh, 0, sizeof b.qh);
  for (int ib = 0; ib < 8; ++ib) {
    const int shift = 6 * (ib % 2);
    sc[ib / 2] |= uint16_t((f.sc[2 * ib] << shift) | (f.sc[2 * ib + 1] << (shift + 3)));
    for (int l = 0; l < 4; ++l) {
      const IqCodes& c = f.codes[2 * ib + l / 2];
      const int idx = c.grid[l % 2];
      const int neg = (c.delta_neg >> (l % 2)) & 1;
      b.qs[4 * ib + l] = uint8_t(idx & 255);
      b.qh[2 * ib + l / 2] |= uint8_t(((idx >> 8) | (neg << 3)) << (4 * (l % 2)));
    }
  }
  std::memcpy(b.scales, sc, 8);
  iq1m_scale_set(reinterpret_cast<uint8_t*>(&b), f32_to_f16(f.d));
}

}  // namespace invar
