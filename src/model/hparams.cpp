// Hyper-parameters and tensor validation for qwen3next / qwen35 / qwen35moe, following the keys,
// defaults and tensor shapes llama.cpp uses (docs/qwen3next-math.md §1-2 and the
// qwen35 section). Everything the forward pass will touch is checked here, so a file that
// passes cannot make the model code index out of range.
#include "model/hparams.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_set>

#include "core/detmath.h"
#include "gguf/types.h"

namespace invar {

namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw GgufError("model: " + msg);
}

// Trailing dimensions of 1 do not change a tensor (llama.cpp accepts {E, 1} for {E}).
std::vector<int64_t> strip_ones(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  return ne;
}

class KeyReader {
 public:
  KeyReader(const GgufFile& f, std::string prefix) : f_(f), p_(std::move(prefix)) {}
  std::string key(const char* k) const { return p_ + k; }
  bool has(const char* k) const { return f_.find(key(k)) != nullptr; }

  // A positive dimension; per-layer arrays are accepted when every entry is the same.
  int64_t dim(const char* k, int64_t def = -1) const {
    const std::string name = key(k);
    const GgufValue* v = f_.find(name);
    int64_t x = def;
    if (v && v->type == GgufType::ARRAY) {
      const std::vector<int64_t> a = f_.get_int_array(name);
      if (a.empty()) fail("key '" + name + "' is an empty array");
      if (std::any_of(a.begin(), a.end(), [&](int64_t e) { return e != a[0]; }))
        fail("key '" + name + "': per-layer values that differ are not supported");
      x = a[0];
    } else if (v) {
      x = f_.get_int(name);
    }
    if (!v && x < 1) fail("missing required key '" + name + "'");
    if (x < 1 || x > kMaxTensorDim)
      fail("key '" + name + "' = " + std::to_string(x) + " is out of range (1 to " +
           std::to_string(kMaxTensorDim) + ")");
    return x;
  }
  int64_t int_or(const char* k, int64_t def) const { return f_.get_int_or(key(k), def); }
  double num(const char* k, double def, bool required) const {
    if (required && !has(k)) fail("missing required key '" + key(k) + "'");
    return f_.get_float_or(key(k), def);
  }

 private:
  const GgufFile& f_;
  std::string p_;
};

// Looks tensors up, checks their shape and type, and remembers which ones the model uses.
class TensorChecker {
 public:
  explicit TensorChecker(const GgufFile& f) : f_(f) {}

  const GgufTensorInfo* optional(const std::string& name, const std::vector<int64_t>& want,
                                 bool f32_only = false) {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) return nullptr;
    used_.insert(name);
    if (strip_ones(t->ne) != strip_ones(want))
      fail("tensor '" + name + "' has shape " + tensor_shape_str(t->ne) + ", expected " +
           tensor_shape_str(want));
    const auto id = static_cast<uint32_t>(t->type);
    if (!dtype_supported(id))
      fail("tensor '" + name + "' has type " + ggml_type_label(id) + ", invar supports " +
           dtype_supported_list());
    if (f32_only && t->type != DType::F32)
      fail("tensor '" + name + "' has type " + ggml_type_label(id) +
           ", expected f32 (norms, ssm_a, ssm_dt.bias and ssm_conv1d are f32 in llama.cpp's "
           "layout)");
    return t;
  }
  const GgufTensorInfo* required(const std::string& name, const std::vector<int64_t>& want,
                                 bool f32_only = false) {
    const GgufTensorInfo* t = optional(name, want, f32_only);
    if (!t) fail("missing tensor '" + name + "' (expected shape " + tensor_shape_str(want) + ")");
    return t;
  }
  bool used(const std::string& name) const { return used_.count(name) != 0; }

 private:
  const GgufFile& f_;
  std::unordered_set<std::string> used_;
};

Arch parse_arch(const std::string& s) {
  if (s == "qwen3next") return Arch::qwen3next;
  if (s == "qwen35") return Arch::qwen35;
  if (s == "qwen35moe") return Arch::qwen35moe;
  fail("general.architecture '" + s +
       "' is not supported (invar runs qwen3next, qwen35, qwen35moe)");
}

// blk.N.… with N ≥ n_layer: an MTP block (checked by check_mtp when it is the one invar runs).
bool is_mtp_tensor(const std::string& name, int64_t n_layer) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot > 12) return false;
  int64_t n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    n = n * 10 + (name[i] - '0');
  }
  return n >= n_layer;
}

// {arch}.rope.scaling.*, read as llama.cpp reads them (type defaults to linear, factor 0 or absent
// means 1, the original context defaults to context_length, attn_factor multiplies) plus the YaRN
// keys the converter writes from the HF config (extrapolation, attention factor, beta fast/slow),
// which define the model's math in HF's rotary code. Anything that would change the rotation
// in a way invar does not compute is refused by name.
RopeScaling read_rope_scaling(const GgufFile& f, const KeyReader& k, int64_t n_ctx_train) {
  RopeScaling sc;
  const std::string type_key = k.key("rope.scaling.type");
  const std::string type = f.get_string_or(type_key, "linear");
  double factor = k.num("rope.scaling.factor", 0.0, false);
  if (!k.has("rope.scaling.factor")) factor = k.num("rope.scale_linear", 0.0, false);
  if (factor == 0.0) factor = 1.0;
  if (!(factor > 0.0 && factor <= 1e6))
    fail("key '" + k.key("rope.scaling.factor") + "' = " + std::to_string(factor) +
         " must be in (0, 1e6]");
  const double attn = k.num("rope.scaling.attn_factor", 1.0, false);
  if (!(attn > 0.0 && attn <= 1e3))
    fail("key '" + k.key("rope.scaling.attn_factor") + "' = " + std::to_string(attn) +
         " must be in (0, 1e3]");
  for (const char* unsupported : {"rope.scaling.alpha", "rope.scaling.yarn_log_multiplier"})
    if (k.num(unsupported, 0.0, false) != 0.0)
      fail("key '" + k.key(unsupported) + "' is set: invar does not implement that scaling");
  if (type == "none") return sc;
  if (type == "linear") {
    if (factor == 1.0 && attn == 1.0) return sc;  // llama.cpp's default: no scaling
    sc.type = RopeScalingType::linear;
    sc.factor = factor;
    sc.mscale = attn;
    return sc;
  }
  if (type != "yarn")
    fail("key '" + type_key + "' = '" + type +
         "': invar implements RoPE scaling none, linear and yarn");
  sc.type = RopeScalingType::yarn;
  sc.factor = factor;
  sc.n_ctx_orig = k.int_or("rope.scaling.original_context_length", n_ctx_train);
  if (sc.n_ctx_orig < 1 || sc.n_ctx_orig > (int64_t(1) << 40))
    fail("key '" + k.key("rope.scaling.original_context_length") +
         "' = " + std::to_string(sc.n_ctx_orig) + " is out of range");
  sc.ext_factor = k.num("rope.scaling.yarn_ext_factor", 1.0, false);
  sc.beta_fast = k.num("rope.scaling.yarn_beta_fast", 32.0, false);
  sc.beta_slow = k.num("rope.scaling.yarn_beta_slow", 1.0, false);
  if (!(sc.ext_factor >= 0.0 && sc.ext_factor <= 1.0))
    fail("key '" + k.key("rope.scaling.yarn_ext_factor") + "' must be in [0, 1]");
  if (!(sc.beta_fast > 0.0 && sc.beta_slow > 0.0 && sc.beta_fast < 1e6 && sc.beta_slow < 1e6))
    fail("keys '" + k.key("rope.scaling.yarn_beta_fast") + "' and '" +
         k.key("rope.scaling.yarn_beta_slow") + "' must be positive");
  // The attention factor: the file's, else HF's get_mscale (1 + 0.1·ln factor above 1); ggml
  // applies it only while extrapolation mixes in (llama.cpp cancels it otherwise).
  double yarn_attn = factor > 1.0 ? 1.0 + 0.1 * det_log_d(factor) : 1.0;
  if (k.has("rope.scaling.yarn_attn_factor")) {
    yarn_attn = k.num("rope.scaling.yarn_attn_factor", 1.0, false);
    if (!(yarn_attn > 0.0 && yarn_attn <= 1e3))
      fail("key '" + k.key("rope.scaling.yarn_attn_factor") + "' must be in (0, 1e3]");
  }
  sc.mscale = (sc.ext_factor != 0.0 ? yarn_attn : 1.0) * attn;
  return sc;
}

void read_keys(const GgufFile& f, Hparams& hp) {
  const KeyReader k(f, std::string(arch_name(hp.arch)) + ".");
  const int64_t ctx = k.int_or("context_length", -1);
  if (!k.has("context_length")) fail("missing required key '" + k.key("context_length") + "'");
  if (ctx < 1)
    fail("key '" + k.key("context_length") + "' = " + std::to_string(ctx) + " must be positive");
  hp.n_ctx_train = ctx;
  hp.n_embd = k.dim("embedding_length");
  const int64_t n_block = k.dim("block_count");
  hp.n_layer_nextn = k.int_or("nextn_predict_layers", 0);
  if (hp.n_layer_nextn < 0 || hp.n_layer_nextn >= n_block)
    fail("key '" + k.key("nextn_predict_layers") + "' = " + std::to_string(hp.n_layer_nextn) +
         " must be in [0, block_count " + std::to_string(n_block) + ")");
  hp.n_layer = n_block - hp.n_layer_nextn;
  // Each layer needs tensors, so a layer count above the tensor count is a lie: refuse it before
  // sizing anything by it.
  if (n_block > int64_t(f.tensors().size()))
    fail("key '" + k.key("block_count") + "' = " + std::to_string(n_block) + " exceeds the " +
         std::to_string(f.tensors().size()) + " tensors in the file");

  hp.n_head = k.dim("attention.head_count");
  hp.n_head_kv = k.dim("attention.head_count_kv", hp.n_head);
  if (hp.n_head % hp.n_head_kv != 0)
    fail("attention.head_count " + std::to_string(hp.n_head) +
         " is not a multiple of head_count_kv " + std::to_string(hp.n_head_kv));
  const int64_t def_hd = hp.n_embd / hp.n_head > 0 ? hp.n_embd / hp.n_head : 1;
  const int64_t kl = k.dim("attention.key_length", def_hd);
  const int64_t vl = k.dim("attention.value_length", def_hd);
  if (kl != vl)
    fail("attention.key_length " + std::to_string(kl) + " != attention.value_length " +
         std::to_string(vl) + " (the gated attention needs them equal)");
  hp.head_dim = kl;
  hp.n_rot = k.dim("rope.dimension_count", hp.head_dim);
  if (hp.n_rot > hp.head_dim || hp.n_rot % 2 != 0)
    fail("rope.dimension_count " + std::to_string(hp.n_rot) + " must be even and <= head dim " +
         std::to_string(hp.head_dim));
  hp.rope_freq_base = k.num("rope.freq_base", 10000.0, false);
  if (!(hp.rope_freq_base > 1.0))
    fail("rope.freq_base must be > 1, got " + std::to_string(hp.rope_freq_base));
  hp.rope_scaling = read_rope_scaling(f, k, hp.n_ctx_train);
  const double eps = k.num("attention.layer_norm_rms_epsilon", 0, true);
  if (!(float(eps) > 0 && eps < 1))
    fail("attention.layer_norm_rms_epsilon must be in (0, 1), got " + std::to_string(eps));
  hp.rms_eps = float(eps);

  hp.rope_sections = {0, 0, 0, 0};
  hp.rope_imrope = hp.arch != Arch::qwen3next;
  if (hp.rope_imrope) {
    const std::string key = k.key("rope.dimension_sections");
    if (!f.find(key)) fail("missing required key '" + key + "'");
    const std::vector<int64_t> s = f.get_int_array(key);
    if (s.size() > 4)
      fail("key '" + key + "' has " + std::to_string(s.size()) + " entries, at most 4 allowed");
    int64_t sum = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] < 0 || s[i] > kMaxTensorDim)
        fail("key '" + key + "' entry " + std::to_string(s[i]) + " is out of range");
      hp.rope_sections[i] = int32_t(s[i]);
      sum += s[i];
    }
    if (sum == 0) fail("key '" + key + "' sums to 0");
  }

  hp.n_ff =
      k.has("feed_forward_length") || hp.arch == Arch::qwen35 ? k.dim("feed_forward_length") : 0;
  if (hp.is_moe()) {
    hp.n_expert = k.dim("expert_count", 0);
    hp.n_expert_used = k.dim("expert_used_count", 0);
    if (hp.n_expert_used > hp.n_expert)
      fail("expert_used_count " + std::to_string(hp.n_expert_used) + " > expert_count " +
           std::to_string(hp.n_expert));
    const int64_t def_exp = hp.n_ff / hp.n_expert_used;
    if (!k.has("expert_feed_forward_length") && def_exp < 1)
      fail("missing key '" + k.key("expert_feed_forward_length") +
           "' (and no feed_forward_length to derive it from)");
    hp.n_ff_exp = k.dim("expert_feed_forward_length", def_exp);
    if (!k.has("expert_shared_feed_forward_length") && hp.n_ff < 1)
      fail("missing key '" + k.key("expert_shared_feed_forward_length") +
           "' (and no feed_forward_length)");
    hp.n_ff_shexp = k.dim("expert_shared_feed_forward_length", hp.n_ff);
  }

  hp.ssm_d_conv = k.dim("ssm.conv_kernel");
  hp.ssm_d_state = k.dim("ssm.state_size");
  hp.ssm_n_group = k.dim("ssm.group_count");
  hp.ssm_dt_rank = k.dim("ssm.time_step_rank");
  hp.ssm_d_inner = k.dim("ssm.inner_size");
  if (hp.ssm_d_inner % hp.ssm_dt_rank != 0 || hp.ssm_d_inner / hp.ssm_dt_rank != hp.ssm_d_state)
    fail("ssm.inner_size " + std::to_string(hp.ssm_d_inner) + " / ssm.time_step_rank " +
         std::to_string(hp.ssm_dt_rank) + " (head_v_dim) must equal ssm.state_size " +
         std::to_string(hp.ssm_d_state));
  if (hp.ssm_dt_rank % hp.ssm_n_group != 0)
    fail("ssm.time_step_rank " + std::to_string(hp.ssm_dt_rank) +
         " is not a multiple of ssm.group_count " + std::to_string(hp.ssm_n_group));

  hp.full_attention_interval = k.int_or("full_attention_interval", 4);
  if (hp.full_attention_interval < 1)
    fail("full_attention_interval must be >= 1, got " + std::to_string(hp.full_attention_interval));
  hp.recurrent.assign(size_t(hp.n_layer), false);
  const std::string rl_key = k.key("attention.recurrent_layers");
  if (f.find(rl_key)) {
    const std::vector<int64_t> rl = f.get_int_array(rl_key);
    if (int64_t(rl.size()) < hp.n_layer)
      fail("key '" + rl_key + "' has " + std::to_string(rl.size()) + " entries, expected " +
           std::to_string(n_block));
    for (int64_t i = 0; i < hp.n_layer; ++i) hp.recurrent[size_t(i)] = rl[size_t(i)] != 0;
  } else {
    for (int64_t i = 0; i < hp.n_layer; ++i)
      hp.recurrent[size_t(i)] = (i + 1) % hp.full_attention_interval != 0;
  }
}

void check_attention_tensors(TensorChecker& tc, const std::string& b, const Hparams& hp) {
  const int64_t E = hp.n_embd, H = hp.n_head, Hkv = hp.n_head_kv, D = hp.head_dim;
  tc.required(b + "attn_q.weight", {E, 2 * D * H});
  tc.required(b + "attn_k.weight", {E, D * Hkv});
  tc.required(b + "attn_v.weight", {E, D * Hkv});
  tc.required(b + "attn_output.weight", {D * H, E});
  tc.required(b + "attn_q_norm.weight", {D}, true);
  tc.required(b + "attn_k_norm.weight", {D}, true);
}

// The FFN of one layer (MoE or dense by arch); returns whether its experts' gate_up is fused.
bool check_ffn_tensors(TensorChecker& tc, const std::string& b, const Hparams& hp) {
  const int64_t E = hp.n_embd, NE = hp.n_expert, Fe = hp.n_ff_exp, Fs = hp.n_ff_shexp;
  const int64_t F = hp.n_ff;
  bool fused = false;
  if (hp.is_moe()) {
    tc.required(b + "ffn_gate_inp.weight", {E, NE});
    if (tc.optional(b + "ffn_gate_up_exps.weight", {E, 2 * Fe, NE})) {
      fused = true;
    } else {
      tc.required(b + "ffn_gate_exps.weight", {E, Fe, NE});
      tc.required(b + "ffn_up_exps.weight", {E, Fe, NE});
    }
    tc.required(b + "ffn_down_exps.weight", {Fe, E, NE});
    tc.required(b + "ffn_gate_inp_shexp.weight", {E});
    tc.required(b + "ffn_gate_shexp.weight", {E, Fs});
    tc.required(b + "ffn_up_shexp.weight", {E, Fs});
    tc.required(b + "ffn_down_shexp.weight", {Fs, E});
  } else {
    tc.required(b + "ffn_gate.weight", {E, F});
    tc.required(b + "ffn_up.weight", {E, F});
    tc.required(b + "ffn_down.weight", {F, E});
  }
  return fused;
}

// The MTP block as llama.cpp's qwen3next / qwen35 / qwen35moe load_block_mtp creates it: the
// norms and attention of a full-attention layer, the trunk's FFN kind, nextn.eh_proj {2E, E},
// nextn.enorm / hnorm, and optionally its own embedding, LM head and head norm.
void check_mtp_tensors(TensorChecker& tc, const Hparams& hp) {
  const int64_t E = hp.n_embd;
  const std::string b = "blk." + std::to_string(hp.n_layer) + ".";
  tc.required(b + "attn_norm.weight", {E}, true);
  tc.required(b + "post_attention_norm.weight", {E}, true);
  check_attention_tensors(tc, b, hp);
  check_ffn_tensors(tc, b, hp);
  tc.required(b + "nextn.eh_proj.weight", {2 * E, E});
  tc.required(b + "nextn.enorm.weight", {E}, true);
  tc.required(b + "nextn.hnorm.weight", {E}, true);
}

// Sets hp.mtp when the file carries one usable MTP block. A file without the block's tensors,
// or with more blocks than the one llama.cpp's MTP graph runs, keeps its trunk and says why.
void check_mtp(const GgufFile& f, TensorChecker& tc, Hparams& hp) {
  if (hp.n_layer_nextn == 0) return;
  if (hp.n_layer_nextn > 1) {
    hp.mtp_unusable = std::to_string(hp.n_layer_nextn) +
                      " MTP blocks; the MTP draft runs exactly one (as llama.cpp's does)";
    return;
  }
  const std::string b = "blk." + std::to_string(hp.n_layer) + ".";
  if (!f.find_tensor(b + "nextn.eh_proj.weight") && !f.find_tensor(b + "attn_norm.weight")) {
    hp.mtp_unusable = "nextn_predict_layers is 1 but the file has no MTP tensors";
    return;
  }
  try {
    check_mtp_tensors(tc, hp);
    const int64_t E = hp.n_embd, V = hp.n_vocab;
    hp.mtp_own_embd = tc.optional(b + "nextn.embed_tokens.weight", {E, V}) != nullptr;
    hp.mtp_own_head = tc.optional(b + "nextn.shared_head_head.weight", {E, V}) != nullptr;
    hp.mtp_own_head_norm = tc.optional(b + "nextn.shared_head_norm.weight", {E}, true) != nullptr;
    hp.mtp = true;
  } catch (const GgufError& e) {
    hp.mtp_unusable = e.what();
  }
}

void check_tensors(const GgufFile& f, Hparams& hp) {
  TensorChecker tc(f);
  const int64_t E = hp.n_embd;
  const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
  if (!emb) fail("missing tensor 'token_embd.weight'");
  if (emb->ne.size() < 2 || emb->ne[0] != E)
    fail("tensor 'token_embd.weight' has shape " + tensor_shape_str(emb->ne) + ", expected {" +
         std::to_string(E) + ", n_vocab}");
  hp.n_vocab = emb->ne[1];
  const int64_t V = hp.n_vocab;
  tc.required("token_embd.weight", {E, V});
  if (const GgufValue* toks = f.find("tokenizer.ggml.tokens")) {
    if (toks->type == GgufType::ARRAY && int64_t(toks->arr_len) != V)
      fail("tokenizer.ggml.tokens has " + std::to_string(toks->arr_len) +
           " entries but token_embd.weight has " + std::to_string(V) + " rows");
  }
  tc.required("output_norm.weight", {E}, true);
  hp.tied_embeddings = tc.optional("output.weight", {E, V}) == nullptr;

  const int64_t KEY = hp.gdn_key_dim(), VAL = hp.gdn_value_dim(), CONV = hp.gdn_conv_channels();
  const int64_t Hv = hp.ssm_dt_rank, Dv = hp.ssm_d_state;
  int64_t n_fused = 0;
  int64_t n_legacy = 0;
  for (int64_t i = 0; i < hp.n_layer; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    tc.required(b + "attn_norm.weight", {E}, true);
    tc.required(b + "post_attention_norm.weight", {E}, true);
    if (hp.recurrent[size_t(i)]) {
      if (hp.arch == Arch::qwen3next && !f.find_tensor(b + "attn_qkv.weight") &&
          f.find_tensor(b + "ssm_in.weight")) {
        tc.required(b + "ssm_in.weight", {E, 2 * KEY + 2 * VAL});
        ++n_legacy;
      } else {
        tc.required(b + "attn_qkv.weight", {E, CONV});
        tc.required(b + "attn_gate.weight", {E, VAL});
      }
      tc.required(b + "ssm_conv1d.weight", {hp.ssm_d_conv, CONV}, true);
      tc.required(b + "ssm_dt.bias", {Hv}, true);
      tc.required(b + "ssm_a", {Hv}, true);
      if (hp.arch == Arch::qwen3next) {
        tc.required(b + "ssm_ba.weight", {E, 2 * Hv});
      } else {
        tc.required(b + "ssm_beta.weight", {E, Hv});
        tc.required(b + "ssm_alpha.weight", {E, Hv});
      }
      tc.required(b + "ssm_norm.weight", {Dv}, true);
      tc.required(b + "ssm_out.weight", {VAL, E});
    } else {
      check_attention_tensors(tc, b, hp);
    }
    if (check_ffn_tensors(tc, b, hp)) ++n_fused;
  }
  if (n_fused != 0 && n_fused != hp.n_layer)
    fail("ffn_gate_up_exps is fused in " + std::to_string(n_fused) + " of " +
         std::to_string(hp.n_layer) + " layers; invar needs all or none");
  hp.fused_gate_up_exps = n_fused != 0;
  if (n_legacy != 0 && n_legacy != hp.n_recurrent_layers())
    fail("ssm_in is used in " + std::to_string(n_legacy) + " of " +
         std::to_string(hp.n_recurrent_layers()) + " recurrent layers; invar needs all or none");
  hp.legacy_ssm_in = n_legacy != 0;
  check_mtp(f, tc, hp);

  // llama.cpp refuses files with tensors its graph does not create; so does invar.
  for (const auto& t : f.tensors()) {
    if (!tc.used(t.name) && !is_mtp_tensor(t.name, hp.n_layer))
      fail("unexpected tensor '" + t.name + "' for " + std::string(arch_name(hp.arch)) +
           " (llama.cpp would reject the file with 'wrong number of tensors')");
  }
}

// A part of a file llama.cpp's llama-gguf-split cut up (split.count parts, split.no from 0): the
// first part holds the keys and some tensors, the others only tensors, so a part alone would
// fail later as a missing key or tensor. Named here, with the command that joins the parts.
void check_not_split(const GgufFile& f) {
  const int64_t count = f.get_int_or("split.count", 1);
  if (count <= 1) return;
  const int64_t no = f.get_int_or("split.no", 0);
  char first[48];  // llama-gguf-split's names end in -%05d-of-%05d.gguf
  std::snprintf(first, sizeof first, "-00001-of-%05lld.gguf", static_cast<long long>(count));
  fail(f.path() + " is part " + std::to_string(no + 1) + " of " + std::to_string(count) +
       " of a split GGUF file (split.count = " + std::to_string(count) +
       "); invar loads one file: merge the parts first with llama.cpp's `llama-gguf-split "
       "--merge <...>" +
       first + " merged.gguf`, then load merged.gguf");
}

}  // namespace

std::string_view arch_name(Arch a) {
  switch (a) {
    case Arch::qwen3next:
      return "qwen3next";
    case Arch::qwen35:
      return "qwen35";
    case Arch::qwen35moe:
      return "qwen35moe";
  }
  return "?";
}

int64_t Hparams::n_recurrent_layers() const {
  return std::count(recurrent.begin(), recurrent.end(), true);
}
int64_t Hparams::n_attention_layers() const {
  return int64_t(recurrent.size()) - n_recurrent_layers();
}

Hparams hparams_from_gguf(const GgufFile& f) {
  check_not_split(f);
  Hparams hp;
  hp.arch = parse_arch(f.get_string("general.architecture"));
  read_keys(f, hp);
  check_tensors(f, hp);
  return hp;
}

int64_t Hparams::n_ctx_limit() const {
  if (rope_scaling.type == RopeScalingType::none || rope_scaling.n_ctx_orig == 0)
    return n_ctx_train;
  const double scaled = double(rope_scaling.n_ctx_orig) * rope_scaling.factor;
  return std::max(n_ctx_train, scaled >= 9e15 ? int64_t(9e15) : int64_t(scaled));
}

std::string hparams_describe(const Hparams& hp) {
  std::ostringstream o;
  auto line = [&](const char* name, const auto& v, const char* what) {
    o << "  " << name << " = " << v << "  # " << what << "\n";
  };
  line("arch", arch_name(hp.arch), "general.architecture");
  line("n_ctx_train", hp.n_ctx_train, "context_length");
  line("n_embd", hp.n_embd, "E, residual width");
  line("n_layer", hp.n_layer, "L, trunk layers");
  if (hp.n_layer_nextn) {
    line("n_layer_nextn", hp.n_layer_nextn, "MTP blocks after the trunk");
    if (hp.mtp) {
      std::string own;
      if (hp.mtp_own_embd) own += " embed_tokens";
      if (hp.mtp_own_head) own += " shared_head_head";
      if (hp.mtp_own_head_norm) own += " shared_head_norm";
      line("mtp", "blk." + std::to_string(hp.n_layer) + (own.empty() ? "" : " (own" + own + ")"),
           "MTP draft block: attention + FFN + nextn.eh_proj/enorm/hnorm");
    } else {
      line("mtp", "unusable: " + hp.mtp_unusable, "speculative --spec mtp refused");
    }
  }
  line("n_vocab", hp.n_vocab, "V");
  line("n_head", hp.n_head, "H, query heads");
  line("n_head_kv", hp.n_head_kv, "Hkv, key/value heads");
  line("head_dim", hp.head_dim, "D");
  line("n_rot", hp.n_rot, "R, rotated dims per head");
  line("rope_freq_base", hp.rope_freq_base, "theta base");
  if (hp.rope_imrope) {
    std::string s = "[" + std::to_string(hp.rope_sections[0]) + ", " +
                    std::to_string(hp.rope_sections[1]) + ", " +
                    std::to_string(hp.rope_sections[2]) + ", " +
                    std::to_string(hp.rope_sections[3]) + "]";
    line("rope_sections", s, "IMROPE (t, h, w, e)");
  } else {
    line("rope", "neox", "rope type");
  }
  const RopeScaling& sc = hp.rope_scaling;
  if (sc.type == RopeScalingType::linear) {
    line("rope_scaling",
         "linear factor " + std::to_string(sc.factor) + ", mscale " + std::to_string(sc.mscale),
         "rope.scaling.*");
  } else if (sc.type == RopeScalingType::yarn) {
    line("rope_scaling",
         "yarn factor " + std::to_string(sc.factor) + " over " + std::to_string(sc.n_ctx_orig) +
             " (ext " + std::to_string(sc.ext_factor) + ", beta " + std::to_string(sc.beta_fast) +
             "/" + std::to_string(sc.beta_slow) + ", mscale " + std::to_string(sc.mscale) +
             "); positions up to " + std::to_string(hp.n_ctx_limit()),
         "rope.scaling.*");
  }
  line("rms_eps", hp.rms_eps, "RMSNorm and q/k L2-norm eps");
  if (hp.is_moe()) {
    line("n_expert", hp.n_expert, "NE");
    line("n_expert_used", hp.n_expert_used, "K");
    line("n_ff_exp", hp.n_ff_exp, "Fe, expert FFN width");
    line("n_ff_shexp", hp.n_ff_shexp, "Fs, shared-expert FFN width");
    line("fused_gate_up_exps", hp.fused_gate_up_exps ? "true" : "false", "ffn_gate_up_exps");
  } else {
    line("n_ff", hp.n_ff, "F, dense FFN width");
  }
  line("ssm_d_conv", hp.ssm_d_conv, "Kc, conv kernel");
  line("ssm_d_state", hp.ssm_d_state, "Dk = Dv, head k/v dim");
  line("ssm_n_group", hp.ssm_n_group, "Hk, key heads");
  line("ssm_dt_rank", hp.ssm_dt_rank, "Hv, value heads");
  line("ssm_d_inner", hp.ssm_d_inner, "Dv*Hv");
  line("full_attention_interval", hp.full_attention_interval,
       "layer i is attention iff (i+1) % interval == 0");
  std::string layers;
  for (bool r : hp.recurrent) layers += r ? 'R' : 'A';
  line("layers", layers, "R = Gated DeltaNet, A = full attention");
  line("tied_embeddings", hp.tied_embeddings ? "true" : "false", "no output.weight");
  if (hp.legacy_ssm_in) line("legacy_ssm_in", "true", "ssm_in instead of attn_qkv + attn_gate");
  return o.str();
}

}  // namespace invar
