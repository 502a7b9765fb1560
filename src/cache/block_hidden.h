// The trunk's hidden rows kept with a KV block, for a drafter that reads them (the MTP head:
// engine/drafter_mtp.h). A position served from the prefix cache is never computed, so without
// them the drafter would have no hidden row there and draft worse after every hit. They sit in
// the block's slot right after its KV floats, charged against the cache budget with it:
//
//   [kv_floats] KV | [1] presence | [block_size][n_embd] hidden rows
//
// presence is 1 when every row holds the trunk's row of its position (written as the block was
// computed, or restored from a lower-tier record that carried them) and 0 when the rows are
// absent (a record written without them): the drafter then reads zeros, as if it had never
// seen the positions. The rows are the LM head's input, a pure function of the tokens like the
// logits, so a restored row equals a computed one bit for bit.
#pragma once

#include <cstdint>

namespace invar {

struct BlockHidden {
  int64_t kv_floats = 0;   // the block's KV floats before the hidden section
  int64_t block_size = 0;  // positions per block
  int64_t n_embd = 0;      // floats per hidden row; 0: blocks carry no hidden rows

  bool on() const { return n_embd > 0; }
  int64_t row_floats() const { return block_size * n_embd; }      // [block_size][n_embd]
  int64_t floats() const { return on() ? 1 + row_floats() : 0; }  // the whole section
  bool present(const float* block) const { return block[kv_floats] == 1.0f; }
  void present_set(float* block, bool present) const { block[kv_floats] = present ? 1.0f : 0.0f; }
  float* rows(float* block) const { return block + kv_floats + 1; }
  const float* rows(const float* block) const { return block + kv_floats + 1; }
};

}  // namespace invar
