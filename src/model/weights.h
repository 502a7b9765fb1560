// Every tensor the forward pass reads, bound to the mmap'd GGUF. Matrices point into the
// mapping and are used there, never copied; the small 1-D vectors (norms, biases, ssm_a)
// are converted to F32 copies, since they are a few KiB and may be stored in any type.
// Shapes are GGUF `ne` order {K, N}: N rows of K. Letters as in qwen3next-math.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/hparams.h"

namespace invar {

// One expert's SwiGLU block, sliced out of the stacked 3-D tensors (or the fused gate_up one).
struct ExpertWeights {
  Matrix gate;  // {E, Fe}
  Matrix up;    // {E, Fe}
  Matrix down;  // {Fe, E}
};

struct LayerWeights {
  bool recurrent = false;        // Gated DeltaNet (true) or full attention (false)
  int64_t state_index = -1;      // recurrent: index among GDN layers (state layout order)
  int64_t attn_index = -1;       // attention: index among attention layers (KV block layout)
  std::vector<float> attn_norm;  // [E]
  std::vector<float> post_norm;  // [E] post_attention_norm

  // Full attention
  Matrix wq;                  // {E, 2·D·H}: per head [q(D), gate(D)]
  Matrix wk;                  // {E, D·Hkv}
  Matrix wv;                  // {E, D·Hkv}
  Matrix wo;                  // {D·H, E}
  std::vector<float> q_norm;  // [D]
  std::vector<float> k_norm;  // [D]

  // Gated DeltaNet
  Matrix ssm_qkv;             // {E, CONV}: [q all k-heads | k all k-heads | v all v-heads]
  Matrix ssm_gate;            // {E, VAL}: z
  Matrix ssm_in;              // legacy qwen3next {E, 2KEY+2VAL}, per k-head [q k v(r·Dv) z(r·Dv)]
  Matrix ssm_ba;              // qwen3next {E, 2·Hv}: per k-head [b(r), a(r)]
  Matrix ssm_beta;            // qwen35* {E, Hv}
  Matrix ssm_alpha;           // qwen35* {E, Hv}
  std::vector<float> conv_w;  // [CONV][Kc]
  std::vector<float> dt_bias;   // [Hv]
  std::vector<float> ssm_a;     // [Hv] = −e^A_log
  std::vector<float> ssm_norm;  // [Dv]
  Matrix ssm_out;               // {VAL, E}

  // Dense FFN (qwen35)
  Matrix ffn_gate;  // {E, F}
  Matrix ffn_up;    // {E, F}
  Matrix ffn_down;  // {F, E}

  // MoE (qwen3next, qwen35moe)
  Matrix router;                       // {E, NE} ffn_gate_inp
  std::vector<ExpertWeights> experts;  // [NE]
  Matrix shexp_gate_inp;               // {E, 1} sigmoid gate of the shared expert
  Matrix shexp_gate;                   // {E, Fs}
  Matrix shexp_up;                     // {E, Fs}
  Matrix shexp_down;                   // {Fs, E}
};

// The MTP block (llama.cpp graph_mtp of qwen3next / qwen35 / qwen35moe). Absent optional tensors
// are resolved here to the trunk's, as llama.cpp falls back.
struct MtpWeights {
  LayerWeights block;            // full attention (attn_index 0 of the MTP KV) + trunk FFN kind
  Matrix eh_proj;                // {2E, E}: input [enorm(embd) | hnorm(hidden)]
  std::vector<float> enorm;      // [E]
  std::vector<float> hnorm;      // [E]
  std::vector<float> head_norm;  // [E] nextn.shared_head_norm, else output_norm
  Matrix embd;                   // {E, V} nextn.embed_tokens, else token_embd
  Matrix head;                   // {E, V} nextn.shared_head_head, else output
};

struct ModelWeights {
  Matrix token_embd;                 // {E, V}
  std::vector<float> output_norm;    // [E]
  Matrix output;                     // {E, V}; token_embd's mapping when tied
  std::vector<LayerWeights> layers;  // [L] trunk only
  std::optional<MtpWeights> mtp;     // when hp.mtp
  RopeFreqs rope;                    // attention layers' rotary tables (trunk and MTP)
};

// Binds every tensor (hp from hparams_from_gguf, which has already validated shapes and types;
// the binder re-checks each shape it relies on and throws GgufError naming the tensor).
ModelWeights weights_bind(const GgufFile& f, const Hparams& hp);

}  // namespace invar
