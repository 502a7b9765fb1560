// ggml tensor type ids as GGUF files use them: names and block geometry for every type a file
// may carry, so the reader can bound the data of tensors invar cannot compute with and name
// their type in the error that rejects them.
#pragma once

#include <cstdint>
#include <string_view>

namespace invar {

struct GgmlTypeTraits {
  std::string_view name;  // as ggml prints it ("q4_K")
  int64_t block_size;     // elements per block
  int64_t block_bytes;    // bytes per block
};

// nullptr for an id that no ggml version defines (or one that was removed).
const GgmlTypeTraits* ggml_type_traits(uint32_t type_id);
// Name of a type id, or "type <id>" when unknown.
std::string ggml_type_label(uint32_t type_id);

}  // namespace invar
