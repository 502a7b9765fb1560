// End-to-end goldens (STYLE 6): the forward pass against the float64 oracle in
// tests/data/reference/<model>.json. Per sequence: every stored logit within 1e-4, the greedy
// continuation identical, and the logprobs of the oracle's top-20 ids within 1e-4 at every
// greedy step. Run once per reference model (the environment's INVAR_TEST_MODEL).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/select.h"
#include "model_harness.h"
#include "test_data.h"

namespace invar::test {
namespace {

constexpr double kTol = 1e-4;

const nlohmann::json& oracle() {
  static const nlohmann::json j = load_reference(test_model_name());
  return j;
}

const Model& model() {
  static std::unique_ptr<Model> m = Model::load(test_model_path(test_model_name()));
  return *m;
}

// Collects mismatches; the message lists the first few.
struct Mismatches {
  int64_t count = 0;
  double worst = 0;
  std::string worst_at;
  std::string first;
  void add(const std::string& where, double got, double want) {
    double d = std::fabs(got - want);
    if (!(d <= kTol)) {
      if (count++ < 8) {
        char buf[200];
        std::snprintf(buf, sizeof buf, "\n  NOT OK %s: got %.9g want %.9g (|d| %.3g)",
                      where.c_str(), got, want, d);
        first += buf;
      }
    }
    if (d > worst || std::isnan(d)) {
      worst = d;
      worst_at = where;
    }
  }
};

void check_sequence(const std::string& name) {
  const nlohmann::json* seq = nullptr;
  for (const auto& s : oracle()["sequences"])
    if (s["name"] == name) seq = &s;
  ASSERT_NE(seq, nullptr) << "no sequence " << name;
  const Model& m = model();
  const int64_t V = m.hparams().n_vocab;
  ASSERT_EQ(V, oracle()["n_vocab"].get<int64_t>());

  std::vector<int32_t> tokens = (*seq)["tokens"].get<std::vector<int32_t>>();
  const auto greedy = (*seq)["greedy"]["tokens"].get<std::vector<int32_t>>();
  const int64_t n = int64_t(tokens.size());
  ThreadPool pool(1);
  SeqState st(m, n + int64_t(greedy.size()));
  std::vector<float> logits = run_chunked(m, st, tokens, 0, pool);

  // Prompt logits at the stored positions.
  Mismatches lm;
  const auto& positions = (*seq)["logits"]["positions"];
  const auto& values = (*seq)["logits"]["values"];
  for (size_t i = 0; i < positions.size(); ++i) {
    const int64_t p = positions[i].get<int64_t>();
    const auto want = values[i].get<std::vector<double>>();
    ASSERT_EQ(int64_t(want.size()), V);
    for (int64_t v = 0; v < V; ++v)
      lm.add("pos " + std::to_string(p) + " id " + std::to_string(v), logits[size_t(p * V + v)],
             want[size_t(v)]);
  }
  EXPECT_EQ(lm.count, 0) << name << ": " << lm.count << " prompt logits off by more than " << kTol
                         << " (worst " << lm.worst << ")" << lm.first;

  // Greedy steps: argmax equal to the oracle's token, top-20 logprobs within tolerance. The
  // oracle's token is fed back, so one wrong step does not hide the later ones.
  Mismatches gm;
  std::string wrong_tokens;
  std::vector<float> cur(logits.end() - V, logits.end()), lp(static_cast<size_t>(V));
  const auto& tops = (*seq)["greedy"]["top"];
  for (size_t i = 0; i < greedy.size(); ++i) {
    int32_t best;
    float best_v;
    top_k(cur.data(), V, 1, &best, &best_v);
    if (best != greedy[i])
      wrong_tokens += "\n  NOT OK step " + std::to_string(i) + ": argmax " + std::to_string(best) +
                      ", oracle " + std::to_string(greedy[i]);
    log_softmax(cur.data(), V, lp.data());
    for (const auto& e : tops[i]) {
      const int64_t id = e[0].get<int64_t>();
      gm.add("step " + std::to_string(i) + " id " + std::to_string(id), lp[size_t(id)],
             e[1].get<double>());
    }
    if (i + 1 < greedy.size()) cur = run_chunked(m, st, {greedy[i]}, 0, pool, n + int64_t(i));
  }
  EXPECT_TRUE(wrong_tokens.empty()) << name << ": greedy continuation differs" << wrong_tokens;
  EXPECT_EQ(gm.count, 0) << name << ": " << gm.count << " greedy-step logprobs off by more than "
                         << kTol << " (worst " << gm.worst << ")" << gm.first;
  std::printf("%s/%s: worst |d| prompt logits %.3g (%s), greedy logprobs %.3g (%s)\n",
              test_model_name().c_str(), name.c_str(), lm.worst, lm.worst_at.c_str(), gm.worst,
              gm.worst_at.c_str());
}

TEST(Reference, Len1) {
  check_sequence("len1");
}
TEST(Reference, Len17) {
  check_sequence("len17");
}
TEST(Reference, Len200Chat) {
  check_sequence("len200_chat");
}
TEST(Reference, Len700) {
  check_sequence("len700");
}

}  // namespace
}  // namespace invar::test
