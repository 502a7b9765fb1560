// Structured output inside the engine: a request's grammar (GenerationRequest::grammar) as the
// state of one sequence. Each generated token is sampled from the row with every token the
// grammar forbids at −inf, then advances the grammar; the end of sequence is allowed only once
// the output is complete.
//
// Under the contract (DESIGN.md §1): the mask is a pure function of (grammar, tokens generated
// so far) (grammar/matcher.h), and only tokens that become part of the output advance it, so a
// verification chunk of speculative decoding masks each row exactly as plain decoding masks that
// position: a draft the grammar forbids is simply not the token sampled there. Rejected drafts
// never touch the grammar state, so nothing is rolled back.
//
// Cost per generated token: Matcher::fill_mask (a copy of ceil(V/64) words when the state was
// seen before, one vocabulary-trie walk when not: docs/structured-output.md), a copy of the
// [V] row and V/64 word tests. The mask of the first row a step samples is computed by
// MaskPrefetch (engine/mask_prefetch.h) while that step's forward pass runs; the masks of the
// rows after a kept draft, on the engine thread after it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "grammar/matcher.h"

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// The vocabulary as the grammar sees it: each id's bytes, control and unused ids empty (never
// allowed), `eos_ids` allowed when the output is complete. O(total token bytes · log V), ~30 MB
// for 151k tokens: built once per engine, on first use.
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const Tokenizer& tok,
                                                              std::vector<int32_t> eos_ids);

class SeqConstraint {
 public:
  // after_token: the constraint starts once this token has been generated (the end of a
  // reasoning block, </think>); -1: from the first generated token. state_bytes: the matcher's
  // budget (grammar::Limits::max_state_bytes; 0: none).
  SeqConstraint(std::shared_ptr<const grammar::Grammar> g,
                std::shared_ptr<const grammar::Vocabulary> vocab, int32_t after_token,
                size_t state_bytes = 0);

  // The row to sample from: `row` itself while the constraint has not started, else a copy in
  // `scratch` with forbidden ids (and ids past the grammar's vocabulary) at −inf. Throws
  // EngineError(invalid_request) if the grammar allows no token at all, passes a run-time
  // limit (grammar::Limits::max_stacks_per_state) or its state outgrows its budget (advance()
  // too): errors of this sequence alone.
  const float* masked(const float* row, int64_t n_vocab, std::vector<float>& scratch);
  // The token sampled from masked(): advances the grammar (or starts it at after_token).
  // Throws EngineError: invalid_request past a run-time limit, internal for a forbidden token.
  void advance(int32_t token);
  // Computes the current state's mask ahead of masked(), which then only applies it: called on
  // another thread while nothing else touches this object. A failure is not reported here:
  // masked() computes again and throws where the step expects it. True when it computed a mask
  // (false: not started yet, already computed, or failed).
  bool prefetch() noexcept;
  // An end-of-sequence id was accepted: the output is complete and nothing may follow.
  bool terminated() const { return active_ && m_.is_terminated(); }

 private:
  grammar::Matcher m_;
  std::vector<uint64_t> words_;
  bool words_ready_ = false;  // words_ holds the current state's mask (prefetch, until advance)
  int32_t after_;
  bool active_;
};

}  // namespace invar
