#include "kernels/select.h"

#include <utility>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce.h"

namespace invar {
namespace {

// NaN sorts below every number (so a NaN is never selected before one).
float max_of(const float* x, int64_t n) {
  float mx = -__builtin_inff();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > mx) mx = x[i];
  return mx;
}

// y[N] = exp(x − mx); returns the canonical Σ y.
float exp_sub_sum_ref(const float* x, int64_t n, float mx, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = det_exp(x[i] - mx);
  return reduce_sum_ref(y, n);
}

float exp_sub_sum(const float* x, int64_t n, float mx, float* y) {
  const IsaKernels* k = isa_kernels();
  return k ? k->exp_sub_sum(x, n, mx, y) : exp_sub_sum_ref(x, n, mx, y);
}

// a ranks before b: larger value first, then smaller id; NaN after every number.
bool ranks_before(float va, int32_t ia, float vb, int32_t ib) {
  const bool na = va != va, nb = vb != vb;
  if (na != nb) return nb;
  if (!na && va != vb) return va > vb;
  return ia < ib;
}

// Heap on (vals, ids)[0, n) whose root is the element ranked last.
void sift_down(float* vals, int32_t* ids, int64_t i, int64_t n) {
  for (;;) {
    const int64_t l = 2 * i + 1, r = l + 1;
    int64_t worst = i;
    if (l < n && ranks_before(vals[worst], ids[worst], vals[l], ids[l])) worst = l;
    if (r < n && ranks_before(vals[worst], ids[worst], vals[r], ids[r])) worst = r;
    if (worst == i) return;
    std::swap(vals[i], vals[worst]);
    std::swap(ids[i], ids[worst]);
    i = worst;
  }
}

}  // namespace

// y must not alias x: the exponentials are staged in y while x is still needed.
void log_softmax_ref(const float* x, int64_t n, float* y) {
  INVAR_CHECK(x != y, "log_softmax: y must not alias x");
  const float mx = max_of(x, n);
  const float sum = exp_sub_sum_ref(x, n, mx, y);
  const float lse = det_log(sum);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mx) - lse;
}

void log_softmax(const float* x, int64_t n, float* y) {
  INVAR_CHECK(x != y, "log_softmax: y must not alias x");
  const float mx = max_of(x, n);
  const float sum = exp_sub_sum(x, n, mx, y);
  const float lse = det_log(sum);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mx) - lse;
}

void softmax(const float* x, int64_t n, float* y) {
  const float mx = max_of(x, n);
  const float sum = exp_sub_sum(x, n, mx, y);
  for (int64_t i = 0; i < n; ++i) y[i] = y[i] / sum;
}

// The order (value desc, id asc, NaN last) is a strict total order on (value, id), so the result
// is unique whatever the algorithm. Small k (logprobs, routing): one pass keeping a sorted list.
// Large k (sampling candidates, up to the vocabulary): a bounded heap, O(N log k). No allocation.
void top_k(const float* x, int64_t n, int64_t k, int32_t* ids, float* vals) {
  INVAR_CHECK(k >= 0 && k <= n, "top_k: k out of range");
  if (k == 0) return;
  if (k <= 32) {
    int64_t count = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = x[i];
      const int32_t id = int32_t(i);
      if (count == k && !ranks_before(v, id, vals[k - 1], ids[k - 1])) continue;
      int64_t j = count < k ? count++ : k - 1;
      while (j > 0 && ranks_before(v, id, vals[j - 1], ids[j - 1])) {
        vals[j] = vals[j - 1];
        ids[j] = ids[j - 1];
        --j;
      }
      vals[j] = v;
      ids[j] = id;
    }
    return;
  }
  for (int64_t i = 0; i < k; ++i) {
    vals[i] = x[i];
    ids[i] = int32_t(i);
  }
  for (int64_t i = k / 2 - 1; i >= 0; --i) sift_down(vals, ids, i, k);
  for (int64_t i = k; i < n; ++i) {
    if (!ranks_before(x[i], int32_t(i), vals[0], ids[0])) continue;
    vals[0] = x[i];
    ids[0] = int32_t(i);
    sift_down(vals, ids, 0, k);
  }
  // Move the last-ranked to the back repeatedly: best first.
  for (int64_t end = k - 1; end > 0; --end) {
    std::swap(vals[0], vals[end]);
    std::swap(ids[0], ids[end]);
    sift_down(vals, ids, 0, end);
  }
}

void moe_route(const float* logits, int64_t n_expert, int64_t k, int32_t* sel, float* w) {
  INVAR_CHECK(n_expert > 0 && n_expert <= 4096 && k >= 1 && k <= n_expert, "moe_route: bad shape");
  float p[4096];
  softmax(logits, n_expert, p);
  top_k(p, n_expert, k, sel, w);
  float sum = 0.0f;
  for (int64_t i = 0; i < k; ++i) sum += w[i];
  const float denom = sum > 6.1035e-5f ? sum : 6.1035e-5f;
  for (int64_t i = 0; i < k; ++i) w[i] = w[i] / denom;
}

}  // namespace invar
