#include "engine/constraint.h"

#include <algorithm>
#include <limits>
#include <span>
#include <string>

#include "engine/request.h"
#include "grammar/error.h"
#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {

std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const Tokenizer& tok,
                                                              std::vector<int32_t> eos_ids) {
  const Vocab& v = tok.vocab();
  std::vector<std::string> bytes(v.tokens.size());
  for (size_t id = 0; id < bytes.size(); ++id) {
    const int32_t type = id < v.token_types.size() ? v.token_types[id] : token_type::kNormal;
    // Control tokens (<|im_end|>) and padding rows are never text the grammar can match.
    if (type == token_type::kControl || type == token_type::kUnused) continue;
    bytes[id] = tok.token_bytes(static_cast<int32_t>(id));
  }
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes), std::move(eos_ids));
}

namespace {

// The limits a sequence's matcher runs under: those its grammar was compiled with, and its
// share of --grammar-state-bytes.
grammar::Limits limits_of(const grammar::Grammar& g, size_t state_bytes) {
  grammar::Limits l = g.limits();
  l.max_state_bytes = state_bytes;
  return l;
}

// A grammar's run-time bounds (Limits::max_stacks_per_state; its share of --grammar-state-bytes,
// Limits::max_state_bytes) are the request's own to meet, found while its tokens are generated:
// as an EngineError it ends this sequence with a 400, and the step's other sequences never see
// it (engine.cpp catches it per chunk).
[[noreturn]] void grammar_failed(const grammar::Error& e) {
  const std::string what = e.what();
  const bool state = what.find("max_state_bytes") != std::string::npos;
  throw EngineError(ErrorKind::invalid_request, state ? "response_format" : "",
                    std::string("the output grammar cannot be followed") +
                        (state ? " within its bounds (--grammar-state-bytes per sequence)" : "") +
                        ": " + what);
}

}  // namespace

SeqConstraint::SeqConstraint(std::shared_ptr<const grammar::Grammar> g,
                             std::shared_ptr<const grammar::Vocabulary> vocab, int32_t after_token,
                             size_t state_bytes)
    : m_(g, vocab, limits_of(*g, state_bytes)),
      words_(vocab->mask_words()),
      after_(after_token),
      active_(after_token < 0) {}

const float* SeqConstraint::masked(const float* row, int64_t n_vocab, std::vector<float>& scratch) {
  if (!active_) return row;
  try {
    if (!words_ready_) m_.fill_mask(words_);
  } catch (const grammar::Error& e) {
    grammar_failed(e);
  }
  words_ready_ = true;
  bool any = false;
  for (uint64_t w : words_) any |= w != 0;
  if (!any)
    throw EngineError(ErrorKind::invalid_request, "response_format",
                      "the output grammar allows no token here: this model's vocabulary cannot "
                      "spell what it requires");
  scratch.assign(row, row + n_vocab);
  const auto V = static_cast<int64_t>(words_.size()) * 64;
  const int64_t covered = std::min(n_vocab, V);
  grammar::apply_mask(std::span<float>(scratch.data(), static_cast<size_t>(covered)),
                      std::span<const uint64_t>(words_));
  // Output rows past the tokenizer's vocabulary (padding) are never allowed.
  for (int64_t i = covered; i < n_vocab; ++i)
    scratch[static_cast<size_t>(i)] = -std::numeric_limits<float>::infinity();
  return scratch.data();
}

bool SeqConstraint::prefetch() noexcept {
  if (!active_ || words_ready_) return false;
  try {
    m_.fill_mask(words_);
    words_ready_ = true;
  } catch (...) {
    words_ready_ = false;
  }
  return words_ready_;
}

void SeqConstraint::advance(int32_t token) {
  words_ready_ = false;
  if (!active_) {
    active_ = token == after_;
    return;
  }
  bool accepted = false;
  try {
    accepted = m_.accept_token(token);
  } catch (const grammar::Error& e) {
    grammar_failed(e);
  }
  if (!accepted)
    throw EngineError(ErrorKind::internal, "",
                      "token " + std::to_string(token) + " was sampled but the grammar forbids it");
}

}  // namespace invar
