// The MTP drafter on its own, driven as the engine drives it (propose → verify → hidden_observe),
// with verification replaced by the known greedy continuation of the trunk: a draft is accepted
// while it equals the token plain greedy decoding produced there.
//  * On a model whose MTP block predicts well (make-model's MtpKind::bigram) drafts are accepted
//    and rejected, on every architecture and several k;
//  * drafts do not depend on which other sequences share the propose() call;
//  * positions the trunk never computed (a prefix-cache hit) leave it drafting, deterministically;
//  * --spec mtp on a model without the block is a clear error.
#include "engine/drafter_mtp.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/drafter.h"
#include "engine/drafter_make.h"
#include "model/model_harness.h"

namespace invar::test {
namespace drafter_mtp_test {

// The trunk's greedy continuation of `prompt` and its final hidden row at every position.
struct Trace {
  std::vector<int32_t> tokens;  // prompt, then n_gen greedy tokens
  std::vector<float> hidden;    // [tokens − 1][E]: every position the trunk ran
};

Trace greedy(const Model& m, const std::vector<int32_t>& prompt, int64_t n_gen, ThreadPool& pool) {
  const int64_t E = m.hparams().n_embd, V = m.hparams().n_vocab;
  Trace t;
  t.tokens = prompt;
  SeqState st(m, int64_t(prompt.size()) + n_gen);
  std::vector<float> logits(static_cast<size_t>(V));
  auto scratch = m.scratch_make(int64_t(prompt.size()), 1);
  int64_t pos = 0;
  while (int64_t(t.tokens.size()) < int64_t(prompt.size()) + n_gen) {
    const int64_t n = int64_t(t.tokens.size()) - pos;
    t.hidden.resize(size_t((pos + n) * E));
    SeqChunk c;
    c.tokens = t.tokens.data() + pos;
    c.n_tokens = n;
    c.pos0 = pos;
    c.state = st.state.data();
    c.kv_blocks = st.blocks.data();
    c.block_size = st.block_size;
    c.logits = logits.data();
    c.hidden = t.hidden.data() + pos * E;
    m.forward({&c, 1}, *scratch, pool);
    pos += n;
    t.tokens.push_back(argmax_of(logits.data(), V));
  }
  return t;
}

struct Counts {
  int64_t drafted = 0, accepted = 0;
  std::vector<int32_t> drafts;  // every proposal, concatenated
};

// Speculative greedy decoding of the trace with k drafts per step; the trunk's verdict is the
// trace itself. observe_from: the first position whose hidden row the drafter is shown (a
// prefix-cache hit skips the ones before).
Counts speculate(const Model& m, const Trace& t, int64_t n_prompt, int64_t k, ThreadPool& pool,
                 int64_t observe_from = 0) {
  const int64_t E = m.hparams().n_embd, N = int64_t(t.tokens.size());
  MtpDrafter d(m);
  auto seq = d.seq_make({t.tokens.data(), size_t(n_prompt)});
  d.hidden_observe(*seq, observe_from, n_prompt - observe_from, t.hidden.data() + observe_from * E);
  Counts c;
  int64_t len = n_prompt + 1;  // the first generated token is verified, not yet run
  std::vector<int32_t> out;
  while (len < N) {
    DraftJob job{seq.get(), {t.tokens.data(), size_t(len)}, std::min(k, N - len), &out};
    d.propose({&job, 1}, pool);
    int64_t a = 0;
    while (a < int64_t(out.size()) && out[size_t(a)] == t.tokens[size_t(len + a)]) ++a;
    c.drafted += int64_t(out.size());
    c.accepted += a;
    c.drafts.insert(c.drafts.end(), out.begin(), out.end());
    // The verification chunk ran the last token and the drafts; positions len−1 .. len−1+a hold.
    d.hidden_observe(*seq, len - 1, a + 1, t.hidden.data() + (len - 1) * E);
    d.accepted(*seq, {t.tokens.data(), size_t(len + a + 1)}, int64_t(out.size()), a);
    len += a + 1;
  }
  return c;
}

std::string model_path(Arch arch, MtpKind kind) {
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/engine";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/drafter-mtp-" + std::string(arch_name(arch)) +
                           (kind == MtpKind::bigram ? "-bigram" : "") + ".gguf";
  write_generated(tiny_model_config(arch, kind), path,
                  std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
  return path;
}

const std::vector<int32_t> kPrompt = {11, 250, 37, 4, 98, 311, 23, 7, 140, 5, 77, 300, 2, 19};

class MtpDrafterArch : public ::testing::TestWithParam<Arch> {};

TEST_P(MtpDrafterArch, BigramModelDraftsAreAcceptedAndRejected) {
  auto m = Model::load(model_path(GetParam(), MtpKind::bigram));
  ThreadPool pool(2);
  const Trace t = greedy(*m, kPrompt, 40, pool);
  for (int64_t k : {1, 3, 6}) {
    const Counts c = speculate(*m, t, int64_t(kPrompt.size()), k, pool);
    std::printf("%s k=%lld: %lld drafted, %lld accepted\n",
                std::string(arch_name(GetParam())).c_str(), static_cast<long long>(k),
                static_cast<long long>(c.drafted), static_cast<long long>(c.accepted));
    EXPECT_GT(c.accepted, 0) << "k " << k;
    EXPECT_GT(c.drafted - c.accepted, 0) << "k " << k;
    // Thread count changes no draft.
    ThreadPool pool1(1);
    EXPECT_EQ(speculate(*m, t, int64_t(kPrompt.size()), k, pool1).drafts, c.drafts) << "k " << k;
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, MtpDrafterArch,
                         ::testing::Values(Arch::qwen3next, Arch::qwen35, Arch::qwen35moe),
                         [](const auto& info) { return std::string(arch_name(info.param)); });

// Two sequences in one propose() get the drafts each gets alone; a sequence whose first positions
// were never observed (served from the prefix cache) still drafts.
TEST(MtpDrafter, BatchedProposalsEqualSingleOnesAndUnseenPositionsAreZeroRows) {
  auto m = Model::load(model_path(Arch::qwen35, MtpKind::bigram));
  const int64_t E = m->hparams().n_embd;
  ThreadPool pool(2);
  const Trace t = greedy(*m, kPrompt, 6, pool);
  const int64_t n = int64_t(kPrompt.size());
  MtpDrafter d(*m);
  auto full = d.seq_make(kPrompt), cut = d.seq_make(kPrompt);
  d.hidden_observe(*full, 0, n, t.hidden.data());
  d.hidden_observe(*cut, 8, n - 8, t.hidden.data() + 8 * E);
  const std::span<const int32_t> verified(t.tokens.data(), size_t(n + 1));
  std::vector<int32_t> a, b, a1, b1;
  DraftJob jobs[2] = {{full.get(), verified, 4, &a}, {cut.get(), verified, 3, &b}};
  d.propose(jobs, pool);
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(b.size(), 3u);

  MtpDrafter d1(*m);
  auto full1 = d1.seq_make(kPrompt), cut1 = d1.seq_make(kPrompt);
  d1.hidden_observe(*full1, 0, n, t.hidden.data());
  d1.hidden_observe(*cut1, 8, n - 8, t.hidden.data() + 8 * E);
  DraftJob j1{full1.get(), verified, 4, &a1}, j2{cut1.get(), verified, 3, &b1};
  d1.propose({&j2, 1}, pool);
  d1.propose({&j1, 1}, pool);
  EXPECT_EQ(a, a1);
  EXPECT_EQ(b, b1);
}

TEST(MtpDrafter, ModelWithoutTheBlockIsAClearError) {
  auto m = Model::load(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf");
  DrafterConfig cfg;
  try {
    drafter_make("mtp", *m, cfg);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--spec mtp: the model has no MTP block (nextn_predict_layers is absent or 0); use "
              "--spec ngram or none");
  }
}

}  // namespace drafter_mtp_test
}  // namespace invar::test
