// Gated DeltaNet delta rule: scalar reference and dispatch. Value heads are independent, so a
// thread takes a range of heads and runs all T tokens for them (rule N2). Per token and value
// row j of S_h (Dk floats), in this order:
//   S[j][:] = S[j][:]·decay                       decay = det_exp(g)
//   kv      = Σ_i S[j][i]·k[i]                    canonical reduction (reduce.h)
//   d       = β·(v[j] − kv)
//   S[j][i] = fma(d, k[i], S[j][i])
//   o[j]    = (Σ_i S[j][i]·q[i]) · det_rsqrt(Dk)   canonical reduction
// Rows are independent within a token, so doing each row's four steps at once equals the
// matrix form of delta_rule.h.
#include "kernels/delta_rule.h"

#include <cmath>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/kernels_isa.h"
#include "kernels/reduce.h"

namespace invar {
namespace {

void check_shape(const DeltaRuleShape& s) {
  INVAR_CHECK(s.n_tokens >= 0 && s.hk > 0 && s.hv > 0 && s.dk > 0 && s.dv > 0,
              "delta_rule: bad shape");
  INVAR_CHECK(s.hv % s.hk == 0, "delta_rule: Hv must be a multiple of Hk");
}

void delta_rule_heads_ref(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                          const float* v, const float* g, const float* beta, float* o, int64_t h0,
                          int64_t h1) {
  const float scale = det_rsqrt(float(s.dk));
  const int64_t ratio = s.hv / s.hk;
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = s.tiled ? h % s.hk : h / ratio;
    float* sh = state + h * s.dv * s.dk;
    for (int64_t t = 0; t < s.n_tokens; ++t) {
      const float decay = det_exp(g[t * s.hv + h]);
      const float b = beta[t * s.hv + h];
      const float* kt = k + (t * s.hk + kh) * s.dk;
      const float* qt = q + (t * s.hk + kh) * s.dk;
      const float* vt = v + (t * s.hv + h) * s.dv;
      float* ot = o + (t * s.hv + h) * s.dv;
      for (int64_t j = 0; j < s.dv; ++j) {
        float* row = sh + j * s.dk;
        for (int64_t i = 0; i < s.dk; ++i) row[i] = row[i] * decay;
        const float kv = reduce_dot_ref(row, kt, s.dk);
        const float d = b * (vt[j] - kv);
        for (int64_t i = 0; i < s.dk; ++i) row[i] = std::fma(d, kt[i], row[i]);
        ot[j] = reduce_dot_ref(row, qt, s.dk) * scale;
      }
    }
  }
}

}  // namespace

void delta_rule_ref(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                    const float* v, const float* g, const float* beta, float* o) {
  check_shape(s);
  delta_rule_heads_ref(s, state, q, k, v, g, beta, o, 0, s.hv);
}

void delta_rule(const DeltaRuleShape& s, float* state, const float* q, const float* k,
                const float* v, const float* g, const float* beta, float* o, ThreadPool& pool) {
  check_shape(s);
  const IsaKernels* isa = isa_kernels();
  auto* run = isa ? isa->delta_rule_heads : &delta_rule_heads_ref;
  pool.parallel_for(
      s.hv, [&](int64_t h0, int64_t h1, int) { run(s, state, q, k, v, g, beta, o, h0, h1); });
}

}  // namespace invar
