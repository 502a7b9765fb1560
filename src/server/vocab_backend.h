// The part of a Backend that a real vocabulary answers: tokenisation, token bytes, the
// end-of-sequence ids and the chat side (VocabChat: template + role-injection guard). The engine
// backend and the replay backend add generation.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "server/backend.h"
#include "tokenizer/end_of_sequence.h"

namespace invar::server {

class VocabBackend : public Backend {
 public:
  int64_t n_vocab() const override { return tok_->n_vocab(); }
  std::vector<int32_t> encode(std::string_view text) const override {
    return tok_->encode(text, true);
  }
  std::vector<int32_t> encode_plain(std::string_view text) const override {
    return tok_->encode(text, false);
  }
  const ChatPrompt* chat_template() const override { return chat_->prompt(); }
  ChatTokens chat_encode(const ChatInput& in) const override { return chat_->encode(in); }
  std::string token_bytes(int32_t id) const override { return tok_->token_bytes(id); }
  size_t max_token_bytes() const override { return max_token_bytes_; }
  std::vector<int32_t> end_of_sequence_ids() const override { return eos_; }

 protected:
  // Takes the vocabulary and loads its chat template under `opts` (logged). Throws invar::Error.
  void vocab_set(std::unique_ptr<Tokenizer> tok, const BackendOptions& opts) {
    tok_ = std::move(tok);
    chat_ = std::make_unique<VocabChat>(*tok_, opts);
    eos_ = invar::end_of_sequence_ids(*tok_);
    max_token_bytes_ = 1;
    for (int32_t id = 0; id < int32_t(tok_->n_vocab()); ++id)
      max_token_bytes_ = std::max(max_token_bytes_, tok_->token_bytes(id).size());
  }

  std::unique_ptr<Tokenizer> tok_;
  std::unique_ptr<VocabChat> chat_;  // the template (or none) and the guard
  std::vector<int32_t> eos_;
  size_t max_token_bytes_ = 1;
};

}  // namespace invar::server
