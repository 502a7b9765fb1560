// Internals of Model::forward shared by forward*.cpp: the scratch buffers and one function per
// layer kind. Not part of the model's interface (model.h is).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

#include "core/thread_pool.h"
#include "core/zero_pages.h"
#include "model/hparams.h"
#include "model/model.h"
#include "model/weights.h"

namespace invar {

// The rows of one forward call: sequence i owns rows row0[i] .. row0[i] + seqs[i].n_tokens − 1
// of every [M][·] activation buffer, in batch order.
struct BatchRows {
  std::span<const SeqChunk> seqs;
  const int64_t* row0 = nullptr;  // [n_seqs]
  int64_t m = 0;                  // [M] total rows
};

// Activations for up to `capacity` rows, allocated once for the largest batch seen (STYLE 10),
// as zero pages: a batch of m rows makes resident only the first m rows of each buffer.
// Widths are named by the math document's letters.
struct ForwardScratch {
  int64_t capacity = 0;
  ZeroedVector<float> h, x, out;  // [M][E] residual, normed input, layer output
  // Gated DeltaNet
  ZeroedVector<float> qkv;                        // [M][CONV] projection (conv input)
  ZeroedVector<float> z;                          // [M][VAL] output gate
  ZeroedVector<float> legacy_in;                  // [M][2KEY+2VAL] ssm_in projection (legacy files)
  ZeroedVector<float> conv_out;                   // [M][CONV]
  ZeroedVector<float> gq, gk, gv;                 // [M][Hk][Dk], [M][Hk][Dk], [M][Hv][Dv]
  ZeroedVector<float> ba;                         // [M][2·Hv] raw β and α projections
  ZeroedVector<float> beta, gdecay;               // [M][Hv]
  ZeroedVector<float> go;                         // [M][Hv][Dv] delta-rule output
  std::vector<std::pair<int64_t, int64_t>> cuts;  // (relative end, checkpoint index) of one seq
  // Attention
  ZeroedVector<float> qg;                // [M][H][2D]
  ZeroedVector<float> aq, agate, ao;     // [M][H][D]
  ZeroedVector<float> ak, av;            // [M][Hkv][D]
  std::vector<const float*> kblk, vblk;  // per-block K / V pointers of one attention layer
  // FFN
  ZeroedVector<float> fgate, fup;    // [max(M, W)][max(F, Fe, Fs)] (W: expert wave rows)
  ZeroedVector<float> shgate, shup;  // [M][Fs] shared expert
  ZeroedVector<float> router;        // [M][NE]
  std::vector<int32_t> sel;          // [M][K] chosen experts
  ZeroedVector<float> sel_w;         // [M][K] their weights
  std::vector<int64_t> ex_off;       // [NE + 1] where each expert's slots start in ex_rows
  std::vector<int64_t> ex_rows;      // [M·K] slots (row·K + k) sorted by expert, rows ascending
  std::vector<int64_t> ex_pos;       // [M·K] place of slot row·K + k in ex_rows
  ZeroedVector<float> ex_x;          // [W][E] gathered inputs of one wave of experts
  ZeroedVector<float> ex_out;        // [M·K][E] expert outputs before weighting, as ex_rows
  ZeroedVector<float> shexp_g;       // [M] shared-expert gate logits
  std::vector<MatmulJob> moe_jobs;   // the products of one wave of experts
  // Logits
  std::vector<int64_t> row0;        // [n_seqs]
  ZeroedVector<float> last_x;       // [n_seqs][E] last rows of last-only sequences
  ZeroedVector<float> last_logits;  // [n_seqs][V]
  // MTP head
  ZeroedVector<float> mtp_cat;     // [M][2E] [enorm(embd) | hnorm(hidden)], eh_proj's input
  std::vector<SeqChunk> mtp_seqs;  // [n_seqs] the MTP chunks as the attention layer reads them
  // Working memory of the matmul and attention kernels, one slice per pool thread
  int64_t kernel_context = 0;  // longest context `kernel` is sized for
  ZeroedVector<float> kernel;

  void reserve_rows(const Hparams& hp, int64_t m);
  void reserve_seqs(const Hparams& hp, int64_t n_seqs);
  // Kernel scratch for `n_threads` threads and attention over up to `context` positions; grows
  // the context in powers of two, so a growing sequence reallocates O(log context) times.
  void reserve_kernel(const Hparams& hp, int64_t context, int n_threads);
};

// One layer on the residual s.h[M][E]: h += mixer(rmsnorm(h, attn_norm)), then
// h += ffn(rmsnorm(h, post_norm)); s.x and s.out are its working rows.
void layer_run(const Hparams& hp, const ModelWeights& w, const LayerWeights& lw,
               const BatchRows& rows, ForwardScratch& s, ThreadPool& pool);

// Each writes the layer's contribution to the residual into out[M][E], reading x[M][E].
void gdn_layer(const Hparams& hp, const LayerWeights& lw, const BatchRows& b, ForwardScratch& s,
               ThreadPool& pool, const float* x, float* out);
void attention_layer(const Hparams& hp, const ModelWeights& w, const LayerWeights& lw,
                     const BatchRows& b, ForwardScratch& s, ThreadPool& pool, const float* x,
                     float* out);
void ffn_layer(const Hparams& hp, const LayerWeights& lw, int64_t m, ForwardScratch& s,
               ThreadPool& pool, const float* x, float* out);

// fn(begin, end) or fn(begin, end, thread) over disjoint ranges of [0, m) rows on the pool's
// threads; a step that runs row by row, so the split changes no bit (rule N2). Up to `grain` rows
// (a decode step) run on the calling thread: a dispatch costs a few µs on a quiet machine and can
// wait for a descheduled worker on a loaded one, more than a few cheap rows cost to run here.
template <class Fn>
void rows_parallel(ThreadPool& pool, int64_t m, Fn&& fn, int64_t grain = 4) {
  const ThreadPool::RangeFn range = [&](int64_t a, int64_t b, int ti) {
    if constexpr (std::is_invocable_v<Fn&, int64_t, int64_t, int>)
      fn(a, b, ti);
    else
      fn(a, b);
  };
  pool.parallel_for(m, range, grain);
}

// Rows of one wave of routed experts (all of them in one decode step): the experts of a wave run
// their gate and up products in one dispatch of the pool and their downs in a second.
inline int64_t moe_wave_rows(const Hparams& hp, int64_t m) {
  return std::max(m, std::min(m * hp.n_expert_used, int64_t(64)));
}

// Floats of one GDN layer's state: conv [Kc−1][CONV] then ssm [Hv][Dv][Dk].
int64_t gdn_state_floats(const Hparams& hp);

// logits = head · x for the rows of `batch` (x[M][E], sequence i from row0[i]): every row of an
// all_logits chunk into its buffer, the last row of the others gathered into one product.
template <class Chunk>
void logits_write(const Matrix& head, const float* x, std::span<const Chunk> batch,
                  const int64_t* row0, ForwardScratch& s, ThreadPool& pool) {
  const int64_t E = head.k(), V = head.n();
  int64_t n_last = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const Chunk& c = batch[i];
    const float* xr = x + row0[i] * E;
    if (c.all_logits) {
      matmul(head, xr, c.n_tokens, c.logits, pool, s.kernel);
    } else {
      std::memcpy(s.last_x.data() + n_last * E, xr + (c.n_tokens - 1) * E, size_t(E) * 4);
      ++n_last;
    }
  }
  if (n_last == 0) return;
  matmul(head, s.last_x.data(), n_last, s.last_logits.data(), pool, s.kernel);
  int64_t j = 0;
  for (const Chunk& c : batch) {
    if (c.all_logits) continue;
    std::memcpy(c.logits, s.last_logits.data() + j * V, size_t(V) * 4);
    ++j;
  }
}

}  // namespace invar
