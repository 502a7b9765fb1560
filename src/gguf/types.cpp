#include "gguf/types.h"

#include <array>
#include <string>

#include "gguf/gguf.h"

namespace invar {

namespace {

// Indexed by ggml_type id (ggml.h). Ids 4, 5 and 31-33, 36-38 were removed from ggml.
constexpr std::array<GgmlTypeTraits, 40> kTypes = {{
    {"f32", 1, 4},        {"f16", 1, 2},       {"q4_0", 32, 18},     {"q4_1", 32, 20},
    {"", 0, 0},           {"", 0, 0},          {"q5_0", 32, 22},     {"q5_1", 32, 24},
    {"q8_0", 32, 34},     {"q8_1", 32, 36},    {"q2_K", 256, 84},    {"q3_K", 256, 110},
    {"q4_K", 256, 144},   {"q5_K", 256, 176},  {"q6_K", 256, 210},   {"q8_K", 256, 292},
    {"iq2_xxs", 256, 66}, {"iq2_xs", 256, 74}, {"iq3_xxs", 256, 98}, {"iq1_s", 256, 50},
    {"iq4_nl", 32, 18},   {"iq3_s", 256, 110}, {"iq2_s", 256, 82},   {"iq4_xs", 256, 136},
    {"i8", 1, 1},         {"i16", 1, 2},       {"i32", 1, 4},        {"i64", 1, 8},
    {"f64", 1, 8},        {"iq1_m", 256, 56},  {"bf16", 1, 2},       {"", 0, 0},
    {"", 0, 0},           {"", 0, 0},          {"tq1_0", 256, 54},   {"tq2_0", 256, 66},
    {"", 0, 0},           {"", 0, 0},          {"", 0, 0},           {"mxfp4", 32, 17},
}};

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t type_id) {
  if (type_id >= kTypes.size() || kTypes[type_id].block_size == 0) return nullptr;
  return &kTypes[type_id];
}

std::string ggml_type_label(uint32_t type_id) {
  const GgmlTypeTraits* t = ggml_type_traits(type_id);
  if (t) return std::string(t->name);
  return "type " + std::to_string(type_id);
}

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
      return "uint8";
    case GgufType::INT8:
      return "int8";
    case GgufType::UINT16:
      return "uint16";
    case GgufType::INT16:
      return "int16";
    case GgufType::UINT32:
      return "uint32";
    case GgufType::INT32:
      return "int32";
    case GgufType::FLOAT32:
      return "float32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::UINT64:
      return "uint64";
    case GgufType::INT64:
      return "int64";
    case GgufType::FLOAT64:
      return "float64";
  }
  return "?";
}

int64_t GgufTensorInfo::n_elements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;  // the reader has checked that this product fits
  return n;
}

std::string tensor_shape_str(const std::vector<int64_t>& ne) {
  std::string s = "{";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "}";
}

}  // namespace invar
