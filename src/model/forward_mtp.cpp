// Model::mtp_forward: the MTP draft block, as llama.cpp builds it in graph_mtp of
// src/models/qwen3next.cpp, qwen35.cpp and qwen35moe.cpp (they differ only in the RoPE and the FFN
// kind, exactly as their trunks do):
//
//   x = eh_proj · [rmsnorm(embd[tok_p], enorm) | rmsnorm(hidden_{p−1}, hnorm)]   (embedding first)
//   x += attention(rmsnorm(x, attn_norm))   one full-attention layer over the MTP KV
//   x += ffn(rmsnorm(x, post_norm))
//   hidden_out = rmsnorm(x, head_norm);  logits = head · hidden_out
//
// hidden_{p−1} is the trunk's final hidden row after output_norm (llama.cpp's h_nextn), or the
// previous MTP row's hidden_out when drafts are chained. The layer is the trunk's own code
// (layer_run), so every rule of the trunk's numerics holds here too.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/forward.h"

namespace invar {

void Model::mtp_forward(std::span<const MtpChunk> batch, ForwardScratch& s,
                        ThreadPool& pool) const {
  INVAR_CHECK(w_->mtp.has_value(), "mtp_forward on a model without an MTP block");
  const Hparams& hp = hp_;
  const MtpWeights& mw = *w_->mtp;
  const int64_t E = hp.n_embd, V = hp.n_vocab;

  const size_t n_seqs = batch.size();
  s.reserve_seqs(hp, int64_t(n_seqs));
  if (s.mtp_seqs.size() < n_seqs) s.mtp_seqs.resize(n_seqs);
  int64_t m = 0, context = 0;
  for (size_t i = 0; i < n_seqs; ++i) {
    const MtpChunk& c = batch[i];
    INVAR_CHECK(c.n_tokens > 0 && c.pos0 >= 0 && c.logits && c.hidden_in,
                "empty MTP chunk, or no logits or hidden rows");
    INVAR_CHECK(c.kv_blocks && c.block_size > 0, "no MTP KV blocks");
    s.row0[i] = m;
    SeqChunk& q = s.mtp_seqs[i];  // what attention_layer reads: positions and the KV table
    q = SeqChunk{};
    q.tokens = c.tokens;
    q.n_tokens = c.n_tokens;
    q.pos0 = c.pos0;
    q.kv_blocks = c.kv_blocks;
    q.block_size = c.block_size;
    m += c.n_tokens;
    context = std::max(context, c.pos0 + c.n_tokens);
  }
  if (m == 0) return;
  s.reserve_rows(hp, m);
  s.reserve_kernel(hp, context, pool.size());
  const BatchRows rows{std::span<const SeqChunk>(s.mtp_seqs.data(), n_seqs), s.row0.data(), m};

  // cat[M][2E] = [rmsnorm(embd[tok], enorm) | rmsnorm(hidden_in, hnorm)]; x and h stage the rows.
  float* cat = s.mtp_cat.data();
  float* x = s.x.data();
  float* h = s.h.data();
  for (size_t i = 0; i < n_seqs; ++i) {
    const MtpChunk& c = batch[i];
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const int32_t tok = c.tokens[t];
      INVAR_CHECK(tok >= 0 && tok < V, "token id " + std::to_string(tok) + " out of range");
      const int64_t r = s.row0[i] + t;
      mw.embd.row_to_f32(tok, x + r * E);
      std::memcpy(h + r * E, c.hidden_in + t * E, size_t(E) * 4);
    }
  }
  for (int64_t r = 0; r < m; ++r) {
    rmsnorm_rows(x + r * E, mw.enorm.data(), 1, E, hp.rms_eps, cat + r * 2 * E);
    rmsnorm_rows(h + r * E, mw.hnorm.data(), 1, E, hp.rms_eps, cat + r * 2 * E + E);
  }
  matmul(mw.eh_proj, cat, m, h, pool, s.kernel);

  layer_run(hp, *w_, mw.block, rows, s, pool);

  rmsnorm_rows(h, mw.head_norm.data(), m, E, hp.rms_eps, x);
  for (size_t i = 0; i < n_seqs; ++i) {
    const MtpChunk& c = batch[i];
    if (c.hidden_out) std::memcpy(c.hidden_out, x + s.row0[i] * E, size_t(c.n_tokens * E) * 4);
  }
  logits_write(mw.head, x, batch, s.row0.data(), s, pool);
}

}  // namespace invar
