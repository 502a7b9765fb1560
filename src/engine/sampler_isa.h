// Lane-wise weights for the sampler's ranked head (sampler.cpp): the same operations as its
// scalar loop, a logit decoded from its rank key, then det_exp((l − best)/T) with NaN → 0,
// through detmath_simd.h's exp_ps, which equals det_exp bit for bit. Private to src/engine.
#pragma once

#include <cstdint>

namespace invar {

// The logit whose rank key (sampler.cpp's rank_key) is `key`: the float's bits, made monotone
// and complemented, undone. −0 came in as +0.
inline uint32_t rank_key_bits(uint32_t key) {
  const uint32_t ascending = ~key;
  return ascending & 0x80000000u ? ascending & 0x7fffffffu : ~ascending;
}

// w[i] = max(det_exp((l_i − best)/T), 0), l_i the logit of rank key keys[i] + key_base, for the
// whole vectors of i < m; returns how many were done (the caller's scalar loop does the rest).
int64_t ranked_weights_avx2(const uint32_t* keys, int64_t m, uint32_t key_base, float best, float T,
                            float* w);
int64_t ranked_weights_avx512(const uint32_t* keys, int64_t m, uint32_t key_base, float best,
                              float T, float* w);

// The row's first pass, AVX-512 only (its compress store packs the head; AVX2 runs the scalar
// loops of sampler.cpp): *best = the largest of x[n] (which of −0 and +0 does not matter: both
// give every logit the same weight); false when x holds a NaN or a +inf (−inf: a masked id).
bool row_max_finite_avx512(const float* x, int64_t n, float* best);
// The head's rank keys, less key_best, in id order: the x[i] with (x[i] − best)/T ≥ z_cut.
// Returns how many; *key_last = the largest key (key_best when none).
int64_t head_keys_avx512(const float* x, int64_t n, float best, float T, float z_cut,
                         uint32_t key_best, uint32_t* keys, uint32_t* key_last);

}  // namespace invar
