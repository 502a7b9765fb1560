#include "engine/sampler.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/detmath.h"
#include "core/error.h"
#include "core/simd.h"
#include "engine/sampler_isa.h"
#include "kernels/select.h"

namespace invar {

uint64_t sample_bits(uint64_t seed, int64_t position) {
  // Two rounds of the splitmix64 finaliser: seed and position both fully diffused.
  auto mix = [](uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  return mix(mix(seed) ^ static_cast<uint64_t>(position));
}

double sample_uniform(uint64_t seed, int64_t position) {
  return static_cast<double>(sample_bits(seed, position) >> 11) * 0x1.0p-53;
}

namespace {

// sample_token_ref's draw over ranked candidates with weights w[k] (best first): the rank it
// chooses. Its sums (the total, min-p's kept mass, top-p's running mass, the kept mass, the
// draw's running mass) all start at 0 and add w[0], w[1], ... in rank order in double, so each
// is a prefix of the one sequence cum[i] = fl(cum[i−1] + w[i]), taken here once. It never falls (w
// ≥ 0), so the reference's "first i with cum[i] ≥ target" and "first i with u < cum[i]" are binary
// searches.
int64_t ranked_draw(const float* w, int64_t k, const SamplingParams& p, int64_t position,
                    double* cum) {
  double c = 0;
  for (int64_t i = 0; i < k; ++i) {
    c += w[i];
    cum[i] = c;
  }
  double total = cum[k - 1];
  int64_t n = k;
  if (p.min_p > 0.0f) {
    for (int64_t i = 0; i < k; ++i) {
      if (w[i] < p.min_p) {
        n = std::max<int64_t>(i, 1);
        if (n < k) total = i > 0 ? cum[i - 1] : 0.0;  // the mass before the first dropped one
        break;
      }
    }
  }
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * total;
    const int64_t i = std::lower_bound(cum, cum + n, target) - cum;
    if (i < n) n = i + 1;
  }
  const double u = sample_uniform(p.seed, position) * cum[n - 1];
  const int64_t i = std::upper_bound(cum, cum + n, u) - cum;
  return i < n ? i : n - 1;
}

float weight_of(float logit, float best, float temperature) {
  const float w = det_exp((logit - best) / temperature);
  return w >= 0.0f ? w : 0.0f;  // NaN logits weigh nothing
}

// The weights of the ranked head keys[m], each logit decoded from its rank key (no gather from
// the row), lane-wise where the CPU allows (the same bits, sampler_isa.h).
void ranked_weights(const uint32_t* keys, int64_t m, uint32_t key_base, float best, float T,
                    float* w) {
  int64_t i = 0;
  const SimdLevel level = simd_active();
  simd_count(level);
  switch (level) {
    case SimdLevel::avx512:
      i = ranked_weights_avx512(keys, m, key_base, best, T, w);
      break;
    case SimdLevel::avx2:
      i = ranked_weights_avx2(keys, m, key_base, best, T, w);
      break;
    default:
      break;
  }
  for (; i < m; ++i) {  // the scalar level, and the lanes' tail
    const uint32_t bits = rank_key_bits(keys[i] + key_base);
    float l;
    std::memcpy(&l, &bits, 4);
    w[i] = weight_of(l, best, T);
  }
}

// Below this scaled logit z = (l − l_max)/T a weight cannot move a sum: det_exp(z) for z < −38
// has n = round(z·log2 e) ≤ −55 and a mantissa factor under 1.5, so it is < 2^−54. Every sum of
// ranked_draw starts with the best candidate's weight det_exp(0) = 1, and adding w < 2^−53 to a
// double ≥ 1 rounds back to it (half an ulp of 1 is 2^−53), so such a candidate changes no sum
// and, its cumulative weight equal to its predecessor's, is never the one drawn.
constexpr float kNegligibleZ = -38.0f;

// Ascending key for (value descending): the float's bits made monotone, then complemented.
// −0 becomes +0 first, since the ranking holds them equal (ties by id).
uint32_t rank_key(float v) {
  if (v == 0.0f) v = 0.0f;
  uint32_t b;
  std::memcpy(&b, &v, 4);
  const uint32_t ascending = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
  return ~ascending;
}

// Sorts keys[m] ascending: LSD radix on the significant digits, 11 bits per pass. Keys alone
// (4 bytes, not a key and an id): equal keys are equal logits, whose ids the caller finds in
// the row once it knows which rank it drew. tmp holds m keys; returns whichever of the two
// holds the result (no copy back).
uint32_t* ranked_sort(uint32_t* keys, uint32_t* tmp, int64_t m, uint32_t key_range,
                      std::vector<uint32_t>& counts_buf) {
  if (m <= 256) {
    std::sort(keys, keys + m);
    return keys;
  }
  constexpr int kBits = 11;
  constexpr uint32_t kDigits = 1u << kBits;
  int passes = 0;
  while (passes * kBits < 32 && (uint64_t(key_range) >> (passes * kBits)) != 0) ++passes;
  counts_buf.assign(3 * kDigits, 0u);
  uint32_t* counts = counts_buf.data();
  for (int64_t i = 0; i < m; ++i) {
    const uint32_t key = keys[i];
    ++counts[key & (kDigits - 1)];
    ++counts[kDigits + ((key >> kBits) & (kDigits - 1))];
    ++counts[2 * kDigits + (key >> (2 * kBits))];
  }
  uint32_t* src = keys;
  uint32_t* dst = tmp;
  for (int d = 0; d < passes; ++d) {
    uint32_t* c = counts + d * kDigits;
    if (c[(src[0] >> (d * kBits)) & (kDigits - 1)] == uint32_t(m)) continue;
    uint32_t sum = 0;
    for (uint32_t j = 0; j < kDigits; ++j) {
      const uint32_t cj = c[j];
      c[j] = sum;
      sum += cj;
    }
    for (int64_t i = 0; i < m; ++i) {
      const uint32_t key = src[i];
      dst[c[(key >> (d * kBits)) & (kDigits - 1)]++] = key;
    }
    std::swap(src, dst);
  }
  return src;
}

}  // namespace

int32_t sample_token_ref(const float* logits, int64_t n_vocab, const SamplingParams& p,
                         int64_t position, SamplerScratch& s) {
  s.ids.resize(static_cast<size_t>(n_vocab));
  s.vals.resize(static_cast<size_t>(n_vocab));
  if (p.temperature <= 0.0f) {
    top_k(logits, n_vocab, 1, s.ids.data(), s.vals.data());
    return s.ids[0];
  }
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, n_vocab) : n_vocab;
  top_k(logits, n_vocab, k, s.ids.data(), s.vals.data());  // best first, ties by smaller id
  // Weights e^((l_i − l_max)/T) accumulated in candidate order (a fixed order, rule N1).
  const float best = s.vals[0];
  double total = 0;
  for (int64_t i = 0; i < k; ++i) {
    const float w = det_exp((s.vals[static_cast<size_t>(i)] - best) / p.temperature);
    s.vals[static_cast<size_t>(i)] = w >= 0.0f ? w : 0.0f;  // NaN logits weigh nothing
    total += s.vals[static_cast<size_t>(i)];
  }
  // min-p (vLLM's order: before top-p): weights are relative to the best candidate, so a
  // candidate survives when its weight is at least min_p. The ranking is by weight, so the
  // survivors are a head of it.
  int64_t n = k;
  if (p.min_p > 0.0f) {
    double kept_min = 0;
    for (int64_t i = 0; i < k; ++i) {
      if (s.vals[static_cast<size_t>(i)] < p.min_p) {
        n = std::max<int64_t>(i, 1);
        break;
      }
      kept_min += s.vals[static_cast<size_t>(i)];
    }
    if (n < k) total = kept_min;
  }
  // top-p: the shortest head of the ranking whose mass reaches top_p of the total.
  if (p.top_p < 1.0f) {
    const double target = static_cast<double>(p.top_p) * total;
    double cum = 0;
    for (int64_t i = 0; i < n; ++i) {
      cum += s.vals[static_cast<size_t>(i)];
      if (cum >= target) {
        n = i + 1;
        break;
      }
    }
  }
  double kept = 0;
  for (int64_t i = 0; i < n; ++i) kept += s.vals[static_cast<size_t>(i)];
  const double u = sample_uniform(p.seed, position) * kept;
  double cum = 0;
  for (int64_t i = 0; i < n; ++i) {
    cum += s.vals[static_cast<size_t>(i)];
    if (u < cum) return s.ids[static_cast<size_t>(i)];
  }
  return s.ids[static_cast<size_t>(n - 1)];
}

// The ranking's head that can matter, sorted; the rest is never looked at. Which head: every
// candidate with z = (l − l_max)/T at least a cut, a prefix of the ranking because z rises with l
// (IEEE subtraction and division are monotone), so ranked_draw sees the reference's first m
// weights. The cut is kNegligibleZ (beyond it no sum moves), raised under min-p to just below
// ln(min_p), where every weight is already under min_p: the reference stops at the first such
// candidate, and the first candidate past the head is one, so both keep the same head.
int32_t sample_token(const float* logits, int64_t n_vocab, const SamplingParams& p,
                     int64_t position, SamplerScratch& s) {
  const float T = p.temperature;
  const int64_t k = p.top_k > 0 ? std::min(p.top_k, n_vocab) : n_vocab;
  // Greedy and a small top-k already cost one pass (top_k's insertion path); a temperature that
  // is not a finite positive number takes the reference's definition as it stands.
  if (T <= 0.0f || k <= 32 || !(T < __builtin_inff()))
    return sample_token_ref(logits, n_vocab, p, position, s);
  // The best logit, the value the reference ranks first (were it −0 in one and +0 in the other,
  // every weight would still be the same). A NaN or a +inf (no finite best weight) falls back
  // too; finite rows never do (postprocess rejects others), −inf (a masked id) is a candidate.
  float best = -__builtin_inff();
  bool finite = true;
  if (simd_active() == SimdLevel::avx512) {
    finite = row_max_finite_avx512(logits, n_vocab, &best);
  } else {
    for (int64_t i = 0; i < n_vocab; ++i) {
      const float v = logits[i];
      finite &= v == v && v < __builtin_inff();
      if (v > best) best = v;
    }
  }
  if (!finite || !(best > -__builtin_inff()))
    return sample_token_ref(logits, n_vocab, p, position, s);
  float z_cut = kNegligibleZ;
  if (p.min_p > 0.0f) {
    // det_exp and det_log are within 2 ulp: 2^−10 below ln(min_p) every weight is < min_p by
    // a factor of ~(1 − 2^−10), far beyond their error. At most 0, so the best stays in.
    const float z_min = det_log(p.min_p) - 0x1p-10f;
    z_cut = std::min(std::max(z_cut, z_min), 0.0f);
  }
  s.keys.resize(static_cast<size_t>(n_vocab));
  const uint32_t key_best = rank_key(best);
  uint32_t key_last = key_best;
  int64_t m = 0;
  if (simd_active() == SimdLevel::avx512) {
    m = head_keys_avx512(logits, n_vocab, best, T, z_cut, key_best, s.keys.data(), &key_last);
  } else {
    for (int64_t i = 0; i < n_vocab; ++i) {
      const float v = logits[i];
      if ((v - best) / T >= z_cut) {
        const uint32_t key = rank_key(v);
        key_last = std::max(key_last, key);
        s.keys[static_cast<size_t>(m++)] = key - key_best;
      }
    }
  }
  s.keys_tmp.resize(static_cast<size_t>(m));
  const uint32_t* ranked =
      ranked_sort(s.keys.data(), s.keys_tmp.data(), m, key_last - key_best, s.digit_counts);
  const int64_t kk = std::min(k, m);
  s.vals.resize(static_cast<size_t>(kk));
  ranked_weights(ranked, kk, key_best, best, T, s.vals.data());
  s.cum.resize(static_cast<size_t>(kk));
  const int64_t r = ranked_draw(s.vals.data(), kk, p, position, s.cum.data());
  // The id at rank r: ties rank by id, so it is the (r − first)-th id, in id order, of the logit
  // the keys from `first` on hold.
  const uint32_t key = ranked[r];
  int64_t skip = r - (std::lower_bound(ranked, ranked + r, key) - ranked);
  const uint32_t bits = rank_key_bits(key + key_best);
  float v;
  std::memcpy(&v, &bits, 4);
  for (int64_t i = 0; i < n_vocab; ++i)
    if (logits[i] == v && skip-- == 0) return int32_t(i);  // == holds −0 and +0 equal
  INVAR_CHECK(false, "sample_token: the drawn logit is not in the row");
  return -1;
}

void logprobs_top(const float* logits, int64_t n_vocab, int32_t token, int64_t k, SamplerScratch& s,
                  float* token_logprob, std::vector<TokenLogprob>* top) {
  INVAR_CHECK(token >= 0 && token < n_vocab);
  s.logprobs.resize(static_cast<size_t>(n_vocab));
  log_softmax(logits, n_vocab, s.logprobs.data());
  *token_logprob = s.logprobs[static_cast<size_t>(token)];
  top->clear();
  k = std::min(k, n_vocab);
  if (k <= 0) return;
  s.ids.resize(static_cast<size_t>(k));
  s.vals.resize(static_cast<size_t>(k));
  top_k(s.logprobs.data(), n_vocab, k, s.ids.data(), s.vals.data());
  for (int64_t i = 0; i < k; ++i)
    top->push_back({s.ids[static_cast<size_t>(i)], s.vals[static_cast<size_t>(i)]});
}

}  // namespace invar
