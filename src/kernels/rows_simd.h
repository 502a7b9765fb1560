// Private to the kernels: the bodies of the row reductions, row norms, element-wise gates and the
// causal conv, written once over a 16-float vector type V (vec_avx2.h: two __m256; vec_avx512.h:
// one __m512) and instantiated by kernels_avx2.cpp and kernels_avx512.cpp. V is local to its
// file, so every instantiation here is too: no ODR clash between ISAs.
//
// Why the bits equal the scalar references (reduce.cpp, norm.cpp, elementwise.cpp, conv.cpp):
// - Element-wise steps apply, per lane, the same IEEE operations in the same order as the scalar
//   loop applies to that element (V's exp/sigmoid/silu are det_exp/det_sigmoid/det_silu lane by
//   lane, detmath_simd.h), so the chunking into vectors does not matter.
// - Row sums run the canonical reduction of reduce.h: element i is added into lane i % 16 in
//   index order (chunks of 16 from the start of the row), then V::sum runs the fixed tree. A
//   tail is loaded zero-filled; adding +0 leaves a lane unchanged, since a lane that starts at +0
//   can never hold −0, so the result equals the scalar loop that skips the missing elements.
// - Stores write only the row's own elements (store_n).
#pragma once

#include <cmath>
#include <cstdint>

#include "core/detmath.h"

namespace invar::kernels_simd {
namespace {  // internal linkage: each ISA file gets its own copy

#define INVAR_ROWS_INLINE inline __attribute__((always_inline))

// The canonical Σ over [0, n) of term(i, rem): the vector of elements i .. i+15 (rem of them
// valid, the rest +0), chunk by chunk from i = 0.
template <class V, class Term>
INVAR_ROWS_INLINE float lanes_sum(int64_t n, Term term) {
  V acc = V::zero();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) acc = V::add(acc, term(i, int64_t(16)));
  if (i < n) acc = V::add(acc, term(i, n - i));
  return V::sum(acc);
}

// y[i .. i+15] = f(i, rem) over [0, n); only the rem valid lanes are stored.
template <class V, class F>
INVAR_ROWS_INLINE void lanes_map(float* y, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) V::store(y + i, f(i, int64_t(16)));
  if (i < n) V::store_n(y + i, f(i, n - i), n - i);
}

template <class V>
float reduce_sum(const float* x, int64_t n) {
  return lanes_sum<V>(n, [&](int64_t i, int64_t r) { return V::load_n(x + i, r); });
}

template <class V>
float reduce_sum_sq(const float* x, int64_t n) {
  return lanes_sum<V>(n, [&](int64_t i, int64_t r) {
    const V v = V::load_n(x + i, r);
    return V::mul(v, v);
  });
}

template <class V>
float reduce_dot(const float* a, const float* b, int64_t n) {
  return lanes_sum<V>(
      n, [&](int64_t i, int64_t r) { return V::mul(V::load_n(a + i, r), V::load_n(b + i, r)); });
}

// y[N] = det_exp(x − mx); returns the canonical Σ y. Lanes past the row are cleared before the
// sum (e^(0 − mx) is not 0).
template <class V>
float exp_sub_sum(const float* x, int64_t n, float mx, float* y) {
  const V m = V::bcast(mx);
  return lanes_sum<V>(n, [&](int64_t i, int64_t r) {
    const V e = V::keep_n(V::exp_det(V::sub(V::load_n(x + i, r), m)), r);
    V::store_n(y + i, e, r);
    return e;
  });
}

// Per row: one scale from the canonical Σx² (scalar math, as in norm.cpp), then per element.
template <class V>
void rmsnorm_rows(const float* x, const float* w, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t row = 0; row < m; ++row) {
    const float* xr = x + row * n;
    const V sc = V::bcast(det_rsqrt(reduce_sum_sq<V>(xr, n) / float(n) + eps));
    lanes_map<V>(y + row * n, n, [&](int64_t i, int64_t r) {
      return V::mul(V::mul(V::load_n(xr + i, r), sc), V::load_n(w + i, r));
    });
  }
}

template <class V>
void l2norm_rows(const float* x, int64_t m, int64_t n, float eps, float* y) {
  for (int64_t row = 0; row < m; ++row) {
    const float* xr = x + row * n;
    const float norm = std::sqrt(reduce_sum_sq<V>(xr, n));
    const V sc = V::bcast(1.0f / (norm > eps ? norm : eps));
    lanes_map<V>(y + row * n, n,
                 [&](int64_t i, int64_t r) { return V::mul(V::load_n(xr + i, r), sc); });
  }
}

template <class V>
void rmsnorm_gated_rows(const float* x, const float* w, const float* z, int64_t m, int64_t n,
                        float eps, float* y) {
  for (int64_t row = 0; row < m; ++row) {
    const float* xr = x + row * n;
    const float* zr = z + row * n;
    const V sc = V::bcast(det_rsqrt(reduce_sum_sq<V>(xr, n) / float(n) + eps));
    lanes_map<V>(y + row * n, n, [&](int64_t i, int64_t r) {
      const V v = V::mul(V::mul(V::load_n(xr + i, r), sc), V::load_n(w + i, r));
      return V::mul(v, V::silu(V::load_n(zr + i, r)));
    });
  }
}

template <class V>
void swiglu(const float* gate, const float* up, int64_t n, float* y) {
  lanes_map<V>(y, n, [&](int64_t i, int64_t r) {
    return V::mul(V::silu(V::load_n(gate + i, r)), V::load_n(up + i, r));
  });
}

template <class V>
void sigmoid_mul_inplace(float* y, const float* gate, int64_t n) {
  lanes_map<V>(y, n, [&](int64_t i, int64_t r) {
    return V::mul(V::load_n(y + i, r), V::sigmoid(V::load_n(gate + i, r)));
  });
}

// 16 channels per vector, the window held in registers across the tokens; each lane runs its
// channel's FMA chain j = 0..Kc−1 from +0, as conv.cpp does.
template <class V>
void conv1d_silu(const float* x, const float* w, float* state, int64_t t, int64_t c, int64_t kc,
                 float* y, int64_t ch0, int64_t ch1) {
  V win[16], wt[16];
  for (int64_t ch = ch0; ch < ch1; ch += 16) {
    const int64_t r = ch1 - ch;
    for (int64_t j = 0; j < kc; ++j) wt[j] = V::gather_n(w + ch * kc + j, kc, r);
    for (int64_t j = 0; j + 1 < kc; ++j) win[j] = V::load_n(state + j * c + ch, r);
    for (int64_t tt = 0; tt < t; ++tt) {
      win[kc - 1] = V::load_n(x + tt * c + ch, r);
      V acc = V::zero();
      for (int64_t j = 0; j < kc; ++j) acc = V::fma(win[j], wt[j], acc);
      V::store_n(y + tt * c + ch, V::silu(acc), r);
      for (int64_t j = 0; j + 1 < kc; ++j) win[j] = win[j + 1];
    }
    for (int64_t j = 0; j + 1 < kc; ++j) V::store_n(state + j * c + ch, win[j], r);
  }
}

#undef INVAR_ROWS_INLINE

}  // namespace
}  // namespace invar::kernels_simd
