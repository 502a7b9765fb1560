// Model::forward: the layer loop (qwen3next-math.md §4, "Whole model"). One code path for
// prefill and decode (rule N4): a chunk of one token and a chunk of 4096 run the same
// operations per token; rows of all sequences share the matrix products (rule N1).
//
//   h = token_embd[tok]            (or the chunk's embd_rows[t]: image tokens)
//   for each layer: h += mixer(rmsnorm(h, attn_norm));  h += ffn(rmsnorm(h, post_norm))
//   logits = output · rmsnorm(h, output_norm)
#include "model/forward.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"

namespace invar {
namespace {

// A fresh buffer of n zeros when v holds fewer: for a ZeroedVector, untouched zero pages.
template <class V>
void grow(V& v, int64_t n) {
  if (int64_t(v.size()) >= n) return;
  V().swap(v);
  v.resize(size_t(n));
}

}  // namespace

void ForwardScratch::reserve_rows(const Hparams& hp, int64_t m) {
  if (m <= capacity) return;
  const int64_t E = hp.n_embd;
  const int64_t CONV = hp.gdn_conv_channels(), VAL = hp.gdn_value_dim(), KEY = hp.gdn_key_dim();
  const int64_t Hv = hp.ssm_dt_rank, H = hp.n_head, Hkv = hp.n_head_kv, D = hp.head_dim;
  const int64_t F = std::max({hp.is_moe() ? int64_t(0) : hp.n_ff, hp.n_ff_exp, hp.n_ff_shexp});
  const int64_t K = hp.n_expert_used;
  const int64_t W = hp.is_moe() ? moe_wave_rows(hp, m) : m;
  for (auto* v : {&h, &x, &out}) grow(*v, m * E);
  grow(ex_x, W * E);
  grow(qkv, m * CONV);
  grow(conv_out, m * CONV);
  grow(z, m * VAL);
  if (hp.legacy_ssm_in) grow(legacy_in, m * (2 * KEY + 2 * VAL));
  if (hp.mtp) grow(mtp_cat, m * 2 * E);
  grow(gq, m * KEY);
  grow(gk, m * KEY);
  grow(gv, m * VAL);
  grow(go, m * VAL);
  grow(ba, m * 2 * Hv);
  grow(beta, m * Hv);
  grow(gdecay, m * Hv);
  grow(qg, m * H * 2 * D);
  for (auto* v : {&aq, &agate, &ao}) grow(*v, m * H * D);
  grow(ak, m * Hkv * D);
  grow(av, m * Hkv * D);
  grow(fgate, W * F);
  grow(fup, W * F);
  if (hp.is_moe()) {
    grow(shgate, m * hp.n_ff_shexp);
    grow(shup, m * hp.n_ff_shexp);
    grow(router, m * hp.n_expert);
    grow(sel, m * K);
    grow(sel_w, m * K);
    grow(ex_off, hp.n_expert + 1);
    grow(ex_rows, m * K);
    grow(ex_pos, m * K);
    grow(ex_out, m * K * E);
    grow(shexp_g, m);
    moe_jobs.reserve(2 * 64 + 1);
  }
  capacity = m;
}

void ForwardScratch::reserve_seqs(const Hparams& hp, int64_t n_seqs) {
  grow(row0, n_seqs);
  grow(last_x, n_seqs * hp.n_embd);
  grow(last_logits, n_seqs * hp.n_vocab);
}

void ForwardScratchDeleter::operator()(ForwardScratch* s) const {
  delete s;
}

ForwardScratchPtr Model::scratch_make(int64_t max_rows, int64_t max_seqs) const {
  ForwardScratchPtr s(new ForwardScratch());
  s->reserve_seqs(hp_, max_seqs);
  s->reserve_rows(hp_, max_rows);
  return s;
}

void ForwardScratch::reserve_kernel(const Hparams& hp, int64_t context, int n_threads) {
  int64_t ctx = std::max<int64_t>(kernel_context, 64);
  while (ctx < context) ctx *= 2;
  const int64_t need = std::max(matmul_scratch_floats(n_threads),
                                attention_scratch_floats(ctx, hp.head_dim, n_threads));
  grow(kernel, need);
  kernel_context = ctx;
}

void layer_run(const Hparams& hp, const ModelWeights& w, const LayerWeights& lw,
               const BatchRows& rows, ForwardScratch& s, ThreadPool& pool) {
  const int64_t m = rows.m, E = hp.n_embd;
  float* h = s.h.data();
  float* x = s.x.data();
  float* out = s.out.data();
  // Every step here works row by row, so rows split across the pool's threads (rule N2).
  rows_parallel(pool, m, [&](int64_t a, int64_t b) {
    rmsnorm_rows(h + a * E, lw.attn_norm.data(), b - a, E, hp.rms_eps, x + a * E);
  });
  if (lw.recurrent)
    gdn_layer(hp, lw, rows, s, pool, x, out);
  else
    attention_layer(hp, w, lw, rows, s, pool, x, out);
  rows_parallel(pool, m, [&](int64_t a, int64_t b) {
    add_inplace(h + a * E, out + a * E, (b - a) * E);
    rmsnorm_rows(h + a * E, lw.post_norm.data(), b - a, E, hp.rms_eps, x + a * E);
  });
  ffn_layer(hp, lw, m, s, pool, x, out);
  rows_parallel(pool, m,
                [&](int64_t a, int64_t b) { add_inplace(h + a * E, out + a * E, (b - a) * E); });
}

void Model::forward(std::span<const SeqChunk> batch, ForwardScratch& s, ThreadPool& pool) const {
  const Hparams& hp = hp_;
  const ModelWeights& w = *w_;
  const int64_t E = hp.n_embd, V = hp.n_vocab;

  const int64_t n_seqs = int64_t(batch.size());
  s.reserve_seqs(hp, n_seqs);
  int64_t m = 0, context = 0;
  for (int64_t i = 0; i < n_seqs; ++i) {
    const SeqChunk& c = batch[size_t(i)];
    INVAR_CHECK(c.n_tokens > 0 && c.pos0 >= 0 && c.logits, "empty chunk or no logits buffer");
    INVAR_CHECK(c.state || hp.n_recurrent_layers() == 0, "no recurrent state");
    INVAR_CHECK(c.kv_blocks || hp.n_attention_layers() == 0, "no KV blocks");
    INVAR_CHECK(c.block_size > 0 || hp.n_attention_layers() == 0, "block_size");
    s.row0[size_t(i)] = m;
    m += c.n_tokens;
    context = std::max(context, c.pos0 + c.n_tokens);
  }
  if (m == 0) return;
  s.reserve_rows(hp, m);
  s.reserve_kernel(hp, context, pool.size());
  BatchRows rows{batch, s.row0.data(), m};

  // h[M][E] = token_embd[tok], or the chunk's own input row (an image token's embedding)
  for (int64_t i = 0; i < n_seqs; ++i) {
    const SeqChunk& c = batch[size_t(i)];
    INVAR_CHECK(!c.rope_pos || hp.rope_imrope, "IMROPE positions for a model without IMROPE");
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      int32_t tok = c.tokens[t];
      INVAR_CHECK(tok >= 0 && tok < V, "token id " + std::to_string(tok) + " out of range");
      float* hr = s.h.data() + (s.row0[size_t(i)] + t) * E;
      if (c.embd_rows && c.embd_rows[t])
        std::memcpy(hr, c.embd_rows[t], size_t(E) * 4);
      else
        w.token_embd.row_to_f32(tok, hr);
    }
  }

  for (const LayerWeights& lw : w.layers) layer_run(hp, w, lw, rows, s, pool);

  // The final hidden rows (the MTP head's input where asked for), then the logits.
  float* x = s.x.data();
  rmsnorm_rows(s.h.data(), w.output_norm.data(), m, E, hp.rms_eps, x);
  for (int64_t i = 0; i < n_seqs; ++i) {
    const SeqChunk& c = batch[size_t(i)];
    if (c.hidden) std::memcpy(c.hidden, x + s.row0[size_t(i)] * E, size_t(c.n_tokens * E) * 4);
  }
  logits_write(w.output, x, batch, s.row0.data(), s, pool);
}

}  // namespace invar
