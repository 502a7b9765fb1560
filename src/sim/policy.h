// Scheduler policies of hybrid (attention + recurrent state) prefix caches, as pure functions.
// Facts about vLLM: docs/prior-art/vllm-hybrid-prefix-cache.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace invar::sim {

enum class PolicyKind {
  vllm_align,        // mamba_cache_mode=align, newest split rule
  vllm_align_54076,  // align with PR #54076: every crossed boundary ends a step
  vllm_all,          // mamba_cache_mode=all: state at every boundary, steps cut by budget only
  invar,             // checkpoint at every boundary the computation passes; chunk-invariant math
};

enum class SpecMethod { none, eagle, mtp, ngram };

struct Policy {
  PolicyKind kind = PolicyKind::vllm_align;
  SpecMethod spec = SpecMethod::none;
  int64_t block_size = 1600;  // [B] tokens per cache block (KV block = state block in align mode)
  int64_t budget = 8192;      // max tokens scheduled per step (chunked prefill)

  // EAGLE-family drafts (eagle, mtp) back the last stop off one block and drop the last matched
  // block on lookup; ngram drafts do not (vLLM's `use_eagle`).
  bool use_eagle() const { return spec == SpecMethod::eagle || spec == SpecMethod::mtp; }
  // True where the state is stored at every boundary, not only where a step ends on one.
  bool state_at_every_boundary() const {
    return kind == PolicyKind::vllm_all || kind == PolicyKind::invar;
  }
  // invar's forward is chunk- and batch-invariant (DESIGN rule N4, N1): a token's numbers do not
  // depend on which step computed it, so the step shape is not part of its signature.
  bool chunk_invariant() const { return kind == PolicyKind::invar; }
};

std::optional<PolicyKind> policy_parse(std::string_view s);
std::string_view policy_name(PolicyKind k);
std::optional<SpecMethod> spec_parse(std::string_view s);
std::string_view spec_name(SpecMethod s);

// Length of the next prefill step of a prompt of `prompt_tokens` tokens with `computed` tokens
// done, when the budget allows `budget_tokens` more. vllm_align follows
// Scheduler._mamba_block_aligned_split; the others cut by budget only (or on every boundary).
int64_t policy_step_length(const Policy& p, int64_t prompt_tokens, int64_t computed,
                           int64_t budget_tokens);

}  // namespace invar::sim
