// The gated full-attention layer (qwen3next-math.md §4 "Full attention layer", llama.cpp
// src/models/qwen3next.cpp:240-316; qwen35* differ only in the RoPE, which RopeFreqs holds):
//
//   qg = attn_q·x [H][2D]: q_h = qg[h][0:D], gate_h = qg[h][D:2D]
//   k = attn_k·x [Hkv][D];  v = attn_v·x [Hkv][D]
//   q_h = rope(rmsnorm(q_h, q_norm), pos);  k_g = rope(rmsnorm(k_g, k_norm), pos)
//     pos: the token's slot, or its IMROPE (t, h, w) where the chunk gives rope_pos (images);
//     causality is by slot either way (llama.cpp's M-RoPE mask orders an image's tokens by
//     row, then column: their slot order)
//   o_h = softmax_{s≤t}(q_h·K_s[g] / sqrt(D)) · V_s[g]
//   out = attn_output · (o ⊙ sigmoid(gate))
//
// The new tokens' K and V are written into the paged blocks first; attention then reads the
// whole history 0..p through a KvView, so a token sees the same keys whether they were
// computed in this chunk or an earlier one (rule N4).
#include <cstring>

#include "core/detmath.h"
#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "model/forward.h"

namespace invar {

void attention_layer(const Hparams& hp, const ModelWeights& w, const LayerWeights& lw,
                     const BatchRows& b, ForwardScratch& s, ThreadPool& pool, const float* x,
                     float* out) {
  const int64_t m = b.m;
  const int64_t H = hp.n_head, Hkv = hp.n_head_kv, D = hp.head_dim;
  const int64_t HD = H * D, KVD = Hkv * D;

  float* qg = s.qg.data();       // [M][H][2D]
  float* q = s.aq.data();        // [M][H][D]
  float* gate = s.agate.data();  // [M][H][D]
  float* k = s.ak.data();        // [M][Hkv][D]
  float* v = s.av.data();        // [M][Hkv][D]
  float* o = s.ao.data();        // [M][H][D]
  const MatmulJob qkv[] = {{&lw.wq, x, m, qg}, {&lw.wk, x, m, k}, {&lw.wv, x, m, v}};
  matmul_jobs(qkv, pool, s.kernel);
  rows_parallel(pool, m, [&](int64_t a, int64_t c) {
    for (int64_t t = a; t < c; ++t) {
      for (int64_t hh = 0; hh < H; ++hh) {
        const float* src = qg + (t * H + hh) * 2 * D;
        rmsnorm_rows(src, lw.q_norm.data(), 1, D, hp.rms_eps, q + (t * H + hh) * D);
        std::memcpy(gate + (t * H + hh) * D, src + D, size_t(D) * 4);
      }
    }
    rmsnorm_rows(k + a * KVD, lw.k_norm.data(), (c - a) * Hkv, D, hp.rms_eps, k + a * KVD);
  });

  const AttentionShape shape0{0, 0, H, Hkv, D, det_rsqrt(float(D))};
  for (size_t i = 0; i < b.seqs.size(); ++i) {
    const SeqChunk& c = b.seqs[i];
    const int64_t r0 = b.row0[i], bs = c.block_size;
    // One block: [n_attn][2][bs][Hkv][D]; this layer's K then V sub-blocks.
    const int64_t k_off = (lw.attn_index * 2) * bs * KVD;
    const int64_t v_off = (lw.attn_index * 2 + 1) * bs * KVD;
    rows_parallel(pool, c.n_tokens, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t pos = c.pos0 + t, r = r0 + t;
        if (c.rope_pos)
          rope_apply_qk(w.rope, q + r * HD, H, k + r * KVD, Hkv, c.rope_pos[t]);
        else
          rope_apply_qk(w.rope, q + r * HD, H, k + r * KVD, Hkv, pos);
        float* blk = c.kv_blocks[pos / bs];
        std::memcpy(blk + k_off + (pos % bs) * KVD, k + r * KVD, size_t(KVD) * 4);
        std::memcpy(blk + v_off + (pos % bs) * KVD, v + r * KVD, size_t(KVD) * 4);
      }
    });
    const int64_t n_blocks = (c.pos0 + c.n_tokens + bs - 1) / bs;
    if (int64_t(s.kblk.size()) < n_blocks) {
      s.kblk.resize(size_t(n_blocks));
      s.vblk.resize(size_t(n_blocks));
    }
    for (int64_t bi = 0; bi < n_blocks; ++bi) {
      s.kblk[size_t(bi)] = c.kv_blocks[bi] + k_off;
      s.vblk[size_t(bi)] = c.kv_blocks[bi] + v_off;
    }
    const KvView view{s.kblk.data(), s.vblk.data(), bs, KVD};
    AttentionShape sh = shape0;
    sh.n_tokens = c.n_tokens;
    sh.pos0 = c.pos0;
    attention(sh, view, q + r0 * HD, o + r0 * HD, pool, s.kernel);
  }

  rows_parallel(pool, m, [&](int64_t a, int64_t c) {
    sigmoid_mul_inplace(o + a * HD, gate + a * HD, (c - a) * HD);
  });
  matmul(lw.wo, o, m, out, pool, s.kernel);
}

}  // namespace invar
