// The feed-forward half of every layer (qwen3next-math.md §4 "MoE", qwen35 "FFN"):
//
//   dense (qwen35):  out = down · (silu(gate·y) ⊙ up·y)
//   MoE:  p = softmax(router·y);  sel = top-K(p);  w = p[sel] / max(Σ p[sel], 6.1035e-5)
//         out = Σ_k w_k · expert_{sel_k}(y)  +  sigmoid(shexp_gate_inp·y) · shared_expert(y)
//
// Rows routed to one expert are gathered and go through that expert's products together; the
// matmul's per-row result does not depend on which other rows are present (rule N1), so the
// bits of a token do not depend on the batch. The K expert outputs of a row are then summed in
// selection order (rule N6 fixes that order).
#include <algorithm>
#include <cstring>

#include "core/detmath.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/select.h"
#include "model/forward.h"

namespace invar {
namespace {

// out[M][E] = down · (silu(gate·x) ⊙ up·x); gate and up in one dispatch.
void swiglu_block(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
                  int64_t m, ForwardScratch& s, ThreadPool& pool, float* out) {
  const int64_t f = gate.n();
  float* g = s.fgate.data();
  float* u = s.fup.data();
  const MatmulJob gate_up[] = {{&gate, x, m, g}, {&up, x, m, u}};
  matmul_jobs(gate_up, pool, s.kernel);
  rows_parallel(
      pool, m, [&](int64_t a, int64_t b) { swiglu(g + a * f, u + a * f, (b - a) * f, g + a * f); });
  matmul(down, g, m, out, pool, s.kernel);
}

// Rows of a wave up to which its gather and SwiGLU run on the calling thread: one decode step's
// K ≤ 16 routed rows cost ~1 µs each, less than a dispatch.
constexpr int64_t kCheapRows = 16;

// One routed expert's rows inside a wave: gathered rows [r0, r0 + n) of the wave.
struct WaveExpert {
  int64_t e, r0, n;
};

// The routing slots j = row·K + k grouped by expert: order[] lists them expert by expert (ids
// ascending, each expert's slots in row order, a counting sort), off[e] is where expert e's run
// starts, and pos[j] is slot j's place in order[] (its row of ex_out).
void moe_slots_sort(const int32_t* sel, int64_t n_slots, int64_t n_expert, int64_t* off,
                    int64_t* order, int64_t* pos) {
  std::fill(off, off + n_expert + 1, int64_t(0));
  for (int64_t j = 0; j < n_slots; ++j) ++off[sel[j] + 1];
  for (int64_t e = 0; e < n_expert; ++e) off[e + 1] += off[e];
  for (int64_t j = 0; j < n_slots; ++j) {
    const int64_t p = off[sel[j]]++;
    order[p] = j;
    pos[j] = p;
  }
  for (int64_t e = n_expert; e > 0; --e) off[e] = off[e - 1];
  off[0] = 0;
}

void moe(const Hparams& hp, const LayerWeights& lw, int64_t m, ForwardScratch& s, ThreadPool& pool,
         const float* x, float* out) {
  const int64_t E = hp.n_embd, NE = hp.n_expert, K = hp.n_expert_used;
  const int64_t Fe = hp.n_ff_exp, Fs = lw.shexp_gate.n();
  float* router = s.router.data();  // [M][NE]
  int32_t* sel = s.sel.data();      // [M][K]
  float* sel_w = s.sel_w.data();    // [M][K]
  float* sg = s.shexp_g.data();     // [M] shared-expert gate logits
  float* shg = s.shgate.data();     // [M][Fs]
  float* shu = s.shup.data();       // [M][Fs]
  // Every product that reads x, in one dispatch.
  const MatmulJob from_x[] = {{&lw.router, x, m, router},
                              {&lw.shexp_gate_inp, x, m, sg},
                              {&lw.shexp_gate, x, m, shg},
                              {&lw.shexp_up, x, m, shu}};
  matmul_jobs(from_x, pool, s.kernel);
  rows_parallel(pool, m, [&](int64_t a, int64_t b) {
    for (int64_t t = a; t < b; ++t) moe_route(router + t * NE, NE, K, sel + t * K, sel_w + t * K);
    swiglu(shg + a * Fs, shu + a * Fs, (b - a) * Fs, shg + a * Fs);
  });

  // Experts in id order, packed into waves of up to W gathered rows; each expert's rows in row
  // order. A row's bits do not depend on which wave or dispatch computes it (rule N1). The downs
  // write straight into ex_out, whose rows follow the sorted slots.
  const int64_t W = moe_wave_rows(hp, m);
  int64_t* off = s.ex_off.data();     // [NE + 1]
  int64_t* order = s.ex_rows.data();  // [M·K]
  int64_t* pos = s.ex_pos.data();     // [M·K]
  moe_slots_sort(sel, m * K, NE, off, order, pos);
  float* ex_out = s.ex_out.data();  // [M·K][E] expert outputs in sorted-slot order
  float* ex_x = s.ex_x.data();      // [W][E]
  float* fg = s.fgate.data();       // [W][Fe]
  float* fu = s.fup.data();         // [W][Fe]
  WaveExpert wave[64];
  std::vector<MatmulJob>& jobs = s.moe_jobs;
  bool shared_down = false;
  for (int64_t e = 0, base = 0; e < NE;) {
    int64_t n_wave = 0, rows = 0;
    for (; e < NE && n_wave < 64; ++e) {
      const int64_t n = off[e + 1] - off[e];
      if (n == 0) continue;
      if (rows > 0 && rows + n > W) break;
      wave[n_wave++] = {e, rows, n};
      rows += n;
    }
    if (n_wave == 0) break;
    // One row (a decode step): every expert reads x itself, nothing to gather.
    if (m > 1)
      rows_parallel(
          pool, rows,
          [&](int64_t a, int64_t b) {
            for (int64_t i = a; i < b; ++i)
              std::memcpy(ex_x + i * E, x + (order[base + i] / K) * E, size_t(E) * 4);
          },
          kCheapRows);
    const float* wave_x = m > 1 ? ex_x : x;
    const int64_t wave_x_stride = m > 1 ? E : 0;
    jobs.clear();
    for (int64_t i = 0; i < n_wave; ++i) {
      const WaveExpert& we = wave[i];
      const ExpertWeights& ew = lw.experts[size_t(we.e)];
      const float* xe = wave_x + we.r0 * wave_x_stride;
      jobs.push_back({&ew.gate, xe, we.n, fg + we.r0 * Fe});
      jobs.push_back({&ew.up, xe, we.n, fu + we.r0 * Fe});
    }
    matmul_jobs(jobs, pool, s.kernel);
    rows_parallel(
        pool, rows,
        [&](int64_t a, int64_t b) { swiglu(fg + a * Fe, fu + a * Fe, (b - a) * Fe, fg + a * Fe); },
        kCheapRows);
    jobs.clear();
    for (int64_t i = 0; i < n_wave; ++i) {
      const WaveExpert& we = wave[i];
      jobs.push_back(
          {&lw.experts[size_t(we.e)].down, fg + we.r0 * Fe, we.n, ex_out + (base + we.r0) * E});
    }
    if (!shared_down) jobs.push_back({&lw.shexp_down, shg, m, out});
    shared_down = true;
    matmul_jobs(jobs, pool, s.kernel);
    base += rows;
  }
  if (!shared_down) matmul(lw.shexp_down, shg, m, out, pool, s.kernel);

  // out = (Σ_k w_k · expert_k) + sigmoid(g) · shared, the expert sum in selection order; each
  // thread sums its rows in its own [E] slice of ex_x (W ≥ M rows, so every thread has one).
  rows_parallel(pool, m, [&](int64_t a, int64_t b, int ti) {
    float* acc = ex_x + ti * E;
    for (int64_t t = a; t < b; ++t) {
      float* orow = out + t * E;
      const float gs = det_sigmoid(sg[t]);
      std::memset(acc, 0, size_t(E) * 4);
      for (int64_t k = 0; k < K; ++k)
        scale_add_inplace(acc, ex_out + pos[t * K + k] * E, sel_w[t * K + k], E);
      for (int64_t j = 0; j < E; ++j) orow[j] = acc[j] + gs * orow[j];
    }
  });
}

}  // namespace

void ffn_layer(const Hparams& hp, const LayerWeights& lw, int64_t m, ForwardScratch& s,
               ThreadPool& pool, const float* x, float* out) {
  if (hp.is_moe())
    moe(hp, lw, m, s, pool, x, out);
  else
    swiglu_block(lw.ffn_gate, lw.ffn_up, lw.ffn_down, x, m, s, pool, out);
}

}  // namespace invar
