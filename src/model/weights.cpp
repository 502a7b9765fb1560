// Binding GGUF tensors to the per-layer weight structs (qwen3next-math.md §2 and the qwen35
// section for names and shapes).
#include "model/weights.h"

#include <cstring>
#include <string>

namespace invar {
namespace {

class Binder {
 public:
  explicit Binder(const GgufFile& f) : f_(f) {}

  const GgufTensorInfo& tensor(const std::string& name) const {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) throw GgufError("gguf: missing tensor '" + name + "'");
    return *t;
  }
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }

  // Checks ne == want, allowing trailing dimensions of 1 on either side.
  static void check_shape(const GgufTensorInfo& t, std::vector<int64_t> want) {
    std::vector<int64_t> got = t.ne;
    while (got.size() > 1 && got.back() == 1) got.pop_back();
    while (want.size() > 1 && want.back() == 1) want.pop_back();
    if (got != want)
      throw GgufError("gguf: tensor '" + t.name + "' has shape " + tensor_shape_str(t.ne) +
                      ", expected " + tensor_shape_str(want));
  }

  // {K, N} matrix over the mapping, used in place.
  Matrix matrix(const std::string& name, int64_t k, int64_t n) const {
    const GgufTensorInfo& t = tensor(name);
    check_shape(t, {k, n});
    return Matrix(t.type, k, n, t.data);
  }

  // A small vector of n values as F32, whatever the stored type.
  std::vector<float> vec(const std::string& name, std::vector<int64_t> shape) const {
    const GgufTensorInfo& t = tensor(name);
    check_shape(t, shape);
    int64_t n = t.n_elements();
    std::vector<float> out(static_cast<size_t>(n));
    switch (t.type) {
      case DType::F32:
        std::memcpy(out.data(), t.data, size_t(n) * 4);
        break;
      case DType::F16:
      case DType::BF16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, t.data + 2 * i, 2);
          out[size_t(i)] = t.type == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        break;
      default:
        throw GgufError("gguf: tensor '" + name + "' must be f32, f16 or bf16, not " +
                        std::string(dtype_name(t.type)));
    }
    return out;
  }

  // Slices expert e's {K, N} matrix out of a stacked {K, N_total, NE} tensor, starting at row
  // `row0` of that expert's block (the fused gate_up tensor holds gate rows, then up rows).
  static Matrix expert_slice(const GgufTensorInfo& t, int64_t e, int64_t row0, int64_t k,
                             int64_t n) {
    int64_t row_bytes = dtype_row_bytes(t.type, k);
    const uint8_t* base = t.data + (e * t.ne[1] + row0) * row_bytes;
    return Matrix(t.type, k, n, base);
  }

 private:
  const GgufFile& f_;
};

void bind_attention(const Binder& b, const std::string& p, const Hparams& hp, LayerWeights& lw) {
  const int64_t E = hp.n_embd, D = hp.head_dim, H = hp.n_head, Hkv = hp.n_head_kv;
  lw.wq = b.matrix(p + "attn_q.weight", E, 2 * D * H);
  lw.wk = b.matrix(p + "attn_k.weight", E, D * Hkv);
  lw.wv = b.matrix(p + "attn_v.weight", E, D * Hkv);
  lw.wo = b.matrix(p + "attn_output.weight", D * H, E);
  lw.q_norm = b.vec(p + "attn_q_norm.weight", {D});
  lw.k_norm = b.vec(p + "attn_k_norm.weight", {D});
}

void bind_gdn(const Binder& b, const std::string& p, const Hparams& hp, LayerWeights& lw) {
  const int64_t E = hp.n_embd, Hv = hp.ssm_dt_rank, Kc = hp.ssm_d_conv;
  const int64_t KEY = hp.gdn_key_dim(), VAL = hp.gdn_value_dim(), CONV = hp.gdn_conv_channels();
  if (b.has(p + "attn_qkv.weight")) {
    lw.ssm_qkv = b.matrix(p + "attn_qkv.weight", E, CONV);
    lw.ssm_gate = b.matrix(p + "attn_gate.weight", E, VAL);
  } else {
    if (hp.arch != Arch::qwen3next)
      throw GgufError("gguf: missing tensor '" + p + "attn_qkv.weight'");
    lw.ssm_in = b.matrix(p + "ssm_in.weight", E, 2 * KEY + 2 * VAL);
  }
  if (hp.arch == Arch::qwen3next) {
    lw.ssm_ba = b.matrix(p + "ssm_ba.weight", E, 2 * Hv);
  } else {
    lw.ssm_beta = b.matrix(p + "ssm_beta.weight", E, Hv);
    lw.ssm_alpha = b.matrix(p + "ssm_alpha.weight", E, Hv);
  }
  lw.conv_w = b.vec(p + "ssm_conv1d.weight", {Kc, CONV});
  lw.dt_bias = b.vec(p + "ssm_dt.bias", {Hv});
  lw.ssm_a = b.vec(p + "ssm_a", {Hv});
  lw.ssm_norm = b.vec(p + "ssm_norm.weight", {hp.ssm_d_state});
  lw.ssm_out = b.matrix(p + "ssm_out.weight", VAL, E);
}

void bind_moe(const Binder& b, const std::string& p, const Hparams& hp, LayerWeights& lw) {
  const int64_t E = hp.n_embd, NE = hp.n_expert, Fe = hp.n_ff_exp, Fs = hp.n_ff_shexp;
  lw.router = b.matrix(p + "ffn_gate_inp.weight", E, NE);
  const GgufTensorInfo& down = b.tensor(p + "ffn_down_exps.weight");
  Binder::check_shape(down, {Fe, E, NE});
  lw.experts.resize(size_t(NE));
  if (b.has(p + "ffn_gate_up_exps.weight")) {
    const GgufTensorInfo& gu = b.tensor(p + "ffn_gate_up_exps.weight");
    Binder::check_shape(gu, {E, 2 * Fe, NE});
    for (int64_t e = 0; e < NE; ++e) {
      lw.experts[size_t(e)].gate = Binder::expert_slice(gu, e, 0, E, Fe);
      lw.experts[size_t(e)].up = Binder::expert_slice(gu, e, Fe, E, Fe);
    }
  } else {
    const GgufTensorInfo& gate = b.tensor(p + "ffn_gate_exps.weight");
    const GgufTensorInfo& up = b.tensor(p + "ffn_up_exps.weight");
    Binder::check_shape(gate, {E, Fe, NE});
    Binder::check_shape(up, {E, Fe, NE});
    for (int64_t e = 0; e < NE; ++e) {
      lw.experts[size_t(e)].gate = Binder::expert_slice(gate, e, 0, E, Fe);
      lw.experts[size_t(e)].up = Binder::expert_slice(up, e, 0, E, Fe);
    }
  }
  for (int64_t e = 0; e < NE; ++e)
    lw.experts[size_t(e)].down = Binder::expert_slice(down, e, 0, Fe, E);
  lw.shexp_gate_inp = b.matrix(p + "ffn_gate_inp_shexp.weight", E, 1);
  lw.shexp_gate = b.matrix(p + "ffn_gate_shexp.weight", E, Fs);
  lw.shexp_up = b.matrix(p + "ffn_up_shexp.weight", E, Fs);
  lw.shexp_down = b.matrix(p + "ffn_down_shexp.weight", Fs, E);
}

void bind_dense_ffn(const Binder& b, const std::string& p, const Hparams& hp, LayerWeights& lw) {
  const int64_t E = hp.n_embd, F = hp.n_ff;
  lw.ffn_gate = b.matrix(p + "ffn_gate.weight", E, F);
  lw.ffn_up = b.matrix(p + "ffn_up.weight", E, F);
  lw.ffn_down = b.matrix(p + "ffn_down.weight", F, E);
}

// Norms, mixer (by lw.recurrent) and FFN of the layer whose tensor names start with p.
void bind_layer(const Binder& b, const std::string& p, const Hparams& hp, LayerWeights& lw) {
  const int64_t E = hp.n_embd;
  lw.attn_norm = b.vec(p + "attn_norm.weight", {E});
  lw.post_norm = b.vec(p + "post_attention_norm.weight", {E});
  if (lw.recurrent)
    bind_gdn(b, p, hp, lw);
  else
    bind_attention(b, p, hp, lw);
  if (hp.is_moe())
    bind_moe(b, p, hp, lw);
  else
    bind_dense_ffn(b, p, hp, lw);
}

}  // namespace

ModelWeights weights_bind(const GgufFile& f, const Hparams& hp) {
  Binder b(f);
  const int64_t E = hp.n_embd, V = hp.n_vocab;
  ModelWeights w;
  w.token_embd = b.matrix("token_embd.weight", E, V);
  w.output_norm = b.vec("output_norm.weight", {E});
  w.output = b.has("output.weight") ? b.matrix("output.weight", E, V) : w.token_embd;

  int64_t n_state = 0, n_attn = 0;
  w.layers.resize(size_t(hp.n_layer));
  for (int64_t il = 0; il < hp.n_layer; ++il) {
    LayerWeights& lw = w.layers[size_t(il)];
    lw.recurrent = hp.recurrent[size_t(il)];
    if (lw.recurrent)
      lw.state_index = n_state++;
    else
      lw.attn_index = n_attn++;
    bind_layer(b, "blk." + std::to_string(il) + ".", hp, lw);
  }

  if (hp.mtp) {
    const std::string p = "blk." + std::to_string(hp.n_layer) + ".";
    MtpWeights& m = w.mtp.emplace();
    m.block.attn_index = 0;  // the MTP KV holds this one layer
    bind_layer(b, p, hp, m.block);
    m.eh_proj = b.matrix(p + "nextn.eh_proj.weight", 2 * E, E);
    m.enorm = b.vec(p + "nextn.enorm.weight", {E});
    m.hnorm = b.vec(p + "nextn.hnorm.weight", {E});
    m.head_norm =
        hp.mtp_own_head_norm ? b.vec(p + "nextn.shared_head_norm.weight", {E}) : w.output_norm;
    m.embd = hp.mtp_own_embd ? b.matrix(p + "nextn.embed_tokens.weight", E, V) : w.token_embd;
    m.head = hp.mtp_own_head ? b.matrix(p + "nextn.shared_head_head.weight", E, V) : w.output;
  }

  RopeConfig rc;
  rc.head_dim = hp.head_dim;
  rc.n_rot = hp.n_rot;
  rc.freq_base = hp.rope_freq_base;
  rc.imrope = hp.rope_imrope;
  rc.sections = hp.rope_sections;
  rc.scaling = hp.rope_scaling;
  w.rope = rope_freqs_build(rc);
  return w;
}

}  // namespace invar
