// Token masks over a compiled grammar: the state of one constrained sequence.
//
// The engine's loop for a sequence (V = vocabulary size, W = vocab.mask_words() = ceil(V/64)):
//   Matcher m(grammar, vocab);                  // once per request: O(grammar start closure)
//   each step:
//     m.fill_mask(words);                       // [W] uint64: bit id set = token id allowed
//     apply_mask(logits, words);                // [V] float: -inf where the bit is clear
//     id = sample(logits);
//     m.accept_token(id);                       // true (state advanced) or false (unchanged)
//     if (m.is_terminated()) stop;              // an end-of-sequence id was accepted
//   speculative decoding, drafts d[0..k):
//     for i: fill_mask(masks[i]); ok = accept_token(d[i]) — a draft token whose bit is clear
//     is rejected exactly like a wrong draft; rollback(n) undoes the last n accepted tokens.
//
// Contract (DESIGN.md §1): the mask is a pure function of (grammar, tokens accepted so far).
// The matcher memoises (state, byte class) steps (Grammar::byte_class) and whole masks per state,
// and compacts these caches when they pass Limits::max_cached_*; a cache hit, a miss and a
// compaction give the same bits (tests/grammar compares masks from cold and warm matchers). No
// threads, no clocks.
//
// Cost: a mask whose state was seen before (inside a JSON string, after every token of a
// repeated structure) is a copy of W words. A new state walks the vocabulary trie once
// (Vocabulary::nodes(), ~0.5 M nodes for 151k tokens), one memoised step (a load from the
// state's row of the dense step table) per live node; a prefix that dies prunes its subtree.
// accept_token is O(bytes of the token) memoised steps. Not thread-safe: one Matcher per sequence;
// the Grammar and the Vocabulary are shared, const.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/limits.h"
#include "grammar/vocabulary.h"

namespace invar::grammar {

class Matcher {
 public:
  Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
          const Limits& limits = {});
  Matcher(Matcher&&) = default;
  Matcher& operator=(Matcher&&) = default;

  // The allowed tokens of the current state into words[0..W): a normal token when its bytes
  // can continue the output, an end-of-sequence id when the output so far is complete.
  // After termination only the end-of-sequence ids are set. Throws LimitError if a token's
  // bytes lead to more than max_stacks_per_state parallel parses.
  void fill_mask(std::span<uint64_t> words);
  std::vector<uint64_t> mask();

  // Advances by one token; false, and no change, when its bit in mask() would be clear.
  bool accept_token(int32_t id);
  // Advances by the longest allowed prefix of ids; returns its length.
  size_t accept_tokens(std::span<const int32_t> ids);
  // Advances by raw bytes as one step (for forced text); false and no change if not allowed.
  bool accept_bytes(std::string_view bytes);
  // Whether accept_token(id) would succeed, without changing the state: O(token bytes).
  bool token_allowed(int32_t id);

  // The shortest bytes (ties: smallest bytes first) after which the output is complete, found
  // by a breadth-first search over at most max_states states; nullopt if none is found. Does
  // not change the state. For tests and for finishing a constrained output deliberately.
  std::optional<std::string> shortest_completion(size_t max_states = 20000);

  bool is_accepting() const;   // the output so far is a complete sentence of the grammar
  bool is_terminated() const;  // an end-of-sequence id was accepted
  size_t n_steps() const { return history_.size() - 1; }  // accepted tokens / byte runs
  // Undoes the last k accepted steps (k <= n_steps()). O(k).
  void rollback(size_t k);
  // An independent copy of the state and its caches: O(cache size). Rollback is cheaper.
  Matcher fork() const;

  // Internal sizes, for reports and the compaction test.
  size_t n_cached_frames() const { return frames_.size(); }
  size_t n_cached_states() const { return states_.size(); }
  size_t n_compactions() const { return compactions_; }
  // Heap the state and its caches hold, estimated (hash-table nodes at a fixed cost): what
  // Limits::max_state_bytes bounds.
  size_t memory_bytes() const;

 private:
  struct Frame {
    int32_t pos;     // code position: a terminal (top of a stack) or a return position
    int32_t parent;  // frame below, -1 for the bottom
    int32_t depth;
  };
  struct State {
    std::vector<int32_t> stacks;  // sorted frame ids whose pos is a terminal
    bool accepting = false;
  };
  struct VecHash {
    size_t operator()(const std::vector<int32_t>& v) const;
  };
  Matcher(const Matcher&) = default;  // fork() is the named deep copy
  // Estimated heap per interned frame (the frame and its hash-table node) and per interned
  // state beside its stacks (its header, the index key's, a node): memory_bytes()'s unit costs.
  static constexpr size_t kFrameBytes = sizeof(Frame) + 52;
  static constexpr size_t kStateBytes = sizeof(State) + sizeof(std::vector<int32_t>) + 64;
  static constexpr int32_t kDead = 0;
  static constexpr int32_t kTerminated = -2;

  int32_t current() const { return history_.back(); }
  int32_t step(int32_t state, uint8_t byte);
  int32_t step_uncached(int32_t state, uint8_t byte);
  int32_t run_bytes(int32_t state, std::string_view bytes);
  void closure();
  int32_t intern_frame(int32_t pos, int32_t parent);
  int32_t intern_state();
  int32_t initial_state();
  void maybe_compact();
  void walk_trie(int32_t state, std::span<uint64_t> words);

  std::shared_ptr<const Grammar> g_;
  std::shared_ptr<const Vocabulary> vocab_;
  Limits lim_;

  std::vector<Frame> frames_;
  std::unordered_map<uint64_t, int32_t> frame_index_;
  std::vector<State> states_;
  std::unordered_map<std::vector<int32_t>, int32_t, VecHash> state_index_;

  // Memoised steps, dense: trans_[state * n_cls_ + byte class] = next state, kUnknown when not
  // computed yet. A row per interned state; the walk reads one int per trie node from it.
  static constexpr int32_t kUnknown = -1;
  std::vector<int32_t> trans_;
  int32_t n_cls_ = 1;
  size_t states_bound_;  // compaction threshold for states: rows of the dense table

  struct CachedMask {
    int32_t state;
    uint64_t last_use;
    std::vector<uint64_t> words;
  };
  std::vector<CachedMask> masks_;
  uint64_t mask_clock_ = 0;

  std::vector<int32_t> history_;  // [n_steps + 1] state ids (kTerminated after end-of-sequence)
  size_t compactions_ = 0;
  size_t compact_at_frames_, compact_at_states_;  // thresholds, raised when live states need more
  size_t state_bytes_ = 0;                        // interned states' share of memory_bytes()
  std::string over_budget_;  // set once the live state passed max_state_bytes / 2: the error

  // Scratch of step_uncached.
  std::vector<std::pair<int32_t, int32_t>> work_;
  std::unordered_set<uint64_t> visited_;
  std::vector<int32_t> scratch_;
  bool scratch_accepting_ = false;
  std::vector<int32_t> walk_states_;
};

// logits[id] = -inf for every id whose bit is clear. logits: [V], words: [ceil(V/64)].
void apply_mask(std::span<float> logits, std::span<const uint64_t> words);

}  // namespace invar::grammar
