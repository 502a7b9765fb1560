// Generated token bytes → the text a client sees, and the one place stop strings are detected.
// Tokens are byte-level, so one token may end inside a UTF-8 character: bytes are held back
// until the character completes (streaming never splits a character), and text that may still
// grow into a stop string is held back until it cannot. A completed stop string ends the text
// just before it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace invar {

class TextAssembler {
 public:
  explicit TextAssembler(std::vector<std::string> stops);
  // Appends one token's bytes; returns the text that can now be released (maybe ""). With
  // stops off (min_tokens not reached) no stop string is looked for and nothing is held back
  // for one: the text up to here can end no stop string.
  std::string push(std::string_view token_bytes, bool stops = true);
  // End of generation: everything still held back (bytes of an unfinished character as U+FFFD).
  std::string finish();
  bool stopped() const { return stopped_; }  // a stop string completed; later pushes are ignored

 private:
  std::vector<std::string> stops_;
  size_t max_stop_ = 0;
  std::string pending_;  // raw bytes not yet released
  bool stopped_ = false;
};

}  // namespace invar
