// Shapes from the Hugging Face config.json of each checkpoint (text_config for Qwen3.5), as
// mirrored in THUDM/slime scripts/models/{qwen3-next-80B-A3B,qwen3.5-35B-A3B,qwen3.5-27B}.sh and
// the Qwen/Qwen3-Next-80B-A3B-Instruct model card: hidden_size → E, num_hidden_layers → L,
// num_attention_heads / num_key_value_heads / head_dim → H / Hkv / D, partial_rotary_factor 0.25
// → R = D/4, linear_num_key_heads / linear_num_value_heads / linear_key_head_dim → Hk / Hv / Dk,
// linear_conv_kernel_dim → Kc, num_experts / num_experts_per_tok / moe_intermediate_size /
// shared_expert_intermediate_size → NE / K / Fe / Fs, intermediate_size → F,
// full_attention_interval 4, rope_theta 1e7. The vocabulary comes from --vocab (the checkpoints'
// own: 151936 rows for Qwen3-Next, 248320 for Qwen3.5).
#include "forge/model_presets.h"

namespace invar {
namespace {

MakeModelConfig hybrid(Arch arch, int64_t E, int64_t L, int64_t H, int64_t Hkv, int64_t Hv) {
  MakeModelConfig c;
  c.arch = arch;
  c.n_ctx = 262144;
  c.n_embd = E;
  c.n_layer = L;
  c.n_head = H;
  c.n_head_kv = Hkv;
  c.head_dim = 256;
  c.n_rot = 64;
  c.rope_base = 1e7;
  if (arch != Arch::qwen3next) c.rope_sections = {11, 11, 10, 0};
  c.ssm_conv = 4;
  c.ssm_state = 128;
  c.ssm_groups = 16;
  c.ssm_v_heads = Hv;
  c.interval = 4;
  return c;
}

MakeModelConfig qwen3_next_80b() {
  MakeModelConfig c = hybrid(Arch::qwen3next, 2048, 48, 16, 2, 32);
  c.n_ff = 5120;
  c.n_expert = 512;
  c.n_expert_used = 10;
  c.n_ff_exp = 512;
  c.n_ff_shexp = 512;
  return c;
}

MakeModelConfig qwen35_35b_a3b() {
  MakeModelConfig c = hybrid(Arch::qwen35moe, 2048, 40, 16, 2, 32);
  c.n_ff = 512;
  c.n_expert = 256;
  c.n_expert_used = 8;
  c.n_ff_exp = 512;
  c.n_ff_shexp = 512;
  return c;
}

MakeModelConfig qwen35_27b() {
  MakeModelConfig c = hybrid(Arch::qwen35, 5120, 64, 24, 4, 48);
  c.n_ff = 17408;
  return c;
}

const ModelPreset kPresets[] = {
    {"qwen3-next-80b-a3b",
     "Qwen3-Next-80B-A3B (qwen3next): E 2048, 48 layers (1 in 4 attention), 512 experts of 512, "
     "10 used, shared expert 512",
     qwen3_next_80b()},
    {"qwen3.5-35b-a3b",
     "Qwen3.5-35B-A3B (qwen35moe): E 2048, 40 layers, 256 experts of 512, 8 used, shared 512",
     qwen35_35b_a3b()},
    {"qwen3.5-27b", "Qwen3.5-27B (qwen35, dense): E 5120, 64 layers, FFN 17408", qwen35_27b()},
};

}  // namespace

const ModelPreset* model_preset_find(std::string_view name) {
  for (const ModelPreset& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

std::string model_presets_help() {
  std::string s;
  for (const ModelPreset& p : kPresets)
    s += "\n  " + std::string(p.name) + ": " + std::string(p.description);
  return s;
}

}  // namespace invar
