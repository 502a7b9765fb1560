// Lane-wise weights for the sampler's ranked head (sampler.cpp): the same operations as its
// scalar weight_of, det_exp((l − best)/T) with NaN → 0, through detmath_simd.h's exp_ps, which
// equals det_exp bit for bit. Private to src/engine.
#pragma once

#include <cstdint>

namespace invar {

// w[i] = max(det_exp((logits[ids[i]] − best)/T), 0) for i < m.
void ranked_weights_avx2(const float* logits, const int32_t* ids, int64_t m, float best, float T,
                         float* w);
void ranked_weights_avx512(const float* logits, const int32_t* ids, int64_t m, float best, float T,
                           float* w);

}  // namespace invar
