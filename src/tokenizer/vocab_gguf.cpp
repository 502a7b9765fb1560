// Vocab <-> GGUF tokenizer.ggml.* keys, as llama.cpp reads and writes them.
#include "core/error.h"
#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {

Vocab vocab_from_gguf(const GgufFile& f) {
  Vocab v;
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2") {
    throw Error("tokenizer: tokenizer.ggml.model is '" + model +
                "'; invar implements byte-level BPE ('gpt2') only");
  }
  v.pre = f.get_string_or("tokenizer.ggml.pre", "");
  if (v.pre.empty()) {
    // llama.cpp warns and splits with its default pattern; the architecture names the one its
    // converter writes, which is what the file's merges were trained with.
    const std::string arch = f.get_string_or("general.architecture", "");
    v.pre = arch.rfind("qwen35", 0) == 0  ? "qwen35"
            : arch.rfind("qwen3", 0) == 0 ? "qwen2"
                                          : "default";
    if (v.pre != "default")
      v.warnings.push_back("tokenizer.ggml.pre is missing: splitting as '" + v.pre +
                           "', the pre-tokenizer llama.cpp's converter writes for '" + arch + "'");
  }
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.find("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    if (types.size() != v.tokens.size()) {
      throw Error("tokenizer: tokenizer.ggml.token_type has " + std::to_string(types.size()) +
                  " entries for " + std::to_string(v.tokens.size()) + " tokens");
    }
    v.token_types.assign(types.begin(), types.end());
  } else {
    v.token_types.assign(v.tokens.size(), token_type::kNormal);
  }
  if (f.find("tokenizer.ggml.merges")) v.merges = f.get_string_array("tokenizer.ggml.merges");
  const auto n = static_cast<int64_t>(v.tokens.size());
  // An id outside the vocabulary is no token: llama.cpp warns and keeps its default (none).
  auto special = [&](const char* key) -> int32_t {
    const int64_t id = f.get_int_or(key, -1);
    if (id < -1 || id >= n) {
      v.warnings.push_back(std::string(key) + " = " + std::to_string(id) +
                           " is outside the vocabulary of " + std::to_string(n) + ": ignored");
      return -1;
    }
    return static_cast<int32_t>(id);
  };
  v.bos_id = special("tokenizer.ggml.bos_token_id");
  v.eos_id = special("tokenizer.ggml.eos_token_id");
  v.pad_id = special("tokenizer.ggml.padding_token_id");
  v.eot_id = special("tokenizer.ggml.eot_token_id");
  v.eom_id = special("tokenizer.ggml.eom_token_id");
  v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", false);
  v.chat_template = f.get_string_or("tokenizer.chat_template", "");
  return v;
}

void vocab_to_gguf(const Vocab& v, GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", v.pre);
  w.set_string_array("tokenizer.ggml.tokens", v.tokens);
  std::vector<int32_t> types = v.token_types;
  if (types.empty()) types.assign(v.tokens.size(), token_type::kNormal);
  INVAR_CHECK(types.size() == v.tokens.size(), "token types and tokens differ in length");
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", v.merges);
  if (v.bos_id >= 0) w.set_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(v.bos_id));
  if (v.eos_id >= 0) w.set_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(v.eos_id));
  if (v.eot_id >= 0) w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(v.eot_id));
  if (v.eom_id >= 0) w.set_u32("tokenizer.ggml.eom_token_id", static_cast<uint32_t>(v.eom_id));
  if (v.pad_id >= 0) w.set_u32("tokenizer.ggml.padding_token_id", static_cast<uint32_t>(v.pad_id));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_bos);
  if (!v.chat_template.empty()) w.set_string("tokenizer.chat_template", v.chat_template);
}

}  // namespace invar
