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
#include <cstring>

#include "core/detmath.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/select.h"
#include "model/forward.h"

namespace invar {
namespace {

// out[M][E] = down · (silu(gate·x) ⊙ up·x)
void swiglu_block(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x,
                  int64_t m, ForwardScratch& s, ThreadPool& pool, float* out) {
  const int64_t f = gate.n();
  float* g = s.fgate.data();
  float* u = s.fup.data();
  matmul(gate, x, m, g, pool, s.kernel);
  matmul(up, x, m, u, pool, s.kernel);
  swiglu(g, u, m * f, g);
  matmul(down, g, m, out, pool, s.kernel);
}

void moe(const Hparams& hp, const LayerWeights& lw, int64_t m, ForwardScratch& s, ThreadPool& pool,
         const float* x, float* out) {
  const int64_t E = hp.n_embd, NE = hp.n_expert, K = hp.n_expert_used;
  float* router = s.router.data();  // [M][NE]
  int32_t* sel = s.sel.data();      // [M][K]
  float* sel_w = s.sel_w.data();    // [M][K]
  matmul(lw.router, x, m, router, pool, s.kernel);
  for (int64_t t = 0; t < m; ++t) moe_route(router + t * NE, NE, K, sel + t * K, sel_w + t * K);

  // Experts in id order; each one's rows in row order.
  float* ex_out = s.ex_out.data();  // [M][K][E]
  for (int64_t e = 0; e < NE; ++e) {
    int64_t n = 0;
    for (int64_t j = 0; j < m * K; ++j)
      if (sel[j] == e) s.ex_rows[size_t(n++)] = j;
    if (n == 0) continue;
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(s.ex_x.data() + i * E, x + (s.ex_rows[size_t(i)] / K) * E, size_t(E) * 4);
    const ExpertWeights& ew = lw.experts[size_t(e)];
    swiglu_block(ew.gate, ew.up, ew.down, s.ex_x.data(), n, s, pool, s.ex_y.data());
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(ex_out + s.ex_rows[size_t(i)] * E, s.ex_y.data() + i * E, size_t(E) * 4);
  }

  // Shared expert, gated by sigmoid of a scalar per row; written to out first.
  swiglu_block(lw.shexp_gate, lw.shexp_up, lw.shexp_down, x, m, s, pool, out);
  float* sg = s.shexp_g.data();  // [M]
  matmul(lw.shexp_gate_inp, x, m, sg, pool, s.kernel);

  // out = (Σ_k w_k · expert_k) + sigmoid(g) · shared, the expert sum in selection order.
  for (int64_t t = 0; t < m; ++t) {
    float* orow = out + t * E;
    const float gs = det_sigmoid(sg[t]);
    float* acc = s.ex_x.data();  // [E] reused: the routed sum of this row
    std::memset(acc, 0, size_t(E) * 4);
    for (int64_t k = 0; k < K; ++k)
      scale_add_inplace(acc, ex_out + (t * K + k) * E, sel_w[t * K + k], E);
    for (int64_t j = 0; j < E; ++j) orow[j] = acc[j] + gs * orow[j];
  }
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
