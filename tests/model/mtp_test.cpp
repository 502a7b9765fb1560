// The MTP draft head (Model::mtp_forward) on a generated model of each architecture:
//  * its logits match a float64 reference written from llama.cpp's graph_mtp
//    (tests/model/mtp_reference.py) — top-20 logprobs within 1e-4 — on rows fed by the trunk's
//    hidden rows (SeqChunk::hidden) and on chained drafts (hidden_out of the previous row);
//  * its bits do not depend on how the rows are split into calls, nor on the other sequences of
//    the batch, nor on the thread count (rules N1, N2, N4);
//  * the trunk's hidden rows do not depend on chunking, and asking for them changes no logit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "command_run.h"
#include "forge/make_model.h"
#include "model/model.h"
#include "model_harness.h"

namespace invar::test {
namespace {

std::string vocab_source() {
  return std::string(INVAR_TEST_DATA_DIR) + "/models/qwen35-tiny.gguf";
}

std::string out_dir() {
  const std::string dir = std::string(INVAR_BINARY_DIR) + "/tests/model";
  std::filesystem::create_directories(dir);
  return dir;
}

// The MTP KV of one sequence, NaN-filled so a read of a row nobody wrote shows in the logits.
struct MtpKv {
  MtpKv(const Model& m, int64_t capacity, int64_t bs) : block_size(bs) {
    const int64_t n_blocks = (capacity + bs - 1) / bs, bf = m.mtp_kv_block_floats(bs);
    kv.assign(size_t(n_blocks * bf), std::nanf(""));
    for (int64_t b = 0; b < n_blocks; ++b) blocks.push_back(kv.data() + b * bf);
  }
  std::vector<float> kv;
  std::vector<float*> blocks;
  int64_t block_size;
};

// Rows (hidden_in, token) at positions 0..n−1 of one sequence and what the MTP head returned.
struct MtpRun {
  std::vector<int32_t> tokens;
  std::vector<float> hidden_in;   // [n][E]
  std::vector<float> logits;      // [n][V]
  std::vector<float> hidden_out;  // [n][E]
};

// Runs rows [r0, r1) of `run` (hidden_in and tokens filled) through mtp_forward in one call.
void mtp_rows(const Model& m, MtpKv& kv, MtpRun& run, int64_t r0, int64_t r1, ThreadPool& pool) {
  const int64_t E = m.hparams().n_embd, V = m.hparams().n_vocab;
  MtpChunk c;
  c.tokens = run.tokens.data() + r0;
  c.hidden_in = run.hidden_in.data() + r0 * E;
  c.n_tokens = r1 - r0;
  c.pos0 = r0;
  c.kv_blocks = kv.blocks.data();
  c.block_size = kv.block_size;
  c.all_logits = true;
  c.logits = run.logits.data() + r0 * V;
  c.hidden_out = run.hidden_out.data() + r0 * E;
  m.mtp_forward({&c, 1}, *m.scratch_make(c.n_tokens, 1), pool);
}

// The prompt through the trunk (hidden rows kept), then the MTP head over every prompt position
// (catch-up, in two calls) and `k` chained drafts, each one row, as a drafter runs them.
MtpRun run_drafts(const Model& m, const std::vector<int32_t>& prompt, int k, ThreadPool& pool) {
  const int64_t E = m.hparams().n_embd, V = m.hparams().n_vocab;
  const int64_t n = int64_t(prompt.size()), total = n + k;
  SeqState st(m, n);
  std::vector<float> trunk_logits(size_t(n * V)), hidden(size_t(n * E));
  SeqChunk c;
  c.tokens = prompt.data();
  c.n_tokens = n;
  c.state = st.state.data();
  c.kv_blocks = st.blocks.data();
  c.block_size = st.block_size;
  c.all_logits = true;
  c.logits = trunk_logits.data();
  c.hidden = hidden.data();
  m.forward({&c, 1}, *m.scratch_make(n, 1), pool);

  MtpRun run;
  run.tokens = prompt;
  run.tokens.resize(size_t(total));
  run.hidden_in.assign(size_t(total * E), 0.0f);  // row 0: no previous hidden row
  run.logits.assign(size_t(total * V), 0.0f);
  run.hidden_out.assign(size_t(total * E), 0.0f);
  std::copy(hidden.begin(), hidden.end() - E, run.hidden_in.begin() + E);
  MtpKv kv(m, total, 8);
  mtp_rows(m, kv, run, 0, n / 2, pool);
  mtp_rows(m, kv, run, n / 2, n, pool);
  for (int64_t r = n; r < total; ++r) {
    run.tokens[size_t(r)] = argmax_of(run.logits.data() + (r - 1) * V, V);
    std::copy_n(run.hidden_out.begin() + (r - 1) * E, E, run.hidden_in.begin() + r * E);
    mtp_rows(m, kv, run, r, r + 1, pool);
  }
  return run;
}

std::string model_for(Arch arch, bool own_head) {
  MakeModelConfig c = tiny_model_config(arch, MtpKind::random);
  c.mtp_own_head = own_head;
  c.fused_gate_up = arch == Arch::qwen35moe;
  const std::string path =
      out_dir() + "/mtp-" + std::string(arch_name(arch)) + (own_head ? "-own-head" : "") + ".gguf";
  write_generated(c, path, vocab_source());
  return path;
}

class MtpHead : public ::testing::TestWithParam<std::pair<Arch, bool>> {};

TEST_P(MtpHead, MatchesFloat64ReferenceAndIsInvariant) {
  const auto [arch, own_head] = GetParam();
  const std::string path = model_for(arch, own_head);
  auto m = Model::load(path);
  ASSERT_TRUE(m->has_mtp());
  EXPECT_EQ(m->hparams().n_layer, 4);
  EXPECT_EQ(m->hparams().mtp_own_embd, own_head);
  EXPECT_EQ(m->hparams().mtp_own_head, own_head);
  const int64_t E = m->hparams().n_embd, V = m->hparams().n_vocab;
  const std::vector<int32_t> prompt = {9, 41, 7, 300, 12, 5, 77, 41, 250, 3, 18};
  const int k = 4;
  ThreadPool pool1(1), pool2(2);
  const MtpRun run = run_drafts(*m, prompt, k, pool2);
  const int64_t total = int64_t(run.tokens.size());

  // Threads and call boundaries change no bit: every row in one call, on one thread.
  {
    MtpRun one = run;
    MtpKv kv(*m, total, 8);
    mtp_rows(*m, kv, one, 0, total, pool1);
    EXPECT_EQ(bits_diff(run.logits, one.logits, V), "") << "one call, 1 thread vs rows as drafted";
    EXPECT_EQ(bits_diff(run.hidden_out, one.hidden_out, E), "");
  }
  // Batched with another sequence (the same rows shifted by one token, its own KV), and with a
  // different KV block size: the first sequence's bits are unchanged.
  {
    MtpRun a = run, b = run;
    b.tokens.insert(b.tokens.begin(), 33);
    b.hidden_in.insert(b.hidden_in.begin(), size_t(E), 0.0f);
    b.logits.resize(size_t((total + 1) * V));
    b.hidden_out.resize(size_t((total + 1) * E));
    MtpKv kva(*m, total, 16), kvb(*m, total + 1, 8);
    MtpChunk ca, cb;
    for (auto [c, r, kv] : {std::tuple{&ca, &a, &kva}, std::tuple{&cb, &b, &kvb}}) {
      c->tokens = r->tokens.data();
      c->hidden_in = r->hidden_in.data();
      c->n_tokens = int64_t(r->tokens.size());
      c->kv_blocks = kv->blocks.data();
      c->block_size = kv->block_size;
      c->all_logits = true;
      c->logits = r->logits.data();
      c->hidden_out = r->hidden_out.data();
    }
    const MtpChunk batch[2] = {cb, ca};
    m->mtp_forward(batch, *m->scratch_make(2 * total + 1, 2), pool2);
    EXPECT_EQ(bits_diff(run.logits, a.logits, V), "") << "batched with another sequence";
  }

  // The float64 reference, fed the same hidden rows.
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t r = 0; r < total; ++r)
    rows.push_back({{"token", run.tokens[size_t(r)]},
                    {"pos", r},
                    {"hidden", std::vector<float>(run.hidden_in.begin() + r * E,
                                                  run.hidden_in.begin() + (r + 1) * E)}});
  const std::string rows_path = path + ".rows.json", ref_path = path + ".ref.json";
  std::ofstream(rows_path) << nlohmann::json{{"rows", rows}}.dump();
  const auto res = command_run(std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                               "/tests/model/mtp_reference.py " + path + " " + rows_path + " " +
                               ref_path + " 2>&1");
  ASSERT_EQ(res.status, 0) << res.out;
  const nlohmann::json ref = nlohmann::json::parse(std::ifstream(ref_path));
  std::remove(rows_path.c_str());
  std::remove(ref_path.c_str());
  ASSERT_EQ(int64_t(ref["top"].size()), total);
  double worst = 0;
  for (int64_t r = 0; r < total; ++r) {
    const float* l = run.logits.data() + r * V;
    double mx = l[0], sum = 0;
    for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(l[i]));
    for (int64_t i = 0; i < V; ++i) sum += std::exp(double(l[i]) - mx);
    const double lse = mx + std::log(sum);
    for (const auto& e : ref["top"][size_t(r)]) {
      const int64_t id = e[0].get<int64_t>();
      const double d = std::abs(double(l[id]) - lse - e[1].get<double>());
      worst = std::max(worst, d);
      EXPECT_LE(d, 1e-4) << "row " << r << " (position " << r << ", "
                         << (r < int64_t(prompt.size()) ? "prompt" : "chained draft") << ") token "
                         << id << ": invar " << double(l[id]) - lse << " reference "
                         << e[1].get<double>();
    }
    const auto& ho = ref["hidden_out"][size_t(r)];
    for (int64_t j = 0; j < E; ++j)
      ASSERT_NEAR(run.hidden_out[size_t(r * E + j)], ho[size_t(j)].get<double>(), 1e-4)
          << "hidden_out row " << r << " column " << j;
  }
  std::printf("%s%s: %lld MTP rows (%d chained drafts), worst top-20 |Δ logprob| %.3g\n",
              std::string(arch_name(arch)).c_str(), own_head ? " (own head)" : "",
              static_cast<long long>(total), k, worst);
}

INSTANTIATE_TEST_SUITE_P(
    Archs, MtpHead,
    ::testing::Values(std::pair{Arch::qwen3next, false}, std::pair{Arch::qwen35, false},
                      std::pair{Arch::qwen35moe, false}, std::pair{Arch::qwen35, true}),
    [](const auto& info) {
      return std::string(arch_name(info.param.first)) + (info.param.second ? "_own_head" : "");
    });

// Asking the trunk for its hidden rows changes no logit, and the rows do not depend on chunking.
TEST(MtpTrunkHidden, RowsAreChunkInvariantAndLogitsUnchanged) {
  const std::string path = model_for(Arch::qwen3next, false);
  auto m = Model::load(path);
  const int64_t E = m->hparams().n_embd, V = m->hparams().n_vocab;
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17};
  const int64_t n = int64_t(prompt.size());
  ThreadPool pool(2);
  SeqState plain(*m, n);
  const std::vector<float> want = run_chunked(*m, plain, prompt, 0, pool);
  std::vector<float> hidden_whole, logits_whole;
  for (int64_t chunk : {n, int64_t(4), int64_t(1)}) {
    SeqState st(*m, n);
    std::vector<float> logits(size_t(n * V)), hidden(size_t(n * E));
    for (int64_t p = 0; p < n; p += chunk) {
      SeqChunk c;
      c.tokens = prompt.data() + p;
      c.n_tokens = std::min(chunk, n - p);
      c.pos0 = p;
      c.state = st.state.data();
      c.kv_blocks = st.blocks.data();
      c.block_size = st.block_size;
      c.all_logits = true;
      c.logits = logits.data() + p * V;
      c.hidden = hidden.data() + p * E;
      m->forward({&c, 1}, *m->scratch_make(c.n_tokens, 1), pool);
    }
    EXPECT_EQ(bits_diff(want, logits, V), "") << "chunk " << chunk;
    if (hidden_whole.empty()) hidden_whole = hidden;
    EXPECT_EQ(bits_diff(hidden_whole, hidden, E), "") << "chunk " << chunk;
  }
  // The hidden rows are what the LM head reads: not all zero, and finite.
  double norm = 0;
  for (float v : hidden_whole) norm += double(v) * v;
  EXPECT_TRUE(std::isfinite(norm) && norm > 0);
}

// A model without an MTP block, and one that declares a block it does not carry, load and say so.
TEST(MtpAbsent, ModelsWithoutTheBlockLoad) {
  auto plain = Model::load(std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf");
  EXPECT_FALSE(plain->has_mtp());
  EXPECT_EQ(plain->hparams().mtp_unusable, "");
}

}  // namespace
}  // namespace invar::test
