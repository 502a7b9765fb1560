#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "grammar/error.h"

namespace invar::grammar {

size_t Matcher::VecHash::operator()(const std::vector<int32_t>& v) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
  for (int32_t x : v) {
    h ^= static_cast<uint32_t>(x);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  return static_cast<size_t>(h);
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const Vocabulary> vocab,
                 const Limits& limits)
    : g_(std::move(grammar)),
      vocab_(std::move(vocab)),
      lim_(limits),
      compact_at_frames_(limits.max_cached_nodes),
      compact_at_states_(limits.max_cached_nodes) {
  INVAR_CHECK(g_ && vocab_);
  n_cls_ = g_->n_byte_classes();
  if (const size_t b = lim_.max_state_bytes; b > 0) {
    // The caches get a quarter of the budget each (masks an eighth), the live state the rest.
    lim_.max_cached_nodes =
        std::min(lim_.max_cached_nodes, std::max<size_t>(64, b / 4 / kFrameBytes));
    lim_.max_cached_transitions =
        std::min(lim_.max_cached_transitions, std::max<size_t>(64, b / 4 / sizeof(int32_t)));
    lim_.max_cached_masks =
        std::min(lim_.max_cached_masks, b / 8 / (vocab_->mask_words() * sizeof(uint64_t)));
    compact_at_frames_ = compact_at_states_ = lim_.max_cached_nodes;
  }
  // The dense step table holds a row per state: its bound is a bound on states.
  states_bound_ = std::min(lim_.max_cached_nodes,
                           std::max<size_t>(1, lim_.max_cached_transitions / size_t(n_cls_)));
  compact_at_states_ = states_bound_;
  // State 0: dead (no stack, not accepting).
  states_.push_back({});
  trans_.assign(static_cast<size_t>(n_cls_), kUnknown);
  state_index_.emplace(std::vector<int32_t>{-1}, kDead);
  walk_states_.resize(vocab_->max_depth() + 1);
  history_.push_back(initial_state());
}

int32_t Matcher::initial_state() {
  work_.clear();
  visited_.clear();
  scratch_.clear();
  scratch_accepting_ = false;
  for (int32_t a : g_->alternatives(g_->root())) work_.push_back({a, -1});
  closure();
  return intern_state();
}

int32_t Matcher::intern_frame(int32_t pos, int32_t parent) {
  const int32_t depth = parent < 0 ? 1 : frames_[parent].depth + 1;
  if (depth > lim_.max_stack_depth) return -1;  // nesting cut: a dead path
  const uint64_t key =
      (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent + 1);
  auto [it, inserted] = frame_index_.try_emplace(key, static_cast<int32_t>(frames_.size()));
  if (inserted) frames_.push_back({pos, parent, depth});
  return it->second;
}

// Expands the work list (code position, frame below) until every live path stands on a
// terminal: calls push a return frame (none for a tail call), an alternative's end pops one,
// and the end of the bottom frame marks the state accepting. The visited set ends
// epsilon-cycles; left recursion, which would grow the stack, is refused at compile time.
void Matcher::closure() {
  const auto& code = g_->code();
  while (!work_.empty()) {
    const auto [pos, parent] = work_.back();
    work_.pop_back();
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) |
                         static_cast<uint32_t>(parent + 1);
    if (!visited_.insert(key).second) continue;
    const int32_t c = code[pos];
    if (Grammar::is_end(c)) {
      if (parent < 0) {
        scratch_accepting_ = true;
      } else {
        work_.push_back({frames_[parent].pos, frames_[parent].parent});
      }
    } else if (!Grammar::is_call(c)) {
      const int32_t id = intern_frame(pos, parent);
      if (id >= 0) scratch_.push_back(id);
    } else {
      int32_t ret = parent;
      if (!Grammar::is_end(code[pos + 1])) {
        ret = intern_frame(pos + 1, parent);
        if (ret < 0) continue;
      }
      for (int32_t a : g_->alternatives(Grammar::rule_of(c))) work_.push_back({a, ret});
    }
  }
}

int32_t Matcher::intern_state() {
  std::sort(scratch_.begin(), scratch_.end());
  scratch_.erase(std::unique(scratch_.begin(), scratch_.end()), scratch_.end());
  if (scratch_.size() > lim_.max_stacks_per_state) {
    throw LimitError(
        "grammar: more than " + std::to_string(lim_.max_stacks_per_state) +
        " parallel parses after one byte (max_stacks_per_state): the grammar is too ambiguous");
  }
  if (scratch_.empty() && !scratch_accepting_) return kDead;
  std::vector<int32_t> key = scratch_;
  key.push_back(scratch_accepting_ ? -2 : -1);
  auto [it, inserted] =
      state_index_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (inserted) {
    // The stacks twice (the state and its index key), a vector header and a hash node each.
    state_bytes_ += kStateBytes + 2 * scratch_.size() * sizeof(int32_t);
    states_.push_back({scratch_, scratch_accepting_});
    trans_.resize(trans_.size() + static_cast<size_t>(n_cls_), kUnknown);
  }
  return it->second;
}

int32_t Matcher::step_uncached(int32_t state, uint8_t byte) {
  work_.clear();
  visited_.clear();
  scratch_.clear();
  scratch_accepting_ = false;
  const auto& code = g_->code();
  for (int32_t f : states_[state].stacks) {
    const Frame& fr = frames_[f];
    if (g_->terminal_has(code[fr.pos], byte)) work_.push_back({fr.pos + 1, fr.parent});
  }
  closure();
  return intern_state();
}

int32_t Matcher::step(int32_t state, uint8_t byte) {
  if (state == kDead) return kDead;
  const size_t at = static_cast<size_t>(state) * static_cast<size_t>(n_cls_) + g_->byte_class(byte);
  if (const int32_t known = trans_[at]; known != kUnknown) return known;
  const int32_t next = step_uncached(state, byte);  // may intern states: trans_ grows
  trans_[at] = next;
  return next;
}

int32_t Matcher::run_bytes(int32_t state, std::string_view bytes) {
  for (char c : bytes) {
    state = step(state, static_cast<uint8_t>(c));
    if (state == kDead) return kDead;
  }
  return state;
}

void Matcher::walk_trie(int32_t state, std::span<uint64_t> words) {
  const auto& nodes = vocab_->nodes();
  const auto& ids = vocab_->token_ids();
  walk_states_[0] = state;
  const size_t n = nodes.size();
  for (size_t i = 1; i < n;) {
    const Vocabulary::Node& nd = nodes[i];
    const int32_t s = step(walk_states_[nd.depth - 1], nd.byte);
    if (s == kDead) {
      i = static_cast<size_t>(nd.end);
      continue;
    }
    walk_states_[nd.depth] = s;
    for (int32_t t = nd.tok_begin; t < nd.tok_end; ++t) {
      const int32_t id = ids[t];
      words[id >> 6] |= uint64_t{1} << (id & 63);
    }
    ++i;
  }
}

void Matcher::fill_mask(std::span<uint64_t> words) {
  INVAR_CHECK(words.size() == vocab_->mask_words(), "mask buffer of the wrong size");
  maybe_compact();
  std::fill(words.begin(), words.end(), 0);
  const int32_t s = current();
  if (s == kTerminated || states_[s].accepting) {
    for (int32_t id : vocab_->eos_ids()) words[id >> 6] |= uint64_t{1} << (id & 63);
  }
  if (s == kTerminated) return;
  for (auto& m : masks_) {
    if (m.state == s) {
      m.last_use = ++mask_clock_;
      std::copy(m.words.begin(), m.words.end(), words.begin());
      return;
    }
  }
  walk_trie(s, words);
  // Cache the whole mask (end-of-sequence bits included: they depend on s alone).
  if (lim_.max_cached_masks == 0) return;
  if (masks_.size() < lim_.max_cached_masks) {
    masks_.push_back({s, ++mask_clock_, std::vector<uint64_t>(words.begin(), words.end())});
    return;
  }
  auto lru = std::min_element(
      masks_.begin(), masks_.end(),
      [](const CachedMask& a, const CachedMask& b) { return a.last_use < b.last_use; });
  lru->state = s;
  lru->last_use = ++mask_clock_;
  std::copy(words.begin(), words.end(), lru->words.begin());
}

std::vector<uint64_t> Matcher::mask() {
  std::vector<uint64_t> w(vocab_->mask_words());
  fill_mask(w);
  return w;
}

bool Matcher::token_allowed(int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= vocab_->size()) return false;
  maybe_compact();
  const int32_t s = current();
  if (vocab_->is_eos(id)) return s == kTerminated || states_[s].accepting;
  if (s == kTerminated) return false;
  const std::string& b = vocab_->token(id);
  if (b.empty()) return false;
  return run_bytes(s, b) != kDead;
}

bool Matcher::accept_token(int32_t id) {
  if (!token_allowed(id)) return false;
  if (vocab_->is_eos(id)) {
    history_.push_back(kTerminated);
    return true;
  }
  history_.push_back(run_bytes(current(), vocab_->token(id)));
  return true;
}

size_t Matcher::accept_tokens(std::span<const int32_t> ids) {
  size_t n = 0;
  while (n < ids.size() && accept_token(ids[n])) ++n;
  return n;
}

bool Matcher::accept_bytes(std::string_view bytes) {
  maybe_compact();
  const int32_t s = current();
  if (s == kTerminated) return false;
  const int32_t next = run_bytes(s, bytes);
  if (next == kDead) return false;
  history_.push_back(next);
  return true;
}

std::optional<std::string> Matcher::shortest_completion(size_t max_states) {
  maybe_compact();
  const int32_t start = current();
  if (start == kTerminated || states_[start].accepting) return std::string();
  std::unordered_map<int32_t, std::pair<int32_t, uint8_t>> from;  // state -> (previous, byte)
  std::vector<int32_t> queue{start};
  from.emplace(start, std::make_pair(-1, uint8_t{0}));
  for (size_t head = 0; head < queue.size() && from.size() < max_states; ++head) {
    const int32_t s = queue[head];
    for (int b = 0; b < 256; ++b) {
      const int32_t t = step(s, static_cast<uint8_t>(b));
      if (t == kDead || from.contains(t)) continue;
      from.emplace(t, std::make_pair(s, static_cast<uint8_t>(b)));
      if (states_[t].accepting) {
        std::string out;
        for (int32_t x = t; x != start; x = from[x].first) out += static_cast<char>(from[x].second);
        return std::string(out.rbegin(), out.rend());
      }
      queue.push_back(t);
    }
  }
  return std::nullopt;
}

bool Matcher::is_accepting() const {
  const int32_t s = current();
  return s == kTerminated || states_[s].accepting;
}

bool Matcher::is_terminated() const {
  return current() == kTerminated;
}

void Matcher::rollback(size_t k) {
  INVAR_CHECK(k <= n_steps(), "rollback past the first token");
  history_.resize(history_.size() - k);
}

Matcher Matcher::fork() const {
  return *this;
}

// Rebuilds frames, states and caches from the states the history still names, renumbered in
// history order: ids change, the stacks they stand for do not, so no result changes.
size_t Matcher::memory_bytes() const {
  return frames_.size() * kFrameBytes + state_bytes_ + trans_.size() * sizeof(int32_t) +
         masks_.size() * vocab_->mask_words() * sizeof(uint64_t) +
         history_.size() * sizeof(int32_t);
}

void Matcher::maybe_compact() {
  if (!over_budget_.empty()) throw LimitError(over_budget_);
  const size_t budget = lim_.max_state_bytes;
  if (frames_.size() <= compact_at_frames_ && states_.size() <= compact_at_states_ &&
      (budget == 0 || memory_bytes() <= budget))
    return;
  ++compactions_;
  state_bytes_ = 0;
  std::vector<Frame> old_frames;
  std::vector<State> old_states;
  old_frames.swap(frames_);
  old_states.swap(states_);
  frame_index_.clear();
  state_index_.clear();
  masks_.clear();
  states_.push_back({});
  trans_.assign(static_cast<size_t>(n_cls_), kUnknown);
  state_index_.emplace(std::vector<int32_t>{-1}, kDead);
  std::unordered_map<int32_t, int32_t> frame_map, state_map;
  auto copy_frame = [&](auto&& self, int32_t f) -> int32_t {
    if (f < 0) return -1;
    if (auto it = frame_map.find(f); it != frame_map.end()) return it->second;
    const int32_t parent = self(self, old_frames[f].parent);
    const int32_t id = intern_frame(old_frames[f].pos, parent);
    frame_map[f] = id;
    return id;
  };
  for (int32_t& s : history_) {
    if (s == kTerminated || s == kDead) continue;
    if (auto it = state_map.find(s); it != state_map.end()) {
      s = it->second;
      continue;
    }
    scratch_.clear();
    for (int32_t f : old_states[s].stacks) scratch_.push_back(copy_frame(copy_frame, f));
    scratch_accepting_ = old_states[s].accepting;
    const int32_t ns = intern_state();
    state_map[s] = ns;
    s = ns;
  }
  // A long history can hold more live states than the bound: never compact on every call.
  compact_at_frames_ = std::max(lim_.max_cached_nodes, 2 * frames_.size());
  compact_at_states_ = std::max(states_bound_, 2 * states_.size());
  // Over half the budget live, the next compaction would come soon and free little: the
  // state is too large for its budget, now and for every later call (so prefetched and
  // serial masks fail alike).
  if (budget > 0 && memory_bytes() > budget / 2) {
    over_budget_ = "grammar: the matcher's state holds " + std::to_string(memory_bytes()) +
                   " bytes of live parses after compaction, over half of its budget of " +
                   std::to_string(budget) + " bytes (max_state_bytes)";
    throw LimitError(over_budget_);
  }
}

void apply_mask(std::span<float> logits, std::span<const uint64_t> words) {
  INVAR_CHECK(words.size() * 64 >= logits.size(), "mask shorter than the logits");
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!((words[i >> 6] >> (i & 63)) & 1)) logits[i] = neg_inf;
  }
}

}  // namespace invar::grammar
