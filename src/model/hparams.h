// Hyper-parameters of the hybrid families, read from GGUF exactly as llama.cpp reads them
// (docs/qwen3next-math.md §1 and the qwen35 section). Letters in brackets are
// the names the math document uses.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/rope.h"

namespace invar {

enum class Arch { qwen3next, qwen35, qwen35moe };
std::string_view arch_name(Arch a);

struct Hparams {
  // The positions a request may reach: context_length, or with RoPE scaling the scaled length
  // (original context × factor) when that is longer.
  int64_t n_ctx_limit() const;

  Arch arch = Arch::qwen3next;
  int64_t n_ctx_train = 0;          // context_length: positions the model was trained for
  int64_t n_embd = 0;               // [E] residual width
  int64_t n_layer = 0;              // [L] trunk layers (block_count − nextn_predict_layers)
  int64_t n_layer_nextn = 0;        // nextn_predict_layers: MTP blocks after the trunk
  int64_t n_vocab = 0;              // [V] rows of token_embd == tokenizer.ggml.tokens length
  int64_t n_head = 0;               // [H] query heads of attention layers
  int64_t n_head_kv = 0;            // [Hkv] key/value heads (GQA groups), defaults to n_head
  int64_t head_dim = 0;             // [D] key_length == value_length
  int64_t n_rot = 0;                // [R] rotated dims per head (partial rotary), <= head_dim
  double rope_freq_base = 10000.0;  // θ base
  std::array<int32_t, 4> rope_sections{};  // qwen35*: IMROPE sections (t, h, w, e); zeros otherwise
  bool rope_imrope = false;                // qwen35*: multi-section RoPE; qwen3next: plain NEOX
  RopeScaling rope_scaling{};              // rope.scaling.*: none, linear or yarn
  float rms_eps = 1e-6f;                   // every RMSNorm and the q/k L2 norm
  // FFN
  int64_t n_ff = 0;           // [F] dense FFN width (qwen35), fallback for expert sizes
  int64_t n_expert = 0;       // [NE] experts (MoE archs), 0 for dense
  int64_t n_expert_used = 0;  // [K] experts chosen per token
  int64_t n_ff_exp = 0;       // [Fe] expert FFN width
  int64_t n_ff_shexp = 0;     // [Fs] shared-expert FFN width
  // Gated DeltaNet
  int64_t ssm_d_conv = 0;   // [Kc] causal conv kernel size
  int64_t ssm_d_state = 0;  // [Dk] key head dim == value head dim (Dv)
  int64_t ssm_n_group = 0;  // [Hk] key heads
  int64_t ssm_dt_rank = 0;  // [Hv] value heads
  int64_t ssm_d_inner = 0;  // Dv·Hv
  int64_t full_attention_interval = 4;
  std::vector<bool> recurrent;  // [L] true: Gated DeltaNet layer, false: full attention
  // Derived from tensors present
  bool tied_embeddings = false;     // no output.weight: logits use token_embd
  bool fused_gate_up_exps = false;  // ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps
  bool legacy_ssm_in = false;       // qwen3next: ssm_in instead of attn_qkv + attn_gate
  // The MTP (next-token prediction) block blk.<n_layer>: a full-attention layer with the trunk's
  // FFN kind plus nextn.{eh_proj, enorm, hnorm}; it only proposes speculative drafts.
  bool mtp = false;                // the block is present and every tensor of it checked
  std::string mtp_unusable;        // why a file that declares MTP blocks cannot run them, or ""
  bool mtp_own_embd = false;       // nextn.embed_tokens (else token_embd)
  bool mtp_own_head = false;       // nextn.shared_head_head (else output)
  bool mtp_own_head_norm = false;  // nextn.shared_head_norm (else output_norm)

  bool is_moe() const { return arch != Arch::qwen35; }
  // qwen35*: v-head h reads k-head h % Hk (tiled); qwen3next: h / (Hv/Hk) (grouped).
  bool gdn_tiled_heads() const { return arch != Arch::qwen3next; }
  int64_t gdn_key_dim() const { return ssm_d_state * ssm_n_group; }                  // KEY = Dk·Hk
  int64_t gdn_value_dim() const { return ssm_d_inner; }                              // VAL = Dv·Hv
  int64_t gdn_conv_channels() const { return 2 * gdn_key_dim() + gdn_value_dim(); }  // CONV
  int64_t n_recurrent_layers() const;
  int64_t n_attention_layers() const;
};

// Reads and validates; throws GgufError naming the key, tensor or shape that is wrong.
// Checks every tensor the forward pass will use (presence, shape, supported dtype).
Hparams hparams_from_gguf(const GgufFile& f);

// One-line-per-field description for `invar inspect`.
std::string hparams_describe(const Hparams& hp);

// Largest dimension a model may have: keeps every product of three dims inside int64.
inline constexpr int64_t kMaxTensorDim = int64_t(1) << 24;

}  // namespace invar
