// Weight-type choices of llama-quantize's presets (llama.cpp src/llama-quant.cpp,
// llama_tensor_get_type and tensor_type_fallback), for the tensors of qwen3next / qwen35 /
// qwen35moe files, so `invar make-model --type q4_k_m` writes the mix a downloaded Q4_K_M has.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "quant/dtype.h"

namespace invar {

// What --type names: a llama-quantize preset, or one type for every matrix ("pure").
struct QuantScheme {
  std::string name;         // as given, lower case ("q4_k_m", "q5_0")
  bool preset = false;      // true: llama-quantize's per-tensor rules apply
  DType base = DType::F32;  // the preset's default type, or the pure type
  uint32_t file_type = 0;   // general.file_type (llama_ftype)
};

// "q4_k_m", "q5_k_m", "q6_k", "q8_0", "iq4_xs", "q3_k_m", "q2_k", "q4_0", "iq3_m", "iq3_s",
// "iq3_xxs", "iq2_m", "iq2_s", "iq2_xs", "iq2_xxs", "iq1_m", "iq1_s", "tq2_0", "tq1_0" and
// "mxfp4_moe" are presets (llama-quantize's names: its IQ2_S is mostly iq2_xs, IQ2_M mostly
// iq2_s); any other type name (f32, f16, bf16, q4_1, q5_0, q5_1, q3_k, q4_k, q5_k, iq4_nl, mxfp4)
// is pure. nullopt if neither.
std::optional<QuantScheme> quant_scheme_parse(std::string_view s);
// Every matrix of type t.
QuantScheme quant_scheme_pure(DType t);
// "q4_k_m, q5_k_m, ..." for --help and errors.
std::string quant_preset_names();

// The model facts the rules read (llama_hparams).
struct QuantModelInfo {
  int64_t n_layer = 0;   // block_count
  int64_t n_expert = 0;  // 0 for dense
  int64_t n_gqa = 0;     // head_count / head_count_kv
};

// One tensor of the file, in file order.
struct QuantTensor {
  std::string name;
  std::vector<int64_t> ne;
  bool quantizable = true;  // false: norms, routers, ssm_conv1d, 1-D (they stay F32)
};

// The type of every tensor, in order. A row length that the chosen type cannot hold falls back as
// llama-quantize does (q4_K → q5_0, q5_K → q5_1, q6_K → q8_0, q2_K/q3_K/tq1_0/tq2_0 → q4_0,
// iq1_*/iq2_*/iq3_*/iq4_xs → iq4_nl, then f16); a type without a fallback (q4_0, q8_0, mxfp4,
// ...) throws invar::Error naming the tensor.
std::vector<DType> quant_plan(const QuantScheme& s, const QuantModelInfo& m,
                              const std::vector<QuantTensor>& tensors);

}  // namespace invar
