// The ids that end a completion in a vocabulary: a fact of the tokenizer that the engine (the
// grammar's end, stop tokens) and every front end (stop_tokens unless end of sequence is
// ignored) read alike.
#pragma once

#include <cstdint>
#include <vector>

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// Its end-of-sequence token, <|im_end|>, <|endoftext|>: those the vocabulary has, once each.
std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok);

}  // namespace invar
