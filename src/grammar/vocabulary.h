// A model's vocabulary as the matcher needs it: each token id's bytes, laid out as a byte trie
// so that a mask walk checks each shared prefix once. Built once per vocabulary and shared (const)
// by every grammar and matcher over it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace invar::grammar {

class Vocabulary {
 public:
  // token_bytes[id]: the raw bytes token id stands for; empty for a special/control token
  // (never allowed by a mask, except the ids in eos_ids, allowed when the grammar accepts).
  // Cost: O(total bytes · log V) once (a sort), ~30 MB for a 151k-token vocabulary.
  Vocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> eos_ids);

  size_t size() const { return bytes_.size(); }             // V, the mask's length in bits
  size_t mask_words() const { return (size() + 63) / 64; }  // uint64 words of a mask
  const std::string& token(int32_t id) const { return bytes_[id]; }
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_; }

  // The trie in preorder: node 0 is the root (empty prefix); a node's subtree is [i, end).
  struct Node {
    uint8_t byte;       // the byte that leads here from the parent
    uint16_t depth;     // bytes from the root (the root is 0)
    int32_t end;        // one past the last node of the subtree
    int32_t tok_begin;  // tokens whose bytes end exactly here: token_ids()[tok_begin, tok_end)
    int32_t tok_end;
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& token_ids() const { return trie_tokens_; }
  size_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eos_;
  std::vector<Node> nodes_;
  std::vector<int32_t> trie_tokens_;
  size_t max_depth_ = 0;
};

}  // namespace invar::grammar
