// `invar make-model`: a random-weight GGUF for qwen3next, qwen35 or qwen35moe, the same bytes on
// every machine for a given seed and flags.
//
// Default model (what `make run` uses): qwen3next with the real Qwen3 vocabulary, E=256, 8 layers
// (every 4th full attention), H=4/Hkv=2/D=64 with 16 rotated dims, 8 experts choose 2 (Fe=128)
// plus a shared expert (Fs=256), GDN Dk=32, Hk=2, Hv=4, untied output. BF16 weights: the
// 151k-token embedding and output dominate the file, and BF16 halves both the file (~165 MB)
// and the memory traffic of the vocabulary projection on 2 cores, while widening BF16 to F32
// is exact, so the arithmetic is still F32 on well-defined weights. Use --type f32 to compare
// with llama.cpp bit-for-bit settings.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "command.h"
#include "core/error.h"
#include "forge/make_mmproj.h"
#include "forge/make_model.h"
#include "forge/model_presets.h"
#include "forge/quant_preset.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "quant/quantize.h"
#include "tokenizer/tokenizer.h"
#include "vision/vision_model.h"

namespace invar::app {
namespace {

struct MakeModelOptions {
  MakeModelConfig cfg;
  std::string arch = "qwen3next";
  std::string type = "bf16";
  std::string vocab = std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json";
  bool vocab_given = false;  // --vocab on the command line (a tower alone has no use for it)
  std::string out;
  std::string mmproj;  // also (or only) a random vision tower for this text width
  MakeMmprojConfig vision;
  std::string vision_type = "f32";
  std::vector<int32_t> sections;
  std::string preset;
  bool mtp = false;
  bool mtp_bigram = false;
  // Shape flags and how each copies its field from a preset; a flag given on the command line
  // keeps its value (so --layers/--experts cut a slice of a preset).
  std::vector<std::pair<CLI::Option*, void (*)(MakeModelConfig&, const MakeModelConfig&)>> shape;
};

// Fills the fields of every shape flag the command line did not give from the preset.
void apply_preset(MakeModelOptions& o) {
  const ModelPreset* p = model_preset_find(o.preset);
  if (!p)
    throw Error("--preset must be one of:" + model_presets_help() + "\nnot '" + o.preset + "'");
  o.cfg.arch = p->config.arch;  // the preset names its architecture; --arch is not read
  for (auto& [opt, copy] : o.shape)
    if (opt->count() == 0) copy(o.cfg, p->config);
  if (o.sections.empty()) o.cfg.rope_sections = p->config.rope_sections;
  if (o.cfg.n_expert_used > o.cfg.n_expert) o.cfg.n_expert_used = o.cfg.n_expert;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The mmproj: projection width = the text model's --embd, read back through the vision loader.
void write_mmproj(MakeModelOptions& o) {
  const std::optional<DType> type = dtype_parse(o.vision_type);
  if (!type) throw Error("--vision-type: '" + o.vision_type + "' is not a weight type");
  o.vision.type = *type;
  o.vision.n_out = o.cfg.n_embd;
  o.vision.seed = o.cfg.seed;
  GgufWriter w;
  make_mmproj(o.vision, w);
  w.write(o.mmproj);
  const auto m = vision_model_load(o.mmproj);
  std::printf(
      "wrote %s: %s, %lld blocks, C=%lld, patch %lld, projection %lld, seed %llu, %.1f MB\n",
      o.mmproj.c_str(), kQwen3vlProjector, static_cast<long long>(m->hp.n_layer),
      static_cast<long long>(m->hp.n_embd), static_cast<long long>(m->hp.patch),
      static_cast<long long>(m->hp.n_embd_out()), static_cast<unsigned long long>(o.vision.seed),
      double(m->file->file_size()) / 1e6);
}

int run_make_model(MakeModelOptions& o) {
  MakeModelConfig& c = o.cfg;
  if (o.out.empty() && o.mmproj.empty()) throw Error("make-model: give --out, --mmproj or both");
  if (!o.preset.empty()) {
    apply_preset(o);
  } else if (o.arch == "qwen3next") {
    c.arch = Arch::qwen3next;
  } else if (o.arch == "qwen35") {
    c.arch = Arch::qwen35;
  } else if (o.arch == "qwen35moe") {
    c.arch = Arch::qwen35moe;
  } else {
    throw Error("--arch must be qwen3next, qwen35 or qwen35moe, not '" + o.arch + "'");
  }
  if (!quant_scheme_parse(o.type))
    throw Error("--type must be a llama-quantize preset (" + quant_preset_names() +
                ") or a weight type (" + quantize_supported_list() + "), not '" + o.type + "'");
  c.quant = o.type;
  c.mtp = o.mtp_bigram ? MtpKind::bigram : o.mtp ? MtpKind::random : MtpKind::none;
  if (!o.sections.empty()) {
    if (o.sections.size() > 4) throw Error("--sections takes at most 4 numbers");
    c.rope_sections = {0, 0, 0, 0};
    for (size_t i = 0; i < o.sections.size(); ++i) c.rope_sections[i] = o.sections[i];
  }

  // A tower alone needs no vocabulary (the 11 MB tokenizer.json is not parsed for it).
  if (o.out.empty()) {
    if (o.vocab_given)
      throw Error("make-model: --vocab is the language model's (--out); a tower alone has none");
    write_mmproj(o);  // one of --out and --mmproj is given (checked above)
    return 0;
  }

  // The vocabulary is read once; its keys are written after the model keys, as in converted files.
  std::unique_ptr<GgufFile> vocab_gguf;
  Vocab vocab;
  int64_t n_vocab = 0;
  if (ends_with(o.vocab, ".gguf")) {
    vocab_gguf = GgufFile::open(o.vocab);
    GgufWriter probe;
    n_vocab = make_model_copy_vocab(*vocab_gguf, probe);
  } else {
    vocab = vocab_from_tokenizer_json(o.vocab);
    n_vocab = int64_t(vocab.tokens.size());
  }
  // Written after the vocabulary is read: a bad --vocab leaves neither file.
  if (!o.mmproj.empty()) write_mmproj(o);

  GgufWriter w;
  make_model(c, n_vocab, w);
  if (vocab_gguf) {
    make_model_copy_vocab(*vocab_gguf, w);
  } else {
    vocab_to_gguf(vocab, w);
  }
  w.write(o.out);

  // Read the file back through the loader's validation: what we write must be what we accept.
  auto f = GgufFile::open(o.out, /*populate=*/false);  // the header is all it reads
  const Hparams hp = hparams_from_gguf(*f);
  std::printf("wrote %s: %s, %lld layers%s, E=%lld, vocab %lld, %s weights, seed %llu, %.1f MB\n",
              o.out.c_str(), std::string(arch_name(hp.arch)).c_str(),
              static_cast<long long>(hp.n_layer), hp.mtp ? " + MTP block" : "",
              static_cast<long long>(hp.n_embd), static_cast<long long>(hp.n_vocab), o.type.c_str(),
              static_cast<unsigned long long>(c.seed), double(f->file_size()) / 1e6);
  return 0;
}

Command make_model_command("make-model", [](CLI::App& root) -> Command::Run {
  auto o = std::make_shared<MakeModelOptions>();
  MakeModelConfig& c = o->cfg;
  auto* s = root.add_subcommand(
      "make-model",
      "Write a random-weight GGUF (qwen3next | qwen35 | qwen35moe) in llama.cpp's layout, "
      "deterministic from --seed");
  s->add_option("--out", o->out, "output GGUF path");
  s->add_option("--mmproj", o->mmproj,
                "also write a random vision tower here: an mmproj GGUF in llama.cpp's layout "
                "(projector qwen3vl_merger, Qwen3-VL / Qwen3.5) whose projection width is --embd");
  s->add_option("--vision-embd", o->vision.n_embd, "mmproj: ViT width")->capture_default_str();
  s->add_option("--vision-layers", o->vision.n_layer, "mmproj: ViT blocks")->capture_default_str();
  s->add_option("--vision-heads", o->vision.n_head, "mmproj: ViT attention heads")
      ->capture_default_str();
  s->add_option("--vision-ff", o->vision.n_ff, "mmproj: ViT MLP width")->capture_default_str();
  s->add_option("--patch", o->vision.patch, "mmproj: patch side in pixels")->capture_default_str();
  s->add_option("--pos-grid", o->vision.pos_side,
                "mmproj: side of the learned position grid (image_size = side x patch)")
      ->capture_default_str();
  s->add_option("--vision-type", o->vision_type,
                "mmproj: linear layers' weight type (f32 | f16 | bf16 | q8_0)")
      ->capture_default_str();
  s->add_option("--deepstack", o->vision.deepstack,
                "mmproj: ViT blocks with a deepstack merger (Qwen3-VL; Qwen3.5 has none)");
  s->add_option("--arch", o->arch, "qwen3next | qwen35 | qwen35moe")->capture_default_str();
  s->add_option("--seed", c.seed, "weights are a pure function of the seed and the flags")
      ->capture_default_str();
  s->add_option("--type", o->type,
                "weights: a llama-quantize preset (q4_k_m | q5_k_m | q6_k | q8_0 | iq4_xs | "
                "q3_k_m | q2_k | q4_0 | iq3_m | iq3_s | iq3_xxs | iq2_m | iq2_s | iq2_xs | "
                "iq2_xxs | iq1_m | iq1_s | tq2_0 | tq1_0 | mxfp4_moe: per-tensor types as "
                "llama-quantize picks them without an importance matrix), or one type for every "
                "matrix (f32 | f16 | bf16 | q4_0 | q4_1 | q5_0 | q5_1 | q8_0 | q2_k | q3_k | q4_k "
                "| q5_k | q6_k | iq4_nl | iq4_xs | iq3_xxs | iq3_s | iq2_xxs | iq2_xs | iq1_s | "
                "iq1_m | tq1_0 | tq2_0 | mxfp4; a name that is also a preset means the preset). "
                "Norms, ssm_a, dt bias, conv and routers stay f32")
      ->capture_default_str();
  s->add_option("--vocab", o->vocab,
                "vocabulary: a tokenizer.json, or a .gguf whose tokenizer.* keys are copied")
      ->capture_default_str();
  s->add_option("--preset", o->preset,
                "real per-layer shapes of a published model (random weights); shape flags given "
                "too override it, e.g. --layers 8 --experts 32 for a slice:" +
                    model_presets_help());
  s->add_option("--name", c.name, "general.name")->capture_default_str();
  o->shape.push_back({s->add_option("--ctx", c.n_ctx, "context_length")->capture_default_str(),
                      [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_ctx = p.n_ctx; }});
  o->shape.push_back(
      {s->add_option("--embd", c.n_embd, "E, embedding width")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_embd = p.n_embd; }});
  o->shape.push_back({s->add_option("--layers", c.n_layer, "L, layers")->capture_default_str(),
                      [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_layer = p.n_layer; }});
  o->shape.push_back(
      {s->add_option("--heads", c.n_head, "H, attention query heads")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_head = p.n_head; }});
  o->shape.push_back(
      {s->add_option("--heads-kv", c.n_head_kv, "Hkv, attention key/value heads")
           ->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_head_kv = p.n_head_kv; }});
  o->shape.push_back(
      {s->add_option("--head-dim", c.head_dim, "D, attention head dim")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.head_dim = p.head_dim; }});
  o->shape.push_back(
      {s->add_option("--rot", c.n_rot, "R, rotated dims per head")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_rot = p.n_rot; }});
  o->shape.push_back(
      {s->add_option("--rope-base", c.rope_base, "RoPE frequency base")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.rope_base = p.rope_base; }});
  o->shape.push_back(
      {s->add_option("--rope-scaling", c.rope_scaling,
                     "rope.scaling.type to write: linear or yarn (none: no keys), as the "
                     "converter writes an HF rope_scaling"),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.rope_scaling = p.rope_scaling; }});
  o->shape.push_back({s->add_option("--rope-scale", c.rope_scaling_factor, "rope.scaling.factor")
                          ->capture_default_str(),
                      [](MakeModelConfig& d, const MakeModelConfig& p) {
                        d.rope_scaling_factor = p.rope_scaling_factor;
                      }});
  o->shape.push_back(
      {s->add_option("--rope-orig-ctx", c.rope_scaling_orig_ctx,
                     "yarn: rope.scaling.original_context_length (0: --ctx / --rope-scale)")
           ->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) {
         d.rope_scaling_orig_ctx = p.rope_scaling_orig_ctx;
       }});
  s->add_option("--sections", o->sections,
                "qwen35*: IMROPE sections (t h w e); default covers every pair");
  o->shape.push_back({s->add_option("--eps", c.rms_eps, "RMSNorm epsilon")->capture_default_str(),
                      [](MakeModelConfig& d, const MakeModelConfig& p) { d.rms_eps = p.rms_eps; }});
  o->shape.push_back(
      {s->add_option("--ff", c.n_ff, "F, dense FFN width (qwen35)")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_ff = p.n_ff; }});
  o->shape.push_back(
      {s->add_option("--experts", c.n_expert, "NE, experts (MoE archs)")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_expert = p.n_expert; }});
  o->shape.push_back(
      {s->add_option("--experts-used", c.n_expert_used, "K, experts per token")
           ->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_expert_used = p.n_expert_used; }});
  o->shape.push_back(
      {s->add_option("--ff-exp", c.n_ff_exp, "Fe, expert FFN width")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_ff_exp = p.n_ff_exp; }});
  o->shape.push_back(
      {s->add_option("--ff-shexp", c.n_ff_shexp, "Fs, shared-expert FFN width")
           ->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.n_ff_shexp = p.n_ff_shexp; }});
  o->shape.push_back(
      {s->add_option("--conv", c.ssm_conv, "Kc, GDN conv kernel")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.ssm_conv = p.ssm_conv; }});
  o->shape.push_back(
      {s->add_option("--state", c.ssm_state, "Dk = Dv, GDN head dim")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.ssm_state = p.ssm_state; }});
  o->shape.push_back(
      {s->add_option("--groups", c.ssm_groups, "Hk, GDN key heads")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.ssm_groups = p.ssm_groups; }});
  o->shape.push_back(
      {s->add_option("--v-heads", c.ssm_v_heads, "Hv, GDN value heads")->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.ssm_v_heads = p.ssm_v_heads; }});
  o->shape.push_back(
      {s->add_option("--interval", c.interval,
                     "full_attention_interval: layer i is attention iff (i+1) % interval == 0")
           ->capture_default_str(),
       [](MakeModelConfig& d, const MakeModelConfig& p) { d.interval = p.interval; }});
  s->add_flag("--tied", c.tied, "no output.weight: logits use token_embd");
  s->add_flag("--fused-gate-up", c.fused_gate_up,
              "ffn_gate_up_exps instead of ffn_gate_exps + ffn_up_exps");
  s->add_flag("--mtp", o->mtp,
              "add an MTP block after the trunk (nextn_predict_layers = 1, blk.<layers>.nextn.*), "
              "the draft head of --spec mtp");
  s->add_flag("--mtp-bigram", o->mtp_bigram,
              "an MTP block whose drafts are often right, for testing speculation: the trunk's "
              "residual projections are scaled down (it mostly predicts from the current token) "
              "and the MTP block passes the token embedding to the same LM head");
  s->add_flag("--mtp-own-head", c.mtp_own_head,
              "the MTP block also gets nextn.embed_tokens and nextn.shared_head_head (otherwise "
              "it uses token_embd and output)");
  return [o, s]() {
    o->vocab_given = s->count("--vocab") > 0;
    return run_make_model(*o);
  };
});

}  // namespace
}  // namespace invar::app
