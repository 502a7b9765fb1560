// The speculative-decoding flags `invar serve` and `invar run` share.
#pragma once

#include <CLI/CLI.hpp>

#include "engine/engine.h"

namespace invar::app {

inline void spec_flags_add(CLI::App* c, EngineConfig& e) {
  c->add_option("--spec", e.spec,
                "speculative decoding: none | ngram (drafts from the prompt and text so far) | "
                "mtp (the model's MTP head). Tokens, logprobs and digests are the same either way")
      ->capture_default_str();
  c->add_option("--spec-tokens", e.draft.max_k, "draft tokens verified per step, at most (1..64)")
      ->capture_default_str();
  c->add_option("--spec-ngram-min", e.draft.ngram_min, "--spec ngram: shortest suffix matched")
      ->capture_default_str();
  c->add_option("--spec-ngram-max", e.draft.ngram_max,
                "--spec ngram: longest suffix matched (tried first)")
      ->capture_default_str();
}

}  // namespace invar::app
