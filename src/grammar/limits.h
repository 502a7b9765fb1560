// The bounds every compilation and every matcher runs under (issue 26: a hostile schema, regex
// or grammar ends in LimitError in bounded time and memory). Each is checked as the structure it
// bounds grows, so the work done before the error is proportional to the bound.
#pragma once

#include <cstddef>
#include <cstdint>

namespace invar::grammar {

struct Limits {
  size_t max_input_bytes = 512 * 1024;    // grammar / regex / schema text; a 1 MB input is refused
  size_t max_grammar_elements = 1 << 20;  // lowered program size (elements + ends), ~4 MB
  size_t max_rules = 1 << 18;             // rules after lowering, helpers included
  size_t max_expr_nodes = 1 << 20;        // front-end expression nodes before lowering
  int max_nesting = 128;  // groups / parentheses / schema nesting / $ref chain depth in a front end
  int64_t max_repeat = 10000;  // a bound of {m,n}, minLength, maxItems... above it: LimitError
  // States a counted repetition of a regex / GBNF can expand to: its bound times the states of
  // what it repeats (Builder::states_repeat; nested repetitions multiply). Live parses are
  // positions of that expansion, so beyond max_stacks_per_state a repetition could exceed the
  // run-time limit below: refusing it here makes `([a-z]{0,300}){0,300}` (90000) a compile
  // error, a 400, instead of a failure in the middle of generation.
  int64_t max_repeat_states = 16384;
  // Matcher: a stack deeper than this is a dead path (the language is cut at this nesting; JSON
  // nested deeper than ~max_stack_depth/4 levels cannot be produced). A pure function of the
  // bytes, so masks stay a pure function of the tokens.
  int32_t max_stack_depth = 2048;
  // Matcher: parallel parses alive at one byte (ambiguity). Above it accept/mask throw
  // LimitError; the count depends only on the grammar and the bytes so far.
  size_t max_stacks_per_state = 16384;
  // Matcher caches are compacted (rebuilt from the live states) once they pass these sizes at
  // the start of a call; this bounds memory and never changes a result.
  size_t max_cached_nodes = 1 << 20;        // interned stack frames
  size_t max_cached_transitions = 1 << 22;  // memoised (state, byte class) steps, 16 MB at most
  size_t max_cached_masks = 32;             // whole-vocabulary masks kept per matcher
  // Matcher: bytes its state may hold (0: no bound but the ones above). With a bound the caches
  // above are cut to fit a share of it and compacted when the estimate passes it; a state that
  // still holds over half of it after a compaction (its live parses and history) is a
  // LimitError, from then on at every call. What the estimate holds depends only on the grammar
  // and the tokens, so the error does too.
  size_t max_state_bytes = 0;
};

}  // namespace invar::grammar
