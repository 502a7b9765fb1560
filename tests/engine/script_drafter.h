// A drafter for the speculative-decoding tests (ScriptDrafter, below).
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "engine/drafter.h"

namespace invar::testing_engine {

// Random weights rarely repeat themselves, so n-gram drafts are rarely right. This drafter
// knows each request's plain-decoding continuation (its script) and proposes it with mistakes
// at positions that vary with the length, so runs see full acceptance, partial acceptance and
// immediate rejection at every offset. Requests without a script get a wrong guess.
class ScriptDrafter : public Drafter {
 public:
  explicit ScriptDrafter(std::vector<std::vector<int32_t>> scripts)
      : scripts_(std::move(scripts)) {}
  std::string_view name() const override { return "script"; }
  std::unique_ptr<DraftSeq> seq_make(std::span<const int32_t> prompt) override {
    auto s = std::make_unique<Seq>();
    for (const auto& sc : scripts_)
      if (sc.size() >= prompt.size() && std::equal(prompt.begin(), prompt.end(), sc.begin()))
        s->script = &sc;
    return s;
  }
  void propose(std::span<DraftJob> jobs, ThreadPool&) override {
    for (DraftJob& j : jobs) {
      const auto* script = static_cast<Seq*>(j.seq)->script;
      const size_t L = j.tokens.size();
      uint64_t h = L * 0x9e3779b97f4a7c15ull;  // which draft is wrong, if any: a hash of L
      h ^= h >> 29;
      for (int64_t i = 0; i < j.max_k; ++i) {
        const size_t at = L + static_cast<size_t>(i);
        int32_t t = script && at < script->size() ? (*script)[at] : j.tokens[L - 1];
        if (h % 3 == 0 && static_cast<uint64_t>(i) == (h / 3) % static_cast<uint64_t>(j.max_k + 1))
          t = (t + 1) % 398;
        j.out->push_back(t);
      }
    }
  }

 private:
  struct Seq : DraftSeq {
    const std::vector<int32_t>* script = nullptr;
  };
  std::vector<std::vector<int32_t>> scripts_;
};

}  // namespace invar::testing_engine
