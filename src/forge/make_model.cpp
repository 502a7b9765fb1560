// Random-weight GGUF models. Scales follow docs/qwen3next-math.md ("Random-weight
// test models: caveat") and the reference tiny models: residual-writing projections std 0.2,
// embeddings 0.15, input projections 0.4/sqrt(fan_in), effective norm weights ≈ 1, ssm_a < 0.
// With these, greedy continuations vary instead of repeating the input token.
#include "forge/make_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "forge/quant_preset.h"
#include "model/hparams.h"
#include "quant/quantize.h"

namespace invar {

namespace {

// 256 GiB of F32: the writer streams, one chunk of rows at a time, so only the disk limits it.
constexpr int64_t kMaxElements = int64_t(64) << 30;

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Element i of a tensor's stream: a counter-based draw, so a value depends only on (seed, tensor
// name, i). Approximately N(0, 1): Irwin–Hall sum of four 16-bit uniforms from one 64-bit draw,
// centred and scaled to unit variance. Integer arithmetic, then two exact-order double ops: the
// same bits everywhere, and no libm.
double normal_at(uint64_t key, uint64_t i) {
  const uint64_t r = splitmix64(key + i * 0xd1b54a32d192ed03ull);
  const uint64_t s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
  // Each uniform is (k + 0.5) / 65536, mean 1/2, variance 1/12; four of them: mean 2, variance 1/3.
  const double u = (double(s) + 2.0) / 65536.0 - 2.0;
  return u * 1.7320508075688772;  // sqrt(3)
}
double uniform_at(uint64_t key, uint64_t i) {
  return double(splitmix64(key + i * 0xd1b54a32d192ed03ull) >> 11) * 0x1.0p-53;
}

// How a tensor is initialised.
enum class Init {
  Normal,
  Norm,
  NegUniform,
  One,       // every element 1
  Identity,  // {2E, E}: row j has 1 at column j (passes the first half of its input through)
};

// MtpKind::bigram: the factor on the residual-writing projections (trunk and MTP block), small
// enough that the token embedding mostly decides the next token.
constexpr double kBigramResidualScale = 0.05;

struct Spec {
  Init init;
  double scale;  // std for Normal / Norm deviation; range for NegUniform
  bool matrix;   // takes the weight type of --type (otherwise F32)
};

// A tensor of the file before its values are drawn: name, shape and initialisation.
struct PendingTensor {
  std::string name;
  std::vector<int64_t> ne;
  Spec spec;
};

class TensorList {
 public:
  void add(const std::string& name, const std::vector<int64_t>& ne, Spec s) {
    list_.push_back({name, ne, s});
  }
  std::vector<PendingTensor>& list() { return list_; }

 private:
  std::vector<PendingTensor> list_;
};

// Draws rows [r0, r1) of tensor t and encodes them in type `type` at out. Element i of the
// tensor (row i / ne[0]) is a function of (seed, name, i) only, so rows can be drawn in any
// order, by any thread, and the file is the same bytes.
void tensor_rows(const MakeModelConfig& c, const PendingTensor& t, DType type, int64_t r0,
                 int64_t r1, uint8_t* out) {
  const int64_t row = t.ne[0];
  const int64_t row_bytes = dtype_row_bytes(type, row);
  const uint64_t key = splitmix64(c.seed ^ fnv1a(t.name));
  std::vector<float> v(static_cast<size_t>(row));
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t j = 0; j < row; ++j) {
      const uint64_t i = uint64_t(r * row + j);
      double x = 0;
      switch (t.spec.init) {
        case Init::Normal:
          x = t.spec.scale * normal_at(key, i);
          break;
        case Init::Norm:
          x = 1.0 + t.spec.scale * normal_at(key, i);
          break;
        case Init::NegUniform:
          x = -(0.3 + t.spec.scale * uniform_at(key, i));
          break;
        case Init::One:
          x = 1.0;
          break;
        case Init::Identity:
          x = j == r ? 1.0 : 0.0;
          break;
      }
      v[size_t(j)] = float(x);
    }
    quantize_row(type, v.data(), out + (r - r0) * row_bytes, row);
  }
}

std::array<int32_t, 4> sections_for(const MakeModelConfig& c) {
  if (c.rope_sections != std::array<int32_t, 4>{}) return c.rope_sections;
  // Split the n_rot/2 rotary pairs over (t, h, w) as the converter's default [11, 11, 10, 0]
  // does for 32 pairs: every pair is covered, so text RoPE equals NEOX.
  const int32_t p = int32_t(c.n_rot / 2);
  const int32_t s0 = (p + 2) / 3;
  const int32_t s1 = (p - s0 + 1) / 2;
  return {s0, s1, p - s0 - s1, 0};
}

[[noreturn]] void bad(const std::string& msg) {
  throw Error("make-model: " + msg);
}

void check_dim(const char* flag, int64_t v) {
  if (v < 1 || v > kMaxTensorDim)
    bad(std::string(flag) + " " + std::to_string(v) + " is out of range (1 to 16777216)");
}

// The shapes and initialisations every layer kind draws from.
struct LayerSpecs {
  Spec norm, in_proj, out_proj;
};

// Norms, mixer (Gated DeltaNet or full attention) and FFN of the layer whose names start with b.
void add_layer(TensorList& t, const MakeModelConfig& c, const std::string& b, bool recurrent,
               const LayerSpecs& s) {
  const bool moe = c.arch != Arch::qwen35;
  const int64_t E = c.n_embd, H = c.n_head, Hkv = c.n_head_kv, D = c.head_dim;
  const int64_t Dk = c.ssm_state, Hk = c.ssm_groups, Hv = c.ssm_v_heads;
  const int64_t KEY = Dk * Hk, VAL = Dk * Hv, CONV = 2 * KEY + VAL;
  const int64_t NE = c.n_expert, Fe = c.n_ff_exp, Fs = c.n_ff_shexp, F = c.n_ff;
  t.add(b + "attn_norm.weight", {E}, s.norm);
  t.add(b + "post_attention_norm.weight", {E}, s.norm);
  if (recurrent) {
    t.add(b + "attn_qkv.weight", {E, CONV}, s.in_proj);
    t.add(b + "attn_gate.weight", {E, VAL}, s.in_proj);
    t.add(b + "ssm_conv1d.weight", {c.ssm_conv, CONV}, {Init::Normal, 0.5, false});
    t.add(b + "ssm_dt.bias", {Hv}, {Init::Normal, 0.5, false});
    t.add(b + "ssm_a", {Hv}, {Init::NegUniform, 1.7, false});
    if (c.arch == Arch::qwen3next) {
      t.add(b + "ssm_ba.weight", {E, 2 * Hv}, s.in_proj);
    } else {
      t.add(b + "ssm_beta.weight", {E, Hv}, s.in_proj);
      t.add(b + "ssm_alpha.weight", {E, Hv}, s.in_proj);
    }
    t.add(b + "ssm_norm.weight", {Dk}, s.norm);
    t.add(b + "ssm_out.weight", {VAL, E}, s.out_proj);
  } else {
    t.add(b + "attn_q.weight", {E, 2 * D * H}, s.in_proj);
    t.add(b + "attn_k.weight", {E, D * Hkv}, s.in_proj);
    t.add(b + "attn_v.weight", {E, D * Hkv}, s.in_proj);
    t.add(b + "attn_output.weight", {D * H, E}, s.out_proj);
    t.add(b + "attn_q_norm.weight", {D}, s.norm);
    t.add(b + "attn_k_norm.weight", {D}, s.norm);
  }
  if (moe) {
    // Router and shared-expert gate stay F32 as the converter keeps them.
    t.add(b + "ffn_gate_inp.weight", {E, NE}, {Init::Normal, 0.1, false});
    if (c.fused_gate_up) {
      t.add(b + "ffn_gate_up_exps.weight", {E, 2 * Fe, NE}, s.in_proj);
    } else {
      t.add(b + "ffn_gate_exps.weight", {E, Fe, NE}, s.in_proj);
      t.add(b + "ffn_up_exps.weight", {E, Fe, NE}, s.in_proj);
    }
    t.add(b + "ffn_down_exps.weight", {Fe, E, NE}, s.out_proj);
    t.add(b + "ffn_gate_inp_shexp.weight", {E}, {Init::Normal, 0.05, false});
    t.add(b + "ffn_gate_shexp.weight", {E, Fs}, s.in_proj);
    t.add(b + "ffn_up_shexp.weight", {E, Fs}, s.in_proj);
    t.add(b + "ffn_down_shexp.weight", {Fs, E}, s.out_proj);
  } else {
    t.add(b + "ffn_gate.weight", {E, F}, s.in_proj);
    t.add(b + "ffn_up.weight", {E, F}, s.in_proj);
    t.add(b + "ffn_down.weight", {F, E}, s.out_proj);
  }
}

// The MTP block after the trunk, in the layout llama.cpp's load_block_mtp reads.
void add_mtp_block(TensorList& t, const MakeModelConfig& c, const LayerSpecs& s, int64_t V) {
  const int64_t E = c.n_embd;
  const std::string b = "blk." + std::to_string(c.n_layer) + ".";
  add_layer(t, c, b, false, s);
  if (c.mtp == MtpKind::bigram) {
    t.add(b + "nextn.eh_proj.weight", {2 * E, E}, {Init::Identity, 0, true});
    t.add(b + "nextn.enorm.weight", {E}, {Init::One, 0, false});
  } else {
    t.add(b + "nextn.eh_proj.weight", {2 * E, E},
          {Init::Normal, 0.4 / std::sqrt(double(2 * E)), true});
    t.add(b + "nextn.enorm.weight", {E}, s.norm);
  }
  t.add(b + "nextn.hnorm.weight", {E}, s.norm);
  // bigram: the trunk's output_norm (by falling back to it) keeps the MTP head on the trunk's
  // scale.
  if (c.mtp != MtpKind::bigram) t.add(b + "nextn.shared_head_norm.weight", {E}, s.norm);
  if (c.mtp_own_head) {
    t.add(b + "nextn.embed_tokens.weight", {E, V}, {Init::Normal, 0.15, true});
    t.add(b + "nextn.shared_head_head.weight", {E, V}, {Init::Normal, 0.25, true});
  }
}

// Every tensor of the model in file order, values not drawn yet.
std::vector<PendingTensor> list_tensors(const MakeModelConfig& c, int64_t n_vocab) {
  const int64_t E = c.n_embd, V = n_vocab;
  const double residual = c.mtp == MtpKind::bigram ? kBigramResidualScale : 1.0;
  const LayerSpecs s{{Init::Norm, 0.1, false},
                     {Init::Normal, 0.4 / std::sqrt(double(E)), true},  // sqrt is IEEE-exact
                     {Init::Normal, 0.2 * residual, true}};
  TensorList t;
  t.add("token_embd.weight", {E, V}, {Init::Normal, 0.15, true});
  t.add("output_norm.weight", {E}, s.norm);
  if (!c.tied) t.add("output.weight", {E, V}, {Init::Normal, 0.25, true});
  for (int64_t i = 0; i < c.n_layer; ++i)
    add_layer(t, c, "blk." + std::to_string(i) + ".", (i + 1) % c.interval != 0, s);
  if (c.mtp != MtpKind::none) add_mtp_block(t, c, s, V);
  return std::move(t.list());
}

QuantScheme scheme_of(const MakeModelConfig& c) {
  if (c.quant.empty()) return quant_scheme_pure(c.type);
  auto s = quant_scheme_parse(c.quant);
  if (!s)
    bad("--type '" + c.quant + "' is neither a llama-quantize preset (" + quant_preset_names() +
        ") nor a weight type (" + quantize_supported_list() + ")");
  return *s;
}

// The type of each tensor: F32 for the small ones, the scheme's choice for the matrices.
std::vector<DType> plan_types(const MakeModelConfig& c, const std::vector<PendingTensor>& ts) {
  QuantModelInfo m;
  m.n_layer = c.n_layer + (c.mtp != MtpKind::none ? 1 : 0);  // llama-quant counts every block
  m.n_expert = c.arch == Arch::qwen35 ? 0 : c.n_expert;
  m.n_gqa = c.n_head / c.n_head_kv;
  std::vector<QuantTensor> qt;
  qt.reserve(ts.size());
  for (const PendingTensor& t : ts) qt.push_back({t.name, t.ne, t.spec.matrix});
  return quant_plan(scheme_of(c), m, qt);
}

}  // namespace

void make_model_validate(const MakeModelConfig& c, int64_t n_vocab) {
  const bool moe = c.arch != Arch::qwen35;
  check_dim("--ctx", c.n_ctx);
  check_dim("--embd", c.n_embd);
  check_dim("--layers", c.n_layer);
  check_dim("--heads", c.n_head);
  check_dim("--heads-kv", c.n_head_kv);
  check_dim("--head-dim", c.head_dim);
  check_dim("--rot", c.n_rot);
  check_dim("--conv", c.ssm_conv);
  check_dim("--state", c.ssm_state);
  check_dim("--groups", c.ssm_groups);
  check_dim("--v-heads", c.ssm_v_heads);
  check_dim("--interval", c.interval);
  check_dim("vocabulary size", n_vocab);
  if (moe) {
    check_dim("--experts", c.n_expert);
    check_dim("--experts-used", c.n_expert_used);
    check_dim("--ff-exp", c.n_ff_exp);
    check_dim("--ff-shexp", c.n_ff_shexp);
    if (c.n_expert_used > c.n_expert) bad("--experts-used must be <= --experts");
  }
  check_dim("--ff", c.n_ff);
  if (c.n_head % c.n_head_kv != 0) bad("--heads must be a multiple of --heads-kv");
  if (c.n_rot > c.head_dim || c.n_rot % 2 != 0) bad("--rot must be even and <= --head-dim");
  if (c.ssm_v_heads % c.ssm_groups != 0) bad("--v-heads must be a multiple of --groups");
  if (!(c.rope_base > 1.0)) bad("--rope-base must be > 1");
  if (!c.rope_scaling.empty()) {
    if (c.rope_scaling != "linear" && c.rope_scaling != "yarn" && c.rope_scaling != "none")
      bad("--rope-scaling must be none, linear or yarn");
    if (!(c.rope_scaling_factor >= 1.0 && c.rope_scaling_factor <= 1024.0))
      bad("--rope-scale must be in [1, 1024]");
    if (c.rope_scaling_orig_ctx < 0 || c.rope_scaling_orig_ctx > c.n_ctx)
      bad("--rope-orig-ctx must be in [0, --ctx]");
  }
  if (!(c.rms_eps > 0)) bad("rms eps must be > 0");
  if (c.fused_gate_up && !moe) bad("--fused-gate-up needs an MoE architecture");
  if (c.mtp_own_head && c.mtp == MtpKind::none) bad("--mtp-own-head needs --mtp");
  if (c.arch != Arch::qwen3next) {
    int64_t sum = 0;
    for (int32_t s : c.rope_sections) {
      if (s < 0) bad("--sections entries must be >= 0");
      sum += s;
    }
    if (sum == 0 && c.n_rot < 2) bad("--rot must be >= 2 for IMROPE sections");
  }
  // Rough element count, to refuse absurd sizes before allocating them.
  const int64_t E = c.n_embd;
  const int64_t per_layer_ffn =
      moe ? 3 * E * c.n_ff_exp * c.n_expert + 3 * E * c.n_ff_shexp : 3 * E * c.n_ff;
  const int64_t conv = 2 * c.ssm_state * c.ssm_groups + c.ssm_state * c.ssm_v_heads;
  const int64_t per_layer_mix = std::max(E * (conv + 2 * c.ssm_state * c.ssm_v_heads),
                                         E * c.head_dim * (3 * c.n_head + 2 * c.n_head_kv));
  const double total =
      double(E) * double(n_vocab) * 2 + double(c.n_layer) * double(per_layer_ffn + per_layer_mix);
  if (total > double(kMaxElements))
    bad("the model would have about " + std::to_string(int64_t(total)) +
        " weights; the limit is 2^36 (--layers and --experts make a smaller slice)");
  // Every matrix row must suit its type (or llama-quantize's fallback for it).
  plan_types(c, list_tensors(c, n_vocab));
}

void make_model(const MakeModelConfig& c, int64_t n_vocab, GgufWriter& w) {
  make_model_validate(c, n_vocab);
  const std::string a(arch_name(c.arch));
  const bool moe = c.arch != Arch::qwen35;
  const auto u32 = [](int64_t v) { return uint32_t(v); };
  w.set_string("general.architecture", a);
  w.set_string("general.name", c.name);
  w.set_u32(a + ".context_length", u32(c.n_ctx));
  w.set_u32(a + ".embedding_length", u32(c.n_embd));
  const bool mtp = c.mtp != MtpKind::none;
  w.set_u32(a + ".block_count", u32(c.n_layer + (mtp ? 1 : 0)));
  if (mtp) w.set_u32(a + ".nextn_predict_layers", 1);
  w.set_u32(a + ".feed_forward_length", u32(c.n_ff));
  w.set_u32(a + ".attention.head_count", u32(c.n_head));
  w.set_u32(a + ".attention.head_count_kv", u32(c.n_head_kv));
  w.set_u32(a + ".attention.key_length", u32(c.head_dim));
  w.set_u32(a + ".attention.value_length", u32(c.head_dim));
  w.set_u32(a + ".rope.dimension_count", u32(c.n_rot));
  if (c.arch != Arch::qwen3next) {
    const auto s = sections_for(c);
    w.set_i32_array(a + ".rope.dimension_sections", {s[0], s[1], s[2], s[3]});
  }
  w.set_f32(a + ".rope.freq_base", float(c.rope_base));
  if (!c.rope_scaling.empty()) {
    w.set_string(a + ".rope.scaling.type", c.rope_scaling);
    w.set_f32(a + ".rope.scaling.factor", float(c.rope_scaling_factor));
    if (c.rope_scaling == "yarn") {
      const int64_t orig =
          c.rope_scaling_orig_ctx > 0
              ? c.rope_scaling_orig_ctx
              : std::max<int64_t>(1, int64_t(double(c.n_ctx) / c.rope_scaling_factor));
      w.set_u32(a + ".rope.scaling.original_context_length", u32(orig));
    }
  }
  w.set_f32(a + ".attention.layer_norm_rms_epsilon", c.rms_eps);
  if (moe) {
    w.set_u32(a + ".expert_count", u32(c.n_expert));
    w.set_u32(a + ".expert_used_count", u32(c.n_expert_used));
    w.set_u32(a + ".expert_feed_forward_length", u32(c.n_ff_exp));
    w.set_u32(a + ".expert_shared_feed_forward_length", u32(c.n_ff_shexp));
  }
  w.set_u32(a + ".ssm.conv_kernel", u32(c.ssm_conv));
  w.set_u32(a + ".ssm.state_size", u32(c.ssm_state));
  w.set_u32(a + ".ssm.group_count", u32(c.ssm_groups));
  w.set_u32(a + ".ssm.time_step_rank", u32(c.ssm_v_heads));
  w.set_u32(a + ".ssm.inner_size", u32(c.ssm_state * c.ssm_v_heads));
  w.set_u32(a + ".full_attention_interval", u32(c.interval));
  const std::vector<PendingTensor> tensors = list_tensors(c, n_vocab);
  const std::vector<DType> types = plan_types(c, tensors);
  w.set_u32("general.file_type", scheme_of(c).file_type);
  for (size_t i = 0; i < tensors.size(); ++i) {
    w.add_tensor_rows(tensors[i].name, types[i], tensors[i].ne,
                      [c, t = tensors[i], type = types[i]](int64_t r0, int64_t r1, uint8_t* out) {
                        tensor_rows(c, t, type, r0, r1, out);
                      });
  }
}

int64_t make_model_copy_vocab(const GgufFile& src, GgufWriter& w) {
  int64_t n_vocab = -1;
  for (const auto& kv : src.kvs()) {
    if (kv.key.rfind("tokenizer.", 0) != 0) continue;
    w.set_value(kv.key, kv.value);
    if (kv.key == "tokenizer.ggml.tokens") n_vocab = int64_t(kv.value.arr_len);
  }
  if (n_vocab < 1) throw Error("make-model: '" + src.path() + "' has no tokenizer.ggml.tokens");
  return n_vocab;
}

double make_model_normal(uint64_t seed, const std::string& name, uint64_t i) {
  return normal_at(splitmix64(seed ^ fnv1a(name)), i);
}

}  // namespace invar
