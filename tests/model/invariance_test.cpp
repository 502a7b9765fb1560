// The contract at the model level (DESIGN §1): the logits of a sequence have the same raw bits
// whether it is computed in one call, token by token, in chunks of 7 or 64, with 1 or 2
// threads, with every SIMD level, alone or batched with other sequences, and whether
// recurrent-state checkpoints are taken mid-chunk; on the reference models and on generated
// models of every quantised weight type (tests/model/CMakeLists.txt). Each test also checks that
// the varied condition really happened (the SIMD level is active, the pool has 2 threads, the batch
// has several sequences, the checkpoint fell inside a chunk). With INVAR_TEST_ACTIVATIONS=q8 every
// test runs under the q8 activation profile (core/activations.h), whose integer products keep the
// same invariances with other bits.
#include <gtest/gtest.h>

#include <cmath>

#include "core/activations.h"
#include "core/simd.h"
#include "forge/quant_preset.h"
#include "kernels/matmul.h"
#include "kernels/select.h"
#include "model_harness.h"
#include "simd_levels.h"

namespace invar::test {
namespace {

// The profile INVAR_TEST_ACTIVATIONS names (default f32).
ActivationProfile test_profile() {
  const char* env = std::getenv("INVAR_TEST_ACTIVATIONS");
  const auto p = activations_parse(env ? env : "f32");
  if (!p) throw std::runtime_error(std::string("INVAR_TEST_ACTIVATIONS=") + env);
  return *p;
}

const Model& model() {
  static std::unique_ptr<Model> m = [] {
    activations_set(test_profile());
    return Model::load(test_model_path(test_model_name()));
  }();
  return *m;
}

// A 150-token sequence (crosses 9 blocks of 16) that mixes vocabulary ids.
std::vector<int32_t> sequence(int64_t n, uint32_t seed) {
  const int64_t V = model().hparams().n_vocab;
  std::vector<int32_t> t(static_cast<size_t>(n));
  uint32_t x = seed;
  for (auto& id : t) {
    x = x * 1664525u + 1013904223u;
    id = int32_t((x >> 8) % uint32_t(V));
  }
  return t;
}

struct Baseline {
  std::vector<int32_t> tokens;
  std::vector<float> logits;  // [T][V] one call, 1 thread, best SIMD level
  std::vector<float> state;   // after the last token
};

const Baseline& baseline() {
  static const Baseline b = [] {
    Baseline r;
    r.tokens = sequence(150, 7);
    ThreadPool pool(1);
    SeqState st(model(), 150);
    r.logits = run_chunked(model(), st, r.tokens, 0, pool);
    r.state = st.state;
    return r;
  }();
  return b;
}

int64_t V() {
  return model().hparams().n_vocab;
}

void expect_same_as_baseline(int64_t chunk, ThreadPool& pool, const std::string& what) {
  const Baseline& b = baseline();
  SeqState st(model(), int64_t(b.tokens.size()));
  std::vector<float> lg = run_chunked(model(), st, b.tokens, chunk, pool);
  EXPECT_EQ(bits_diff(lg, b.logits, V()), "") << what << ": logits";
  EXPECT_EQ(bits_diff(st.state, b.state), "") << what << ": final recurrent state";
}

TEST(Invariance, BaselineIsSane) {
  const Baseline& b = baseline();
  for (float x : b.logits) ASSERT_TRUE(std::isfinite(x));
  // Different positions give different logits (the test would be vacuous otherwise).
  EXPECT_NE(bits_diff({b.logits.begin(), b.logits.begin() + V()},
                      {b.logits.begin() + V(), b.logits.begin() + 2 * V()}),
            "");
  // A sequence with one different token earlier gives different later logits: the history
  // (KV and recurrent state) really feeds the result.
  std::vector<int32_t> t2 = b.tokens;
  t2[10] = (t2[10] + 1) % int32_t(V());
  ThreadPool pool(1);
  SeqState st(model(), 150);
  std::vector<float> lg = run_chunked(model(), st, t2, 0, pool);
  EXPECT_NE(bits_diff({lg.end() - V(), lg.end()}, {b.logits.end() - V(), b.logits.end()}), "");
}

// Under INVAR_TEST_ACTIVATIONS=q8 the profile is active and changes the logits (the model has
// weights of the q8 types), so the invariances below are the q8 profile's.
TEST(Invariance, ActivationProfileIsActive) {
  const Baseline& b = baseline();
  ASSERT_EQ(activations_active(), test_profile());
  if (test_profile() == ActivationProfile::f32) GTEST_SKIP() << "the f32 profile";
  activations_set(ActivationProfile::f32);
  ThreadPool pool(1);
  SeqState st(model(), 20);
  const std::vector<int32_t> head(b.tokens.begin(), b.tokens.begin() + 20);
  const std::vector<float> lg = run_chunked(model(), st, head, 0, pool);
  activations_set(test_profile());
  EXPECT_NE(bits_diff(lg, {b.logits.begin(), b.logits.begin() + 20 * V()}, V()), "");
}

// A generated model ("generated:ARCH:TYPE") has that architecture and holds tensors of TYPE
// (a preset's main type): the tests here then cover that weight type.
TEST(Invariance, ModelIsWhatItsNameSays) {
  const std::string name = test_model_name();
  if (name.rfind("generated:", 0) != 0) GTEST_SKIP() << name << " is not generated";
  const size_t colon = name.find(':', 10);
  EXPECT_EQ(std::string(arch_name(model().hparams().arch)), name.substr(10, colon - 10));
  const auto scheme = quant_scheme_parse(name.substr(colon + 1));
  ASSERT_TRUE(scheme.has_value()) << name;
  int n_of_type = 0;
  for (const auto& t : model().gguf().tensors()) n_of_type += t.type == scheme->base;
  std::printf("%s: %d tensors of type %s\n", name.c_str(), n_of_type,
              std::string(dtype_name(scheme->base)).c_str());
  EXPECT_GT(n_of_type, 0);
}

TEST(Invariance, TokenByToken) {
  ThreadPool pool(1);
  expect_same_as_baseline(1, pool, "chunk 1");
}

TEST(Invariance, Chunks7And64) {
  ThreadPool pool(1);
  expect_same_as_baseline(7, pool, "chunk 7");
  expect_same_as_baseline(64, pool, "chunk 64");
}

TEST(Invariance, TwoThreads) {
  ThreadPool pool(2);
  ASSERT_EQ(pool.size(), 2);
  expect_same_as_baseline(0, pool, "2 threads, one call");
  expect_same_as_baseline(7, pool, "2 threads, chunk 7");
}

// Decode products (M ≤ 4 rows) cut into pieces that the threads balance while they run
// (ThreadPool::parallel_balanced): a test model's matrices are smaller than one piece of the
// default 64 KiB minimum, so the minimum is lowered to one byte (a piece is then one group of 16
// outputs). Checked to have happened: pieces ran outside the share they were first given, taken
// over by a thread that had finished its own (repeated, at most 4 times, until some were). Which
// thread runs them is the machine's doing: a worker woken for a product of a few microseconds
// often finds the caller done, so the worker's count is printed, not required.
TEST(Invariance, TwoThreadsShareDecodePieces) {
  ThreadPool pool(2);
  ASSERT_EQ(pool.size(), 2);
  matmul_piece_bytes_min_set(1);
  MatmulPieceCounts n;
  for (int run = 0; run < 4 && n.moved == 0; ++run) {
    expect_same_as_baseline(1, pool, "2 threads balancing decode pieces, token by token");
    n = matmul_piece_counts();
  }
  matmul_piece_bytes_min_set(0);
  std::printf("decode pieces: %lld on the calling thread, %lld on the worker, %lld taken over\n",
              static_cast<long long>(n.by_caller), static_cast<long long>(n.by_workers),
              static_cast<long long>(n.moved));
  EXPECT_GT(n.moved, 0) << "no piece was taken over: the balancing path never ran";
}

TEST(Invariance, SimdLevels) {
  ThreadPool pool(1);
  for (SimdLevel lvl : simd_levels_to_test()) {
    const SimdLevelRun run(lvl);
    expect_same_as_baseline(0, pool, "simd " + std::string(simd_name(lvl)));
    expect_same_as_baseline(64, pool, "simd " + std::string(simd_name(lvl)) + ", chunk 64");
    run.expect_kernels_ran();
  }
}

// Three sequences share every forward call, each in its own phase and chunk size; the batch's
// last-only logits of one of them use the gathered output product.
TEST(Invariance, BatchedWithOthers) {
  const Baseline& b = baseline();
  const Model& m = model();
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> toks = {b.tokens, sequence(60, 11), sequence(33, 5)};
  std::vector<int64_t> chunks = {13, 5, 1};
  std::vector<std::vector<float>> alone;
  for (size_t i = 0; i < toks.size(); ++i) {
    ThreadPool p1(1);
    SeqState st(m, int64_t(toks[i].size()));
    alone.push_back(run_chunked(m, st, toks[i], 0, p1));
  }
  std::vector<SeqState> states;
  for (auto& t : toks) states.emplace_back(m, int64_t(t.size()));
  std::vector<std::vector<float>> got(toks.size());
  for (size_t i = 0; i < toks.size(); ++i) got[i].assign(toks[i].size() * size_t(V()), 0.0f);
  std::vector<int64_t> done(toks.size(), 0);
  int64_t max_batch = 0;
  for (;;) {
    std::vector<SeqChunk> batch;
    for (size_t i = 0; i < toks.size(); ++i) {
      const int64_t n = int64_t(toks[i].size());
      if (done[i] >= n) continue;
      SeqChunk c;
      c.tokens = toks[i].data() + done[i];
      c.n_tokens = std::min(chunks[i], n - done[i]);
      c.pos0 = done[i];
      c.state = states[i].state.data();
      c.kv_blocks = states[i].blocks.data();
      c.block_size = states[i].block_size;
      // Sequence 2 asks for its last logits only (as decode does).
      c.all_logits = i != 2;
      c.logits = got[i].data() + (c.all_logits ? c.pos0 : c.pos0 + c.n_tokens - 1) * V();
      done[i] += c.n_tokens;
      batch.push_back(c);
    }
    if (batch.empty()) break;
    max_batch = std::max<int64_t>(max_batch, int64_t(batch.size()));
    m.forward(batch, *m.scratch_make(0, 0), pool);
  }
  ASSERT_EQ(max_batch, 3);
  EXPECT_EQ(bits_diff(got[0], alone[0], V()), "") << "sequence 0 batched";
  EXPECT_EQ(bits_diff(got[1], alone[1], V()), "") << "sequence 1 batched";
  // Sequence 2 ran token by token with last-only logits: every row was written.
  EXPECT_EQ(bits_diff(got[2], alone[2], V()), "") << "sequence 2 batched, last-only logits";
}

// Rule N5: checkpoints requested mid-chunk equal the state after a chunk ending exactly there,
// and taking them does not change the logits.
TEST(Invariance, CheckpointsMidChunk) {
  const Baseline& b = baseline();
  const Model& m = model();
  ThreadPool pool(1);
  const int64_t n = int64_t(b.tokens.size());
  const int64_t S = m.state_floats();
  ASSERT_GT(S, 0);
  const std::vector<int64_t> cps = {16, 48, 32, 64, 150, 150};  // unsorted, repeated, at the end
  std::vector<std::vector<float>> dst(cps.size(),
                                      std::vector<float>(static_cast<size_t>(S), std::nanf("")));
  std::vector<float*> dst_ptr;
  for (auto& d : dst) dst_ptr.push_back(d.data());

  // Two chunks [0, 40) and [40, 150): checkpoints 16, 32 fall inside the first, 48, 64 inside
  // the second, 150 at its end.
  SeqState st(m, n);
  std::vector<float> lg(static_cast<size_t>(n * V()));
  int64_t n_mid = 0;
  for (auto [a, e] : {std::pair<int64_t, int64_t>{0, 40}, {40, n}}) {
    std::vector<int64_t> pos;
    std::vector<float*> ptr;
    for (size_t i = 0; i < cps.size(); ++i)
      if (cps[i] > a && cps[i] <= e) {
        pos.push_back(cps[i]);
        ptr.push_back(dst_ptr[i]);
        n_mid += cps[i] < e;
      }
    SeqChunk c;
    c.tokens = b.tokens.data() + a;
    c.n_tokens = e - a;
    c.pos0 = a;
    c.state = st.state.data();
    c.kv_blocks = st.blocks.data();
    c.block_size = st.block_size;
    c.checkpoint_pos = pos.data();
    c.checkpoint_dst = ptr.data();
    c.n_checkpoints = int64_t(pos.size());
    c.all_logits = true;
    c.logits = lg.data() + a * V();
    m.forward({&c, 1}, *m.scratch_make(c.n_tokens, 1), pool);
  }
  ASSERT_EQ(n_mid, 4) << "checkpoints strictly inside a chunk";
  EXPECT_EQ(bits_diff(lg, b.logits, V()), "") << "logits with checkpoints";
  for (size_t i = 0; i < cps.size(); ++i) {
    SeqState ref(m, cps[i]);
    std::vector<int32_t> prefix(b.tokens.begin(), b.tokens.begin() + cps[i]);
    run_chunked(m, ref, prefix, 0, pool);
    EXPECT_EQ(bits_diff(dst[i], ref.state), "") << "checkpoint at " << cps[i];
  }
  // Mid-chunk checkpoints really differ from each other (the state moved between them).
  EXPECT_NE(bits_diff(dst[0], dst[2]), "");
}

// Resuming from a checkpoint + the KV of the prefix gives the same logits as never stopping
// (what the prefix cache does on a hit).
TEST(Invariance, ResumeFromCheckpoint) {
  const Baseline& b = baseline();
  const Model& m = model();
  ThreadPool pool(1);
  const int64_t n = int64_t(b.tokens.size()), cut = 48;
  SeqState st(m, n);
  std::vector<float> ck(static_cast<size_t>(m.state_floats()));
  float* ck_ptr = ck.data();
  SeqChunk c;
  c.tokens = b.tokens.data();
  c.n_tokens = 70;
  c.state = st.state.data();
  c.kv_blocks = st.blocks.data();
  c.block_size = st.block_size;
  c.checkpoint_pos = &cut;
  c.checkpoint_dst = &ck_ptr;
  c.n_checkpoints = 1;
  std::vector<float> last(static_cast<size_t>(V()));
  c.logits = last.data();
  m.forward({&c, 1}, *m.scratch_make(c.n_tokens, 1), pool);
  // Restart at 48 from the checkpoint; positions 48..69 of the KV are recomputed.
  st.state = ck;
  std::vector<int32_t> rest(b.tokens.begin() + cut, b.tokens.end());
  std::vector<float> lg = run_chunked(m, st, rest, 9, pool, cut);
  std::vector<float> want(b.logits.begin() + cut * V(), b.logits.end());
  EXPECT_EQ(bits_diff(lg, want, V()), "") << "resumed at " << cut;
}

// Images (engine/seq_images.h): the input-row and IMROPE path with no image keeps the text bits;
// a sequence with two images (a 3 × 4 and a 2 × 2 grid of random rows) has the same bits in one
// call, token by token, in chunks that split the image runs, on 2 threads and every SIMD level.
TEST(Invariance, TextThroughTheImagePathKeepsItsBits) {
  const Baseline& b = baseline();
  ThreadPool pool(1);
  const SeqImages none;
  SeqState st(model(), int64_t(b.tokens.size()));
  const std::string d =
      bits_diff(run_chunked(model(), st, b.tokens, 7, pool, 0, &none), b.logits, V());
  EXPECT_TRUE(d.empty()) << d;
}

const SeqImages& two_images() {
  static const SeqImages im = [] {
    SeqImages r;
    const int64_t E = model().hparams().n_embd;
    uint32_t x = 99;
    for (auto [start, ny, nx] : {std::array<int64_t, 3>{20, 3, 4}, {90, 2, 2}}) {
      SeqImage one;
      one.start = start;
      one.ny = ny;
      one.nx = nx;
      one.rows.resize(size_t(ny * nx * E));
      for (float& v : one.rows) {
        x = x * 1664525u + 1013904223u;
        v = float(int32_t(x >> 8) % 2001 - 1000) / 1000.0f;
      }
      r.images.push_back(std::move(one));
    }
    return r;
  }();
  return im;
}

std::vector<float> image_run(int64_t chunk, ThreadPool& pool) {
  const Baseline& b = baseline();
  SeqState st(model(), int64_t(b.tokens.size()));
  return run_chunked(model(), st, b.tokens, chunk, pool, 0, &two_images());
}

// On the reference models only: an image run's rows, positions and chunk splits do not depend on
// the weight type, whose kernels in every chunking, thread count and SIMD level the tests above
// check on each generated model (the image runs took 2.5 of a generated model's 7.3 s under ASan).
TEST(Invariance, ImagesChunksThreadsSimd) {
  if (!model().hparams().rope_imrope) GTEST_SKIP() << "no IMROPE: not a vision-language model";
  if (test_model_name().rfind("generated:", 0) == 0)
    GTEST_SKIP() << "a generated weight type: the image path is checked on the reference models";
  ThreadPool p1(1), p2(2);
  ASSERT_EQ(p2.size(), 2);
  const std::vector<float> one = image_run(0, p1);
  EXPECT_FALSE(bits_diff(one, baseline().logits, V()).empty()) << "the images changed nothing";
  // The positions the images give: text after the 3 × 4 image continues at 20 + 4.
  EXPECT_EQ(two_images().rope_pos(25), (RopePos{20, 21, 21}));
  EXPECT_EQ(two_images().rope_pos(32), (RopePos{24, 24, 24}));
  EXPECT_EQ(two_images().rope_pos(93), (RopePos{82, 83, 83}));
  EXPECT_EQ(two_images().rope_pos(94), (RopePos{84, 84, 84}));
  for (int64_t chunk : {1, 7, 22, 64}) {
    const std::string d = bits_diff(image_run(chunk, p1), one, V());
    EXPECT_TRUE(d.empty()) << "chunk " << chunk << ": " << d;
  }
  const std::string d2 = bits_diff(image_run(7, p2), one, V());
  EXPECT_TRUE(d2.empty()) << "2 threads, chunk 7: " << d2;
  for (SimdLevel lvl : simd_levels_to_test()) {
    const SimdLevelRun run(lvl);
    const std::string d = bits_diff(image_run(22, p1), one, V());
    EXPECT_TRUE(d.empty()) << "simd " << simd_name(lvl) << ": " << d;
    run.expect_kernels_ran();
  }
}

}  // namespace
}  // namespace invar::test
