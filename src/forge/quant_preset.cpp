// Mirrors llama_tensor_get_type_impl for the presets invar offers; only the branches these
// presets and these architectures reach are kept (no Falcon, 70B or imatrix cases: invar has no
// importance matrix, so the IQ3_XXS rules take their no-imatrix branches).
#include "forge/quant_preset.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "core/error.h"

namespace invar {
namespace {

// llama_ftype values (llama.h) of the presets.
namespace ftype {
constexpr uint32_t Q4_0 = 2, Q8_0 = 7, Q2_K = 10, Q3_K_M = 12, Q4_K_M = 15, Q5_K_M = 17, Q6_K = 18,
                   IQ2_XXS = 19, IQ2_XS = 20, IQ3_XXS = 23, IQ1_S = 24, IQ3_S = 26, IQ3_M = 27,
                   IQ2_S = 28, IQ2_M = 29, IQ4_XS = 30, IQ1_M = 31, TQ1_0 = 36, TQ2_0 = 37,
                   MXFP4_MOE = 38;
}

struct QuantPresetRow {
  std::string_view name;
  DType base;          // llama_ftype_get_default_type
  uint32_t file_type;  // llama_ftype
};

// llama-quantize's names. Its IQ2_S preset is mostly iq2_xs (the type iq2_s is IQ2_M's), and
// IQ3_S / IQ3_M differ only in the tensors they raise.
constexpr QuantPresetRow kQuantPresets[] = {
    {"q4_k_m", DType::Q4_K, ftype::Q4_K_M},      {"q5_k_m", DType::Q5_K, ftype::Q5_K_M},
    {"q6_k", DType::Q6_K, ftype::Q6_K},          {"q8_0", DType::Q8_0, ftype::Q8_0},
    {"iq4_xs", DType::IQ4_XS, ftype::IQ4_XS},    {"q3_k_m", DType::Q3_K, ftype::Q3_K_M},
    {"q2_k", DType::Q2_K, ftype::Q2_K},          {"q4_0", DType::Q4_0, ftype::Q4_0},
    {"iq3_m", DType::IQ3_S, ftype::IQ3_M},       {"iq3_s", DType::IQ3_S, ftype::IQ3_S},
    {"iq3_xxs", DType::IQ3_XXS, ftype::IQ3_XXS}, {"iq2_m", DType::IQ2_S, ftype::IQ2_M},
    {"iq2_s", DType::IQ2_XS, ftype::IQ2_S},      {"iq2_xs", DType::IQ2_XS, ftype::IQ2_XS},
    {"iq2_xxs", DType::IQ2_XXS, ftype::IQ2_XXS}, {"iq1_m", DType::IQ1_M, ftype::IQ1_M},
    {"iq1_s", DType::IQ1_S, ftype::IQ1_S},       {"tq2_0", DType::TQ2_0, ftype::TQ2_0},
    {"tq1_0", DType::TQ1_0, ftype::TQ1_0},       {"mxfp4_moe", DType::MXFP4, ftype::MXFP4_MOE},
};

// llama_ftype of a pure type (every matrix of that type).
uint32_t pure_file_type(DType t) {
  switch (t) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q4_1:
      return 3;
    case DType::Q8_0:
      return 7;
    case DType::Q5_0:
      return 8;
    case DType::Q5_1:
      return 9;
    case DType::Q2_K:
      return 10;
    case DType::Q3_K:
      return 11;  // Q3_K_S: all q3_K
    case DType::Q4_K:
      return 14;  // Q4_K_S
    case DType::Q5_K:
      return 16;  // Q5_K_S
    case DType::Q6_K:
      return 18;
    case DType::IQ4_NL:
      return 25;
    case DType::IQ4_XS:
      return 30;
    case DType::BF16:
      return 32;
    case DType::IQ2_XXS:
      return 19;
    case DType::IQ2_XS:
      return 20;
    case DType::IQ3_XXS:
      return 23;
    case DType::IQ1_S:
      return 24;
    case DType::IQ3_S:
      return 26;
    case DType::IQ2_S:
      return 29;  // IQ2_M: the ftype whose default type is iq2_s
    case DType::IQ1_M:
      return 31;
    case DType::TQ1_0:
      return 36;
    case DType::TQ2_0:
      return 37;
    case DType::MXFP4:
      return 38;  // MXFP4_MOE
  }
  return 0;
}

enum class Category { Output, TokenEmbd, AttnVLike, AttnK, AttnQ, AttnOutput, FfnDown, Other };

Category category_of(const std::string& n) {
  if (n == "output.weight") return Category::Output;
  if (n == "token_embd.weight") return Category::TokenEmbd;
  // attn_qkv (the GDN input projection) counts as attn_v in llama-quant's categories.
  if (n.find("attn_qkv.weight") != std::string::npos) return Category::AttnVLike;
  if (n.find("attn_v.weight") != std::string::npos) return Category::AttnVLike;
  if (n.find("attn_k.weight") != std::string::npos) return Category::AttnK;
  if (n.find("attn_q.weight") != std::string::npos) return Category::AttnQ;
  if (n.find("attn_output.weight") != std::string::npos) return Category::AttnOutput;
  if (n.find("ffn_down") != std::string::npos) return Category::FfnDown;
  return Category::Other;
}

bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

int64_t layer_of(const std::string& name) {
  int layer = -1;
  if (std::sscanf(name.c_str(), "blk.%d.", &layer) != 1)
    throw Error("make-model: cannot read the layer of tensor '" + name + "'");
  return layer;
}

DType fallback(const std::string& name, int64_t ncols, DType t) {
  if (ncols % dtype_block_size(t) == 0) return t;
  DType f;
  switch (t) {
    case DType::IQ1_S:
    case DType::IQ1_M:
    case DType::IQ2_XXS:
    case DType::IQ2_XS:
    case DType::IQ2_S:
    case DType::IQ3_XXS:
    case DType::IQ3_S:
    case DType::IQ4_XS:
      f = DType::IQ4_NL;
      break;
    case DType::Q2_K:
    case DType::Q3_K:
    case DType::TQ1_0:
    case DType::TQ2_0:
      f = DType::Q4_0;
      break;
    case DType::Q4_K:
      f = DType::Q5_0;
      break;
    case DType::Q5_K:
      f = DType::Q5_1;
      break;
    case DType::Q6_K:
      f = DType::Q8_0;
      break;
    default:
      throw Error("make-model: tensor '" + name + "' has rows of " + std::to_string(ncols) +
                  ", not a multiple of the " + std::string(dtype_name(t)) + " block size " +
                  std::to_string(dtype_block_size(t)) + " (llama-quantize has no fallback for " +
                  std::string(dtype_name(t)) + ")");
  }
  return ncols % dtype_block_size(f) == 0 ? f : DType::F16;
}

// The rules of llama_tensor_get_type_impl for one quantisable tensor of a preset, in its order;
// nt is the preset's default type.
struct PresetRules {
  uint32_t ft;                         // the preset's llama_ftype
  const QuantModelInfo& m;             // the model's facts
  bool tied;                           // no output.weight: token_embd is the output too
  int64_t n_attn_v = 0, i_attn_v = 0;  // attn_v-like tensors, and how many were typed so far

  DType type_of(const QuantTensor& t, Category c, int64_t ffn_down_rank, DType nt) {
    using namespace ftype;
    const bool iq2_group =
        ft == IQ2_XXS || ft == IQ2_XS || ft == IQ1_S || ft == IQ2_S || ft == IQ2_M || ft == IQ1_M;
    const bool iq2_s_m = ft == IQ2_S || ft == IQ2_M;
    if (c == Category::Output || (tied && c == Category::TokenEmbd)) {
      if (ft == MXFP4_MOE || t.ne[0] % dtype_block_size(nt) != 0) return DType::Q8_0;
      if (iq2_group || ft == IQ3_XXS) return DType::Q5_K;
      return nt == DType::Q8_0 ? nt : DType::Q6_K;
    }
    if (ft == MXFP4_MOE)  // expert tensors (3-D) MXFP4, the others Q8_0
      return t.ne.size() > 2 && t.ne[2] > 1 ? DType::MXFP4 : DType::Q8_0;
    if (c == Category::TokenEmbd) {
      if (ft == IQ2_XXS || ft == IQ2_XS || ft == IQ1_S || ft == IQ1_M) return DType::Q2_K;
      if (iq2_s_m || ft == IQ3_XXS) return DType::IQ3_S;
      if (ft == TQ1_0 || ft == TQ2_0) return DType::Q4_K;
      return nt;
    }
    if (iq2_group) {
      if (c == Category::AttnVLike) {
        ++i_attn_v;
        if (m.n_gqa >= 4 || m.n_expert >= 4) return DType::Q4_K;
        return iq2_s_m ? DType::IQ3_S : DType::Q2_K;
      }
      if (c == Category::AttnK && m.n_expert == 8) return DType::Q4_K;
      if (c == Category::FfnDown && ffn_down_rank < m.n_layer / 8)
        return iq2_s_m ? DType::IQ3_S : DType::Q2_K;
      if (c == Category::AttnOutput) {
        if (m.n_expert == 8) return DType::Q5_K;
        if (ft == IQ1_S || ft == IQ1_M) return DType::IQ2_XXS;
        if (iq2_s_m) return DType::IQ3_S;
      }
      return nt;
    }
    switch (c) {
      case Category::AttnVLike: {
        const int64_t i = i_attn_v++;
        if (ft == Q2_K) {
          nt = m.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
        } else if (ft == IQ3_XXS) {
          nt = m.n_gqa >= 4 ? DType::Q4_K : DType::IQ3_S;  // IQ3_S: no importance matrix
        } else if ((ft == IQ3_S && m.n_gqa >= 4) || ft == IQ3_M) {
          nt = DType::Q4_K;
        } else if (ft == Q3_K_M) {
          nt = i < 2 ? DType::Q5_K : DType::Q4_K;
        } else if (ft == IQ4_XS && m.n_gqa >= 4) {
          nt = DType::Q5_K;
        } else if ((ft == Q4_K_M || ft == Q5_K_M) && use_more_bits(i, n_attn_v)) {
          nt = DType::Q6_K;
        }
        return m.n_expert == 8 ? DType::Q8_0 : nt;
      }
      case Category::AttnK:
        if (m.n_expert == 8) return DType::Q8_0;
        return ft == IQ3_XXS ? DType::IQ2_S : nt;
      case Category::AttnQ:
        return ft == IQ3_XXS ? DType::IQ2_S : nt;
      case Category::FfnDown: {
        // llama-quant counts ffn_down tensors in dense models and parses the name in MoE ones;
        // with one ffn_down per dense layer both are the layer index.
        const int64_t il = layer_of(t.name), n = m.n_layer;
        if (ft == Q2_K) return DType::Q3_K;
        if (ft == IQ3_XXS) return il < n / 8 ? DType::Q4_K : DType::Q3_K;  // no imatrix
        if (ft == Q3_K_M) return il < n / 16 ? DType::Q5_K : DType::Q4_K;
        if (ft == IQ3_M && (il < n / 8 || (m.n_expert == 8 && use_more_bits(il, n))))
          return DType::Q4_K;
        if (ft == Q4_K_M) return use_more_bits(il, n) ? DType::Q6_K : nt;
        if (ft == IQ4_XS && il < n / 8) return DType::Q5_K;
        if (ft == Q5_K_M && use_more_bits(il, n)) return DType::Q6_K;
        return nt;
      }
      case Category::AttnOutput:
        if (m.n_expert == 8)
          return ft == Q2_K || ft == IQ3_XXS || ft == Q3_K_M || ft == Q4_K_M || ft == IQ3_S ||
                         ft == IQ3_M || ft == IQ4_XS
                     ? DType::Q5_K
                     : nt;
        if (ft == Q2_K) return DType::Q3_K;
        if (ft == IQ3_XXS) return DType::IQ3_S;
        if (ft == Q3_K_M || ft == IQ3_M) return DType::Q4_K;
        return nt;
      default:
        return nt;
    }
  }
};

// The place of each ffn_down tensor in llama-quant's visiting order (by layer, then name), −1 for
// the others: the IQ1 / IQ2 presets' ffn_down rule counts tensors, not layers.
std::vector<int64_t> ffn_down_ranks(const std::vector<QuantTensor>& tensors) {
  std::vector<size_t> ids;
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].quantizable && category_of(tensors[i].name) == Category::FfnDown)
      ids.push_back(i);
  std::sort(ids.begin(), ids.end(), [&](size_t a, size_t b) {
    const int64_t la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
    return la != lb ? la < lb : tensors[a].name < tensors[b].name;
  });
  std::vector<int64_t> rank(tensors.size(), -1);
  for (size_t k = 0; k < ids.size(); ++k) rank[ids[k]] = int64_t(k);
  return rank;
}

}  // namespace

std::optional<QuantScheme> quant_scheme_parse(std::string_view s) {
  std::string l(s);
  for (auto& c : l) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const QuantPresetRow& p : kQuantPresets)
    if (p.name == l) return QuantScheme{l, true, p.base, p.file_type};
  const auto t = dtype_parse(l);
  if (!t) return std::nullopt;
  return QuantScheme{l, false, *t, pure_file_type(*t)};
}

QuantScheme quant_scheme_pure(DType t) {
  return QuantScheme{std::string(dtype_name(t)), false, t, pure_file_type(t)};
}

std::string quant_preset_names() {
  std::string s;
  for (const QuantPresetRow& p : kQuantPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::vector<DType> quant_plan(const QuantScheme& s, const QuantModelInfo& m,
                              const std::vector<QuantTensor>& tensors) {
  PresetRules rules{s.file_type, m, true};
  for (const QuantTensor& t : tensors) {
    if (t.name == "output.weight") rules.tied = false;
    if (t.quantizable && category_of(t.name) == Category::AttnVLike) ++rules.n_attn_v;
  }
  const std::vector<int64_t> ffn_down_rank = ffn_down_ranks(tensors);
  std::vector<DType> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const QuantTensor& t = tensors[i];
    if (!t.quantizable || t.ne.size() < 2) {
      out.push_back(DType::F32);
      continue;
    }
    if (!dtype_is_quantized(s.base)) {
      out.push_back(s.base);
      continue;
    }
    const DType nt =
        s.preset ? rules.type_of(t, category_of(t.name), ffn_down_rank[i], s.base) : s.base;
    out.push_back(fallback(t.name, t.ne[0], nt));
  }
  return out;
}

}  // namespace invar
