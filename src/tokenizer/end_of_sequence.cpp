#include "tokenizer/end_of_sequence.h"

#include <algorithm>

#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {

namespace {

// llama.cpp's end-of-generation names (llama_vocab::impl::load) and its FIM pad, repo and
// separator spellings, taken here only when the file has the token as an added token (control
// or user-defined: Qwen's FIM tokens are the latter), never as a BPE text token.
constexpr const char* kControlEnds[] = {"<|eot_id|>",
                                        "<|end|>",
                                        "<|return|>",
                                        "<|call|>",
                                        "<|flush|>",
                                        "<|calls|>",
                                        "<end_of_turn>",
                                        "</s>",
                                        "<|eom_id|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "[EOS]",
                                        "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<eos>",
                                        "<turn|>",
                                        "<|tool_response>",
                                        "<｜end▁of▁sentence｜>",
                                        "<|fim_pad|>",
                                        "<fim-pad>",
                                        "<fim_pad>",
                                        "<|fim_repo|>",
                                        "<|repo_name|>",
                                        "<fim-repo>",
                                        "<|file_sep|>",
                                        "<file_sep>"};

}  // namespace

std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok) {
  const Vocab& v = tok.vocab();
  std::vector<int32_t> ids;
  const auto add = [&ids](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  add(v.eos_id);
  add(v.eot_id);
  add(v.eom_id);
  for (const char* t : {"<|im_end|>", "<|endoftext|>"}) add(tok.token_id(t));
  for (const char* t : kControlEnds) {
    const int32_t id = tok.token_id(t);
    if (id < 0 || static_cast<size_t>(id) >= v.token_types.size()) continue;
    const int32_t type = v.token_types[static_cast<size_t>(id)];
    if (type == token_type::kControl || type == token_type::kUserDefined) add(id);
  }
  return ids;
}

}  // namespace invar
