// The Gated DeltaNet layer (qwen3next-math.md §4 "GatedDeltaNet layer", llama.cpp
// src/models/qwen3next.cpp:399-566 and qwen35.cpp):
//
//   qkv = attn_qkv·x [CONV];  z = attn_gate·x [VAL]
//   β[h] = sigmoid(b[h]);  g[h] = softplus(a[h] + dt_bias[h]) · ssm_a[h]
//   u = silu(causal_conv(qkv));  q, k = l2norm per k-head;  v = per v-head
//   o = delta_rule(q, k, v, g, β);  o = rmsnorm(o, ssm_norm) · silu(z) per head
//   out = ssm_out · o
//
// The conv and the delta rule are token-sequential, so running them in segments split at the
// checkpoint positions gives the same bits as one run; between segments the state is copied
// out (rule N5: the state at a block boundary comes from the same computation as the KV).
#include <algorithm>
#include <cstring>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/conv.h"
#include "kernels/delta_rule.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/forward.h"

namespace invar {

int64_t gdn_state_floats(const Hparams& hp) {
  return (hp.ssm_d_conv - 1) * hp.gdn_conv_channels() +
         hp.ssm_dt_rank * hp.ssm_d_state * hp.ssm_d_state;
}

namespace {

// Legacy qwen3next ssm_in: per k-head [q(Dk) k(Dk) v(r·Dv) z(r·Dv)] → qkv [q | k | v], z.
void legacy_split(const Hparams& hp, const float* in, int64_t m, float* qkv, float* z) {
  const int64_t Dk = hp.ssm_d_state, Hk = hp.ssm_n_group, r = hp.ssm_dt_rank / Hk;
  const int64_t KEY = hp.gdn_key_dim(), VAL = hp.gdn_value_dim(), CONV = hp.gdn_conv_channels();
  const int64_t rv = r * Dk;  // Dv == Dk
  const int64_t group = 2 * Dk + 2 * rv;
  for (int64_t t = 0; t < m; ++t) {
    const float* src = in + t * (2 * KEY + 2 * VAL);
    float* dq = qkv + t * CONV;
    float* dz = z + t * VAL;
    for (int64_t kh = 0; kh < Hk; ++kh) {
      const float* g = src + kh * group;
      std::memcpy(dq + kh * Dk, g, size_t(Dk) * 4);
      std::memcpy(dq + KEY + kh * Dk, g + Dk, size_t(Dk) * 4);
      std::memcpy(dq + 2 * KEY + kh * rv, g + 2 * Dk, size_t(rv) * 4);
      std::memcpy(dz + kh * rv, g + 2 * Dk + rv, size_t(rv) * 4);
    }
  }
}

// β and g per row and v-head from the raw projections in ba (qwen3next's ssm_ba holds per
// k-head [b(r), a(r)]; qwen35*'s rows are [b(Hv) | a(Hv)] in plain v-head order).
void gates(const Hparams& hp, const LayerWeights& lw, int64_t t0, int64_t t1, ForwardScratch& s) {
  const int64_t Hv = hp.ssm_dt_rank, Hk = hp.ssm_n_group, r = Hv / Hk;
  const float* ba = s.ba.data();  // [M][2Hv]
  for (int64_t t = t0; t < t1; ++t) {
    const float* row = ba + t * 2 * Hv;
    for (int64_t h = 0; h < Hv; ++h) {
      float b, a;
      if (hp.arch == Arch::qwen3next) {
        int64_t kh = h / r, j = h % r;
        b = row[kh * 2 * r + j];
        a = row[kh * 2 * r + r + j];
      } else {
        b = row[h];
        a = row[Hv + h];
      }
      s.beta[size_t(t * Hv + h)] = det_sigmoid(b);
      s.gdecay[size_t(t * Hv + h)] = det_softplus(a + lw.dt_bias[size_t(h)]) * lw.ssm_a[size_t(h)];
    }
  }
}

// Every product that reads x (the in-projections and the β / α ones), in one dispatch; then
// qkv [M][CONV], z [M][VAL] and ba [M][2Hv] hold their rows.
void gdn_project(const Hparams& hp, const LayerWeights& lw, const float* x, int64_t m,
                 ForwardScratch& s, ThreadPool& pool) {
  const int64_t Hv = hp.ssm_dt_rank;
  float* ba = s.ba.data();
  MatmulJob jobs[4];
  int n = 0;
  if (lw.ssm_in.n() > 0) {
    jobs[n++] = {&lw.ssm_in, x, m, s.legacy_in.data()};
  } else {
    jobs[n++] = {&lw.ssm_qkv, x, m, s.qkv.data()};
    jobs[n++] = {&lw.ssm_gate, x, m, s.z.data()};
  }
  if (hp.arch == Arch::qwen3next) {
    jobs[n++] = {&lw.ssm_ba, x, m, ba};
  } else {
    // matmul writes dense rows, so the raw β / α land in beta / gdecay first and are
    // interleaved into ba's [b | a] rows before the gates overwrite those buffers.
    jobs[n++] = {&lw.ssm_beta, x, m, s.beta.data()};
    jobs[n++] = {&lw.ssm_alpha, x, m, s.gdecay.data()};
  }
  matmul_jobs({jobs, size_t(n)}, pool, s.kernel);
  if (lw.ssm_in.n() > 0) legacy_split(hp, s.legacy_in.data(), m, s.qkv.data(), s.z.data());
  if (hp.arch != Arch::qwen3next) {
    for (int64_t t = 0; t < m; ++t) {
      std::memcpy(ba + t * 2 * Hv, s.beta.data() + t * Hv, size_t(Hv) * 4);
      std::memcpy(ba + t * 2 * Hv + Hv, s.gdecay.data() + t * Hv, size_t(Hv) * 4);
    }
  }
}

// The checkpoint cuts of one chunk, sorted by position: (end relative to pos0, index).
void collect_cuts(const SeqChunk& c, std::vector<std::pair<int64_t, int64_t>>& cuts) {
  cuts.clear();
  for (int64_t i = 0; i < c.n_checkpoints; ++i) {
    int64_t rel = c.checkpoint_pos[i] - c.pos0;
    INVAR_CHECK(rel >= 1 && rel <= c.n_tokens, "checkpoint position " +
                                                   std::to_string(c.checkpoint_pos[i]) +
                                                   " outside chunk at " + std::to_string(c.pos0));
    cuts.emplace_back(rel, i);
  }
  std::sort(cuts.begin(), cuts.end());
}

}  // namespace

void gdn_layer(const Hparams& hp, const LayerWeights& lw, const BatchRows& b, ForwardScratch& s,
               ThreadPool& pool, const float* x, float* out) {
  const int64_t m = b.m;
  const int64_t Dk = hp.ssm_d_state, Hk = hp.ssm_n_group, Hv = hp.ssm_dt_rank, Dv = Dk;
  const int64_t Kc = hp.ssm_d_conv;
  const int64_t KEY = hp.gdn_key_dim(), VAL = hp.gdn_value_dim(), CONV = hp.gdn_conv_channels();
  const int64_t layer_floats = gdn_state_floats(hp);
  const int64_t conv_floats = (Kc - 1) * CONV;
  const int64_t state_off = lw.state_index * layer_floats;

  // Projections for every row of the batch together.
  float* qkv = s.qkv.data();  // [M][CONV]
  float* z = s.z.data();      // [M][VAL]
  gdn_project(hp, lw, x, m, s, pool);
  rows_parallel(pool, m, [&](int64_t a, int64_t c) { gates(hp, lw, a, c, s); });

  // Causal conv + SiLU per sequence, token-sequential, cut at checkpoints.
  float* u = s.conv_out.data();  // [M][CONV]
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const SeqChunk& c = b.seqs[i];
    const int64_t r0 = b.row0[i];
    float* conv_state = c.state + state_off;  // [Kc−1][CONV]
    collect_cuts(c, s.cuts);
    int64_t a = 0;
    for (size_t ci = 0; ci <= s.cuts.size(); ++ci) {
      int64_t e = ci < s.cuts.size() ? s.cuts[ci].first : c.n_tokens;
      if (e > a)
        conv1d_silu(qkv + (r0 + a) * CONV, lw.conv_w.data(), conv_state, e - a, CONV, Kc,
                    u + (r0 + a) * CONV, pool);
      if (ci < s.cuts.size())
        std::memcpy(c.checkpoint_dst[s.cuts[ci].second] + state_off, conv_state,
                    size_t(conv_floats) * 4);
      a = e;
    }
  }

  // q, k [M][Hk][Dk] L2-normalised per head; v [M][Hv][Dv].
  float* q = s.gq.data();
  float* k = s.gk.data();
  float* v = s.gv.data();
  rows_parallel(pool, m, [&](int64_t a, int64_t c) {
    for (int64_t t = a; t < c; ++t) {
      const float* ur = u + t * CONV;
      l2norm_rows(ur, Hk, Dk, hp.rms_eps, q + t * KEY);
      l2norm_rows(ur + KEY, Hk, Dk, hp.rms_eps, k + t * KEY);
      std::memcpy(v + t * VAL, ur + 2 * KEY, size_t(VAL) * 4);
    }
  });

  // Delta rule per sequence, cut at the same checkpoints.
  float* o = s.go.data();  // [M][Hv][Dv]
  const DeltaRuleShape shape0{0, Hk, Hv, Dk, Dv, hp.gdn_tiled_heads()};
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const SeqChunk& c = b.seqs[i];
    const int64_t r0 = b.row0[i];
    float* ssm = c.state + state_off + conv_floats;  // [Hv][Dv][Dk]
    collect_cuts(c, s.cuts);
    int64_t a = 0;
    for (size_t ci = 0; ci <= s.cuts.size(); ++ci) {
      int64_t e = ci < s.cuts.size() ? s.cuts[ci].first : c.n_tokens;
      if (e > a) {
        DeltaRuleShape sh = shape0;
        sh.n_tokens = e - a;
        const int64_t r = r0 + a;
        delta_rule(sh, ssm, q + r * KEY, k + r * KEY, v + r * VAL, s.gdecay.data() + r * Hv,
                   s.beta.data() + r * Hv, o + r * VAL, pool);
      }
      if (ci < s.cuts.size())
        std::memcpy(c.checkpoint_dst[s.cuts[ci].second] + state_off + conv_floats, ssm,
                    size_t(layer_floats - conv_floats) * 4);
      a = e;
    }
  }

  rows_parallel(pool, m, [&](int64_t a, int64_t c) {
    rmsnorm_gated_rows(o + a * VAL, lw.ssm_norm.data(), z + a * VAL, (c - a) * Hv, Dv, hp.rms_eps,
                       o + a * VAL);
  });
  matmul(lw.ssm_out, o, m, out, pool, s.kernel);
}

}  // namespace invar
