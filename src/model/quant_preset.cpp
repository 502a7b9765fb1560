// Mirrors llama_tensor_get_type_impl for the presets invar offers; only the branches these
// presets and these architectures reach are kept (no Falcon, 70B or imatrix cases).
#include "model/quant_preset.h"

#include <cctype>
#include <cstdio>

#include "core/error.h"
#include "core/quantize.h"

namespace invar {
namespace {

struct QuantPresetRow {
  std::string_view name;
  DType base;
  uint32_t file_type;  // llama_ftype
};

constexpr QuantPresetRow kQuantPresets[] = {
    {"q4_k_m", DType::Q4_K, 15}, {"q5_k_m", DType::Q5_K, 17},   {"q6_k", DType::Q6_K, 18},
    {"q8_0", DType::Q8_0, 7},    {"iq4_xs", DType::IQ4_XS, 30}, {"q3_k_m", DType::Q3_K, 12},
    {"q2_k", DType::Q2_K, 10},   {"q4_0", DType::Q4_0, 2},
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

enum class Category { Output, TokenEmbd, AttnVLike, AttnK, AttnOutput, FfnDown, Other };

Category category_of(const std::string& n) {
  if (n == "output.weight") return Category::Output;
  if (n == "token_embd.weight") return Category::TokenEmbd;
  // attn_qkv (the GDN input projection) counts as attn_v in llama-quant's categories.
  if (n.find("attn_qkv.weight") != std::string::npos) return Category::AttnVLike;
  if (n.find("attn_v.weight") != std::string::npos) return Category::AttnVLike;
  if (n.find("attn_k.weight") != std::string::npos) return Category::AttnK;
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
    case DType::IQ4_XS:
      f = DType::IQ4_NL;
      break;
    case DType::Q2_K:
    case DType::Q3_K:
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

}  // namespace

std::optional<QuantScheme> quant_scheme_parse(std::string_view s) {
  std::string l(s);
  for (auto& c : l) c = char(std::tolower(static_cast<unsigned char>(c)));
  for (const QuantPresetRow& p : kQuantPresets)
    if (p.name == l) return QuantScheme{l, true, p.base, p.file_type};
  const auto t = dtype_parse(l);
  if (!t || !quantize_supported(*t)) return std::nullopt;  // make-model must write the type
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
  const DType base = s.base;
  bool tied = true;
  int64_t n_attn_v = 0;
  for (const QuantTensor& t : tensors) {
    if (t.name == "output.weight") tied = false;
    if (t.quantizable && category_of(t.name) == Category::AttnVLike) ++n_attn_v;
  }
  const uint32_t ft = s.file_type;
  const bool q2k = s.preset && ft == 10, q3km = s.preset && ft == 12, q4km = s.preset && ft == 15;
  const bool q5km = s.preset && ft == 17, iq4xs = s.preset && ft == 30;
  int64_t i_attn_v = 0;
  std::vector<DType> out;
  out.reserve(tensors.size());
  for (const QuantTensor& t : tensors) {
    if (!t.quantizable || t.ne.size() < 2) {
      out.push_back(DType::F32);
      continue;
    }
    if (!dtype_is_quantized(base)) {
      out.push_back(base);
      continue;
    }
    DType nt = base;
    const Category c = category_of(t.name);
    if (s.preset) {
      if (c == Category::Output || (tied && c == Category::TokenEmbd)) {
        if (t.ne[0] % dtype_block_size(nt) != 0)
          nt = DType::Q8_0;
        else if (nt != DType::Q8_0)
          nt = DType::Q6_K;
      } else if (c == Category::TokenEmbd) {
        // Unchanged for these presets.
      } else if (c == Category::AttnVLike) {
        if (q2k) {
          nt = m.n_gqa >= 4 ? DType::Q4_K : DType::Q3_K;
        } else if (q3km) {
          nt = i_attn_v < 2 ? DType::Q5_K : DType::Q4_K;
        } else if (iq4xs && m.n_gqa >= 4) {
          nt = DType::Q5_K;
        } else if ((q4km || q5km) && use_more_bits(i_attn_v, n_attn_v)) {
          nt = DType::Q6_K;
        }
        if (m.n_expert == 8) nt = DType::Q8_0;
        ++i_attn_v;
      } else if (c == Category::AttnK) {
        if (m.n_expert == 8) nt = DType::Q8_0;
      } else if (c == Category::FfnDown) {
        // llama-quant counts ffn_down tensors in dense models and parses the name in MoE ones;
        // with one ffn_down per dense layer both are the layer index.
        const int64_t il = layer_of(t.name), n = m.n_layer;
        if (q2k) {
          nt = DType::Q3_K;
        } else if (q3km) {
          nt = il < n / 16 ? DType::Q5_K : DType::Q4_K;
        } else if (q4km) {
          if (use_more_bits(il, n)) nt = DType::Q6_K;
        } else if (iq4xs && il < n / 8) {
          nt = DType::Q5_K;
        } else if (q5km && use_more_bits(il, n)) {
          nt = DType::Q6_K;
        }
      } else if (c == Category::AttnOutput) {
        if (m.n_expert == 8) {
          if (q2k || q3km || q4km || iq4xs) nt = DType::Q5_K;
        } else {
          if (q2k)
            nt = DType::Q3_K;
          else if (q3km)
            nt = DType::Q4_K;
        }
      }
    }
    out.push_back(fallback(t.name, t.ne[0], nt));
  }
  return out;
}

}  // namespace invar
