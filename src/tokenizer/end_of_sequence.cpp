#include "tokenizer/end_of_sequence.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace invar {

std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  if (tok.vocab().eos_id >= 0) ids.push_back(tok.vocab().eos_id);
  for (const char* t : {"<|im_end|>", "<|endoftext|>"}) {
    const int32_t id = tok.token_id(t);
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  return ids;
}

}  // namespace invar
