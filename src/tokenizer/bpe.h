// Byte-pair merging over token ids. A merge "a b" of rank r is stored as the id pair
// (id(a), id(b)) -> (r, id(a+b)), so a word is merged without building any string.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/zero_pages.h"

namespace invar {

class MergeTable {
 public:
  struct Merge {
    uint32_t rank;   // position in the merge list: lower merges first
    int32_t result;  // id of the concatenated token
  };
  explicit MergeTable(size_t n_merges);
  // A pair already present keeps its first (lowest) rank, as a merges list read in order does.
  void add(int32_t left, int32_t right, uint32_t rank, int32_t result);
  const Merge* find(int32_t left, int32_t right) const;
  size_t size() const { return n_; }

 private:
  static uint64_t key(int32_t l, int32_t r) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(l)) << 32) | static_cast<uint32_t>(r);
  }
  // Open addressing, linear probing; capacity a power of two at least twice the merges. Key and
  // value share a 16-byte slot so a lookup touches one cache line.
  struct Slot {
    uint64_t key;  // key + 1; 0 = empty
    Merge merge;
  };
  ZeroedVector<Slot> slots_;  // [cap]
  uint64_t mask_ = 0;
  size_t n_ = 0;
};

// Scratch buffers reused across words so merging allocates nothing per word.
struct BpeScratch {
  struct Cand {
    uint32_t rank;
    int32_t pos;  // index of the left symbol
    int32_t left, right;
  };
  std::vector<int32_t> sym, prev, next;
  std::vector<MergeTable::Merge>
      pair;  // [n-1] merge of (sym[i], sym[i+1]); rank UINT32_MAX if none
  std::vector<Cand> heap;
};

// Merges the symbols `ids` (initially one per byte) by rank, lowest rank first and leftmost
// first among equal ranks (HF tokenizers' order), and appends the resulting ids to `out`.
void bpe_merge(const MergeTable& merges, const int32_t* ids, size_t n, BpeScratch& scratch,
               std::vector<int32_t>& out);

}  // namespace invar
