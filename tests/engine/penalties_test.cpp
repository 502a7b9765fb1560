// Logit bias and the repetition / frequency / presence penalties (engine/penalties.h) against a
// numpy reference of vLLM's formulas (penalties_reference.py) on fixed logits: one case per
// penalty, llama-server's window, and all of them together; every penalised row must match bit
// for bit and every greedily decoded token must be the same. Each case really changes the
// decoding. Plus the properties the engine relies on: a pure function of the tokens whatever
// the scratch held before, and sampling at temperature > 0 reads the penalised row too.
#include "engine/penalties.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "command_run.h"
#include "engine/sampler.h"

namespace invar {
namespace penalties_test {

using json = nlohmann::json;

constexpr int64_t kVocab = 48;
constexpr int64_t kSteps = 24;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

struct Case {
  std::string name;
  SamplingParams p;
  std::vector<int32_t> prompt;
};

// Three rows of logits in [-2, 2] with a few exact zeros (the boundary of the repetition
// rule's two branches), close enough that penalties change the greedy choice.
std::vector<std::vector<float>> rows_make() {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<std::vector<float>> rows(3, std::vector<float>(kVocab));
  for (auto& r : rows) {
    for (float& x : r) x = u(rng);
    r[5] = 0.0f;
    r[17] = 0.0f;
  }
  return rows;
}

std::vector<Case> cases_make() {
  // A prompt holding tokens on both sides of zero and, first, one the window of 4 leaves out.
  const std::vector<int32_t> prompt = {11, 2, 5, 30, 17, 8, 2, 41, 23};
  auto with = [&](const char* name, auto set) {
    Case c{name, SamplingParams{}, prompt};
    set(c.p);
    return c;
  };
  return {
      with("repetition 1.3", [](SamplingParams& p) { p.repetition_penalty = 1.3f; }),
      with("repetition 0.7", [](SamplingParams& p) { p.repetition_penalty = 0.7f; }),
      with("repetition 1.6 over the last 4",
           [](SamplingParams& p) {
             p.repetition_penalty = 1.6f;
             p.repetition_last_n = 4;
           }),
      with("repetition 1.6 over no window",
           [](SamplingParams& p) {
             p.repetition_penalty = 1.6f;
             p.repetition_last_n = 0;
             p.presence_penalty = 0.25f;  // something must still change the decoding
           }),
      with("frequency 0.35", [](SamplingParams& p) { p.frequency_penalty = 0.35f; }),
      with("frequency -0.4", [](SamplingParams& p) { p.frequency_penalty = -0.4f; }),
      with("presence 1.5", [](SamplingParams& p) { p.presence_penalty = 1.5f; }),
      with("presence -1.1", [](SamplingParams& p) { p.presence_penalty = -1.1f; }),
      with("logit_bias",
           [](SamplingParams& p) {
             p.logit_bias = {{3, 100.0f}, {9, -100.0f}, {40, 2.5f}};
           }),
      with("logit_bias small",
           [](SamplingParams& p) {
             p.logit_bias = {{7, 0.75f}, {5, 1.0f}};
           }),
      with("everything",
           [](SamplingParams& p) {
             p.logit_bias = {{8, -1.5f}, {12, 0.9f}, {2, 0.3f}};
             p.repetition_penalty = 1.25f;
             p.frequency_penalty = 0.2f;
             p.presence_penalty = 0.6f;
           }),
      with("everything, windowed",
           [](SamplingParams& p) {
             p.logit_bias = {{30, 1.75f}};
             p.repetition_penalty = 1.4f;
             p.repetition_last_n = 6;
             p.frequency_penalty = -0.15f;
             p.presence_penalty = 0.45f;
           }),
  };
}

struct Decoded {
  std::vector<int32_t> tokens;
  std::vector<std::vector<uint32_t>> rows;  // penalised rows, as bit patterns
};

Decoded decode(const Case& c, const std::vector<std::vector<float>>& rows, PenaltyScratch& ps) {
  SamplerScratch ss;
  std::vector<int32_t> seq = c.prompt;
  Decoded d;
  for (int64_t k = 0; k < kSteps; ++k) {
    const float* raw = rows[static_cast<size_t>(k % 3)].data();
    const float* row =
        penalties_apply(raw, kVocab, c.p, seq, static_cast<int64_t>(c.prompt.size()), ps);
    std::vector<uint32_t> b(static_cast<size_t>(kVocab));
    for (int64_t i = 0; i < kVocab; ++i) b[static_cast<size_t>(i)] = bits(row[i]);
    d.rows.push_back(std::move(b));
    const int32_t t = sample_token(row, kVocab, c.p, static_cast<int64_t>(seq.size()), ss);
    seq.push_back(t);
    d.tokens.push_back(t);
  }
  return d;
}

json case_json(const Case& c, const std::vector<std::vector<float>>& rows) {
  json bias = json::array();
  for (const auto& [id, b] : c.p.logit_bias) bias.push_back({id, b});
  return {{"rows", rows},
          {"prompt", c.prompt},
          {"steps", kSteps},
          {"repetition_penalty", c.p.repetition_penalty},
          {"repetition_last_n", c.p.repetition_last_n},
          {"frequency_penalty", c.p.frequency_penalty},
          {"presence_penalty", c.p.presence_penalty},
          {"logit_bias", bias}};
}

TEST(Penalties, MatchTheNumpyReferenceOfVllmsFormulas) {
  const auto rows = rows_make();
  const auto cases = cases_make();
  json in = {{"cases", json::array()}};
  for (const Case& c : cases) in["cases"].push_back(case_json(c, rows));
  const std::string path = ::testing::TempDir() + "penalties_cases.json";
  std::ofstream(path) << in.dump();
  const std::string script = std::string(INVAR_SOURCE_DIR) + "/tests/engine/penalties_reference.py";
  const auto r = test::command_run(std::string(INVAR_PYTHON3) + " " + script + " " + path);
  std::remove(path.c_str());
  ASSERT_EQ(r.status, 0) << "the numpy reference did not run (python3-numpy is installed by "
                            "scripts/install-deps): "
                         << r.out;
  const json want = json::parse(r.out);
  ASSERT_EQ(want["cases"].size(), cases.size());

  Case plain{"none", SamplingParams{}, cases[0].prompt};
  PenaltyScratch ps;
  const Decoded unpenalised = decode(plain, rows, ps);
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    const Decoded got = decode(cases[i], rows, ps);
    const json& w = want["cases"][i];
    EXPECT_EQ(got.tokens, w["tokens"].get<std::vector<int32_t>>());
    for (size_t k = 0; k < got.rows.size(); ++k) {
      const auto wr = w["rows"][k].get<std::vector<uint32_t>>();
      for (size_t t = 0; t < wr.size(); ++t)
        ASSERT_EQ(got.rows[k][t], wr[t]) << "step " << k << ", token " << t;
    }
    // The condition happened: this case decodes differently from no penalty at all, or for a
    // negative penalty (it rewards the output, which greedy decoding already repeats) at least
    // changes the rows.
    EXPECT_NE(got.rows, unpenalised.rows) << "the penalty changed no logit";
    if (cases[i].p.frequency_penalty >= 0 && cases[i].p.presence_penalty >= 0) {
      EXPECT_NE(got.tokens, unpenalised.tokens) << "the penalty changed no token";
    }
  }
  // The window matters: over the last 4 tokens the penalty differs from over everything.
  Case whole = cases[2];
  whole.p.repetition_last_n = -1;
  EXPECT_NE(decode(whole, rows, ps).rows, decode(cases[2], rows, ps).rows);
}

TEST(Penalties, NoneActiveReturnsTheModelsRow) {
  const auto rows = rows_make();
  PenaltyScratch ps;
  const std::vector<int32_t> seq = {1, 2, 2, 3};
  EXPECT_EQ(penalties_apply(rows[0].data(), kVocab, SamplingParams{}, seq, 2, ps), rows[0].data());
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.repetition_last_n = 0;  // a window of nothing: active, but it changes no logit
  const float* out = penalties_apply(rows[0].data(), kVocab, p, seq, 2, ps);
  EXPECT_EQ(0, std::memcmp(out, rows[0].data(), sizeof(float) * kVocab));
}

// The scratch carries nothing from one call to the next: a row depends on its own tokens only,
// whatever was penalised before (in the engine: other requests, rejected drafts).
TEST(Penalties, APureFunctionOfTheTokens) {
  const auto rows = rows_make();
  const auto cases = cases_make();
  const Case& c = cases[10];  // everything
  PenaltyScratch fresh;
  const Decoded alone = decode(c, rows, fresh);
  PenaltyScratch shared;
  for (const Case& other : cases) (void)decode(other, rows, shared);
  const Decoded after = decode(c, rows, shared);
  EXPECT_EQ(alone.tokens, after.tokens);
  EXPECT_EQ(alone.rows, after.rows);
  for (int32_t n : shared.counts) ASSERT_EQ(n, 0);
  for (uint8_t s : shared.seen) ASSERT_EQ(s, 0);
}

TEST(Penalties, SampledTokensReadThePenalisedRow) {
  const auto rows = rows_make();
  SamplerScratch ss;
  PenaltyScratch ps;
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 5;
  p.logit_bias = {{13, 100.0f}};
  const std::vector<int32_t> seq = {1, 2, 3};
  for (int64_t pos = 0; pos < 200; ++pos) {
    const float* row = penalties_apply(rows[pos % 3].data(), kVocab, p, seq, 3, ps);
    ASSERT_EQ(sample_token(row, kVocab, p, pos, ss), 13) << pos;
  }
  p.logit_bias = {{13, -100.0f}};
  p.presence_penalty = 2.0f;
  p.frequency_penalty = 2.0f;
  std::vector<int> seen(kVocab, 0);
  std::vector<int32_t> gen = {1, 2, 3, 20, 20, 21};
  for (int64_t pos = 0; pos < 2000; ++pos) {
    const float* row = penalties_apply(rows[pos % 3].data(), kVocab, p, gen, 3, ps);
    ++seen[static_cast<size_t>(sample_token(row, kVocab, p, pos, ss))];
  }
  EXPECT_EQ(seen[13], 0) << "a -100 bias must never be drawn at temperature 1";
  EXPECT_LT(seen[20], seen[1]) << "output token 20 is penalised by 2 × 2 + 2, prompt token 1 not";
}

}  // namespace penalties_test
}  // namespace invar
