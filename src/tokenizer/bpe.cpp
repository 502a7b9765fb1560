#include "tokenizer/bpe.h"

#include <algorithm>

#include "core/error.h"

namespace invar {

MergeTable::MergeTable(size_t n_merges) {
  size_t cap = 16;
  while (cap < 2 * n_merges) cap <<= 1;
  slots_.resize(cap);  // zero pages: every key 0, every slot empty
  mask_ = cap - 1;
}

static inline uint64_t mix(uint64_t k) {
  // splitmix64 finaliser: ids are small and dense, so spread them before masking.
  k ^= k >> 30;
  k *= 0xbf58476d1ce4e5b9ull;
  k ^= k >> 27;
  k *= 0x94d049bb133111ebull;
  return k ^ (k >> 31);
}

void MergeTable::add(int32_t left, int32_t right, uint32_t rank, int32_t result) {
  INVAR_CHECK(2 * (n_ + 1) <= slots_.size(), "merge table over capacity");
  const uint64_t k = key(left, right) + 1;
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.key == k) return;
    if (s.key == 0) {
      s = {k, {rank, result}};
      ++n_;
      return;
    }
  }
}

const MergeTable::Merge* MergeTable::find(int32_t left, int32_t right) const {
  const uint64_t k = key(left, right) + 1;
  for (uint64_t i = mix(k) & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.key == k) return &s.merge;
    if (s.key == 0) return nullptr;
  }
}

namespace {

// Min-heap order on (rank, pos).
inline bool cand_after(const BpeScratch::Cand& a, const BpeScratch::Cand& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

// Short words (most of them): a linear scan for the best pair each round over cached pair
// ranks; a merge only changes the two pairs beside it.
void merge_small(const MergeTable& m, std::vector<int32_t>& sym,
                 std::vector<MergeTable::Merge>& pair) {
  constexpr MergeTable::Merge kNone{UINT32_MAX, -1};
  auto lookup = [&](size_t i) {
    const MergeTable::Merge* mg = m.find(sym[i], sym[i + 1]);
    return mg ? *mg : kNone;
  };
  pair.resize(sym.size() - 1);
  for (size_t i = 0; i + 1 < sym.size(); ++i) pair[i] = lookup(i);
  while (!pair.empty()) {
    size_t best = 0;
    for (size_t i = 1; i < pair.size(); ++i)
      if (pair[i].rank < pair[best].rank) best = i;
    if (pair[best].rank == UINT32_MAX) return;
    sym[best] = pair[best].result;
    sym.erase(sym.begin() + static_cast<ptrdiff_t>(best) + 1);
    pair.erase(pair.begin() + static_cast<ptrdiff_t>(best));
    if (best > 0) pair[best - 1] = lookup(best - 1);
    if (best < pair.size()) pair[best] = lookup(best);
  }
}

// Long words: a heap of candidate pairs over a linked list of symbols, O(n log n).
void merge_large(const MergeTable& m, BpeScratch& s, size_t n) {
  auto& sym = s.sym;
  auto& prev = s.prev;
  auto& next = s.next;
  auto& heap = s.heap;
  prev.resize(n);
  next.resize(n);
  heap.clear();
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  auto push = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t r = next[pos];
    if (r < 0) return;
    if (const MergeTable::Merge* mg = m.find(sym[pos], sym[r])) {
      heap.push_back({mg->rank, pos, sym[pos], sym[r]});
      std::push_heap(heap.begin(), heap.end(), cand_after);
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) push(static_cast<int32_t>(i));
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), cand_after);
    const BpeScratch::Cand c = heap.back();
    heap.pop_back();
    // A stale candidate: one of its symbols has been merged since. A symbol only ever grows,
    // so equal ids at both ends mean the pair is unchanged.
    if (sym[c.pos] != c.left) continue;
    const int32_t r = next[c.pos];
    if (r < 0 || sym[r] != c.right) continue;
    sym[c.pos] = m.find(c.left, c.right)->result;
    sym[r] = -1;
    next[c.pos] = next[r];
    if (next[r] >= 0) prev[next[r]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
}

}  // namespace

void bpe_merge(const MergeTable& merges, const int32_t* ids, size_t n, BpeScratch& s,
               std::vector<int32_t>& out) {
  if (n == 1) {
    out.push_back(ids[0]);
    return;
  }
  s.sym.assign(ids, ids + n);
  // Both paths apply the same order (lowest rank, then leftmost); the scan is quicker while
  // the quadratic term is small.
  constexpr size_t kSmallWord = 16;
  if (n <= kSmallWord) {
    merge_small(merges, s.sym, s.pair);
    out.insert(out.end(), s.sym.begin(), s.sym.end());
    return;
  }
  merge_large(merges, s, n);
  for (int32_t i = 0; i >= 0; i = s.next[i]) out.push_back(s.sym[i]);
}

}  // namespace invar
