// Random-weight models in llama.cpp's GGUF layout for qwen3next, qwen35 and qwen35moe: the same
// keys, tensor names and shapes as a converted checkpoint, weights drawn from a counter-based
// generator so the file is the same bytes on every machine for a given seed.
//
// The vocabulary is not this layer's business (src/forge does not depend on src/tokenizer): the
// caller writes the tokenizer.ggml.* keys into the same GgufWriter and passes n_vocab.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "gguf/gguf.h"
#include "model/hparams.h"
#include "quant/dtype.h"

namespace invar {

// The MTP block make-model writes after the trunk (nextn_predict_layers = 1).
enum class MtpKind {
  none,
  random,  // random weights like the trunk's: its drafts are mostly wrong
  // A model whose drafts are often right, for tests of speculative decoding: the trunk's
  // residual-writing projections are scaled down so its greedy choice is mostly a function of
  // the current token's embedding (a bigram table, output · token_embd), and the MTP block
  // passes that embedding through (eh_proj = [I | 0], enorm = 1) to the same LM head. The small
  // context-dependent part of the trunk makes some drafts wrong.
  bigram,
};

struct MakeModelConfig {
  Arch arch = Arch::qwen3next;
  std::string name = "invar-random";       // general.name
  int64_t n_ctx = 4096;                    // context_length
  int64_t n_embd = 256;                    // [E]
  int64_t n_layer = 8;                     // [L]
  int64_t n_head = 4;                      // [H]
  int64_t n_head_kv = 2;                   // [Hkv]
  int64_t head_dim = 64;                   // [D]
  int64_t n_rot = 16;                      // [R] rotated dims per head
  double rope_base = 1e7;                  // rope.freq_base (Qwen3-Next's real value)
  std::array<int32_t, 4> rope_sections{};  // qwen35*: all zero → derived from n_rot (see .cpp)
  // rope.scaling.* as the converter writes it from an HF rope_scaling: "" writes no key, else
  // "linear" or "yarn" with the factor (and, for yarn, the original context).
  std::string rope_scaling;
  double rope_scaling_factor = 1.0;
  int64_t rope_scaling_orig_ctx = 0;  // yarn: 0 → n_ctx / factor
  float rms_eps = 1e-6f;
  int64_t n_ff = 512;           // [F] dense FFN width (qwen35); written for the MoE archs too
  int64_t n_expert = 8;         // [NE] (MoE archs)
  int64_t n_expert_used = 2;    // [K]
  int64_t n_ff_exp = 128;       // [Fe]
  int64_t n_ff_shexp = 256;     // [Fs]
  int64_t ssm_conv = 4;         // [Kc]
  int64_t ssm_state = 32;       // [Dk] = Dv
  int64_t ssm_groups = 2;       // [Hk]
  int64_t ssm_v_heads = 4;      // [Hv]
  int64_t interval = 4;         // full_attention_interval
  bool tied = false;            // omit output.weight
  bool fused_gate_up = false;   // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
  MtpKind mtp = MtpKind::none;  // MTP block blk.<L>: attention + FFN + nextn.{eh_proj,enorm,hnorm,
                                // shared_head_norm}
  bool mtp_own_head = false;    // also nextn.embed_tokens and nextn.shared_head_head (else the
                                // MTP head reads token_embd and output, as llama.cpp falls back)
  DType type = DType::F32;      // matrices; norms, ssm_a, dt bias, conv and routers stay F32
  // A llama-quantize preset ("q4_k_m", ...) or a type name (forge/quant_preset.h); when set it
  // replaces `type` and chooses each matrix's type as llama-quantize would.
  std::string quant;
  uint64_t seed = 0;
};

// Checks the configuration (throws invar::Error naming the flag-level field that is wrong).
void make_model_validate(const MakeModelConfig& c, int64_t n_vocab);

// Writes general.*, <arch>.* and every tensor for a vocabulary of n_vocab tokens into w.
// Keys are set first, so tokenizer keys the caller adds afterwards follow them, as in
// converted files.
void make_model(const MakeModelConfig& c, int64_t n_vocab, GgufWriter& w);

// Copies the tokenizer.* keys of an existing GGUF (a vocabulary source); returns n_vocab.
int64_t make_model_copy_vocab(const GgufFile& src, GgufWriter& w);

// Element i of the approximately N(0, 1) stream make_model draws tensor `name` from for `seed`: a
// pure function of (seed, name, i), for other random files written the same way (the mmproj).
double make_model_normal(uint64_t seed, const std::string& name, uint64_t i);

}  // namespace invar
