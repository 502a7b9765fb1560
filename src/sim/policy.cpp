#include "sim/policy.h"

#include <algorithm>

#include "core/error.h"

namespace invar::sim {

std::optional<PolicyKind> policy_parse(std::string_view s) {
  if (s == "vllm-align") return PolicyKind::vllm_align;
  if (s == "vllm-align-54076") return PolicyKind::vllm_align_54076;
  if (s == "vllm-all") return PolicyKind::vllm_all;
  if (s == "invar") return PolicyKind::invar;
  return std::nullopt;
}

std::string_view policy_name(PolicyKind k) {
  switch (k) {
    case PolicyKind::vllm_align:
      return "vllm-align";
    case PolicyKind::vllm_align_54076:
      return "vllm-align-54076";
    case PolicyKind::vllm_all:
      return "vllm-all";
    case PolicyKind::invar:
      return "invar";
  }
  return "?";
}

std::optional<SpecMethod> spec_parse(std::string_view s) {
  if (s == "none") return SpecMethod::none;
  if (s == "eagle") return SpecMethod::eagle;
  if (s == "mtp") return SpecMethod::mtp;
  if (s == "ngram") return SpecMethod::ngram;
  return std::nullopt;
}

std::string_view spec_name(SpecMethod s) {
  switch (s) {
    case SpecMethod::none:
      return "none";
    case SpecMethod::eagle:
      return "eagle";
    case SpecMethod::mtp:
      return "mtp";
    case SpecMethod::ngram:
      return "ngram";
  }
  return "?";
}

int64_t policy_step_length(const Policy& p, int64_t prompt_tokens, int64_t computed,
                           int64_t budget_tokens) {
  const int64_t B = p.block_size;
  const int64_t n = std::min(budget_tokens, prompt_tokens - computed);
  INVAR_CHECK(n > 0);
  if (p.kind == PolicyKind::vllm_all || p.kind == PolicyKind::invar) return n;

  // Scheduler._mamba_block_aligned_split (prior-art file), prefill only: num_tokens == P.
  const int64_t start = computed;
  const int64_t prefill_end = prompt_tokens;
  if (start >= prefill_end) return n;
  int64_t last = prompt_tokens - prompt_tokens % B;
  if (p.use_eagle()) last = std::max<int64_t>(last - B, 0);
  int64_t end = start + n;
  if (end < prefill_end) {
    const int64_t aligned = (end / B) * B;
    if (aligned > start) end = aligned;
  }
  const int64_t next_boundary = (start / B + 1) * B;
  int64_t first_stop;
  if (p.kind == PolicyKind::vllm_align_54076) {
    first_stop = next_boundary;  // every crossed boundary ends a step
  } else {
    first_stop = start % B != 0 ? next_boundary : 0;
  }
  int64_t best = end;
  for (int64_t s : {first_stop, last}) {
    if (start < s && s < end) best = std::min(best, s);
  }
  return best - start;
}

}  // namespace invar::sim
