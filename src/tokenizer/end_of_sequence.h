// The ids that end a completion in a vocabulary: a fact of the tokenizer that the engine (the
// grammar's end, stop tokens) and every front end (stop_tokens unless end of sequence is
// ignored) read alike.
#pragma once

#include <cstdint>
#include <vector>

namespace invar {

class Tokenizer;  // tokenizer/tokenizer.h

// The ids llama.cpp ends generation on (its end-of-generation set, llama-vocab.cpp), those the
// vocabulary has, once each: the file's eos, eot and eom ids; <|im_end|> and <|endoftext|>;
// and, where the file has them as added tokens (control or user-defined), the FIM
// pad/repo/separator tokens and the end-of-turn names other families use. llama.cpp also takes a
// *normal* BPE token of those names and retypes it control: Qwen's BPE vocabulary holds "</s>" as
// plain text (id 128247), which would then end a completion that writes HTML. invar keeps plain
// text plain.
std::vector<int32_t> end_of_sequence_ids(const Tokenizer& tok);

}  // namespace invar
