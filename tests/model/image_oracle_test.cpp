// An image+text prompt on qwen35-tiny (issue 28): a random tower of the model's width encodes a
// 128 × 64 image (a 2 × 4 merged grid: 8 image tokens whose h and w positions differ) that sits
// between text tokens; the first 20 greedy steps' top-20 logprobs within 1e-4 of the float64
// oracle (float64_oracle.py), fed invar's tower rows and, chained, the float64 tower's
// (tests/vision/vision_reference.py: pixels to logits in float64); and the prompt's logits with
// the same bits in one call, in chunks that split the image run, on 2 threads and every SIMD
// level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/simd.h"
#include "forge/make_mmproj.h"
#include "model_harness.h"
#include "simd_levels.h"
#include "test_process_dir.h"
#include "vision/vision_forward.h"

namespace invar::test {
namespace {

constexpr int kSteps = 20, kTop = 20;
constexpr double kTol = 1e-4;

std::string dir() {
  return test_process_dir("image_oracle");
}

const Model& model() {
  static std::unique_ptr<Model> m = Model::load(test_model_path("qwen35-tiny"));
  return *m;
}

// Prompt: 6 text tokens, <|vision_start|>, 8 image pads, <|vision_end|>, 7 text tokens.
struct Request {
  std::vector<int32_t> prompt;
  SeqImages images;
  std::string tower;  // the mmproj file
  VisionImage pixels;
};

const Request& request() {
  static const Request r = [] {
    Request q;
    const Model& m = model();
    MakeMmprojConfig c;
    c.n_out = m.hparams().n_embd;
    c.seed = 5;
    GgufWriter w;
    make_mmproj(c, w);
    const std::string path = dir() + "/tower.gguf";
    w.write(path);
    const auto tower = vision_model_load(path);
    q.tower = path;
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    VisionImage img{128, 64, std::vector<float>(3 * 128 * 64)};
    for (float& v : img.chw) v = u(rng);
    q.pixels = img;
    ThreadPool pool(2);
    SeqImage im;
    im.rows = vision_encode(*tower, img, pool);
    im.ny = 2;
    im.nx = 4;
    const int64_t V = m.hparams().n_vocab;
    const int32_t pad = int32_t(V - 3), vs = int32_t(V - 2), ve = int32_t(V - 1);
    for (int i = 0; i < 6; ++i) q.prompt.push_back(int32_t((i * 37 + 5) % V));
    q.prompt.push_back(vs);
    im.start = int64_t(q.prompt.size());
    q.prompt.insert(q.prompt.end(), size_t(im.n_tokens()), pad);
    q.prompt.push_back(ve);
    for (int i = 0; i < 7; ++i) q.prompt.push_back(int32_t((i * 53 + 11) % V));
    q.images.pad_id = pad;
    q.images.images.push_back(std::move(im));
    q.images.check(q.prompt, m.hparams().n_embd);
    return q;
  }();
  return r;
}

std::vector<int64_t> top_ids(const std::vector<double>& lp) {
  return top_ids_f64(lp, kTop);
}

// The float64 tower's rows of the request's image (tests/vision/vision_reference.py), written to
// a file the oracle reads; returns its path.
std::string reference_rows() {
  const Request& r = request();
  const std::string image = dir() + "/image.f32", out = dir() + "/rows.f64";
  std::ofstream(image, std::ios::binary)
      .write(reinterpret_cast<const char*>(r.pixels.chw.data()),
             std::streamsize(r.pixels.chw.size() * sizeof(float)));
  const nlohmann::json job = {{"mmproj", r.tower},
                              {"image", image},
                              {"width", r.pixels.width},
                              {"height", r.pixels.height},
                              {"out", out}};
  const std::string jobs = dir() + "/tower_jobs.json";
  std::ofstream(jobs) << nlohmann::json::array({job}).dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                          "/tests/vision/vision_reference.py " + jobs;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return out;
}

// The oracle's logits after every slot of tokens, [T][V]: the image's rows from invar's tower
// (the language model alone), or with chained = true from the float64 tower (pixels to logits).
std::vector<double> oracle(const std::vector<int32_t>& tokens, bool chained) {
  const SeqImage& im = request().images.images.front();
  std::string rows = dir() + "/rows.f32";
  if (chained) {
    rows = reference_rows();
  } else {
    std::ofstream(rows, std::ios::binary)
        .write(reinterpret_cast<const char*>(im.rows.data()),
               std::streamsize(im.rows.size() * sizeof(float)));
  }
  const std::string out = dir() + "/out.f64";
  nlohmann::json job = {{"model", test_model_path("qwen35-tiny")},
                        {"tokens", tokens},
                        {"out", out},
                        {"images",
                         {{{"start", im.start},
                           {"ny", im.ny},
                           {"nx", im.nx},
                           {"rows", rows},
                           {"dtype", chained ? "f64" : "f32"}}}}};
  const std::string jobs = dir() + "/jobs.json";
  std::ofstream(jobs) << nlohmann::json::array({job}).dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + INVAR_SOURCE_DIR +
                          "/tests/model/float64_oracle.py logits " + jobs;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const size_t n = tokens.size() * size_t(model().hparams().n_vocab);
  std::vector<double> v(n, std::nan(""));
  std::ifstream f(out, std::ios::binary);
  f.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(double)));
  EXPECT_EQ(size_t(f.gcount()), n * sizeof(double)) << out;
  return v;
}

TEST(ImageOracle, GreedyStepsWithinTolerance) {
  const Model& m = model();
  const Request& r = request();
  const int64_t V = m.hparams().n_vocab, n = int64_t(r.prompt.size());
  ThreadPool pool(1);
  SeqState st(m, n + kSteps);
  std::vector<int32_t> toks = r.prompt;
  std::vector<float> lg = run_chunked(m, st, toks, 0, pool, 0, &r.images);
  std::vector<float> steps(lg.end() - V, lg.end());  // [kSteps][V] invar's greedy rows
  for (int s = 1; s < kSteps; ++s) {
    const float* row = steps.data() + (s - 1) * V;
    const int32_t next = int32_t(std::max_element(row, row + V) - row);
    toks.push_back(next);
    // One token at slot n + s − 1, continuing the images' positions.
    SeqChunk c;
    const std::vector<const float*> rows(1, nullptr);
    const RopePos pos = r.images.rope_pos(n + s - 1);
    c.tokens = &toks.back();
    c.n_tokens = 1;
    c.pos0 = n + s - 1;
    c.embd_rows = rows.data();
    c.rope_pos = &pos;
    c.state = st.state.data();
    c.kv_blocks = st.blocks.data();
    c.block_size = st.block_size;
    std::vector<float> out(static_cast<size_t>(V));
    c.logits = out.data();
    m.forward({&c, 1}, *m.scratch_make(1, 1), pool);
    steps.insert(steps.end(), out.begin(), out.end());
  }
  // Against the oracle fed invar's tower rows (the language model alone), then against the
  // float64 tower chained into the oracle (pixels to logits).
  for (const bool chained : {false, true}) {
    const std::vector<double> want = oracle(toks, chained);
    double worst = 0;
    for (int s = 0; s < kSteps; ++s) {
      const size_t at = size_t(n - 1 + s) * size_t(V);
      const std::vector<double> lo = log_softmax_f64(want.data() + at, V);
      const std::vector<double> inv(steps.begin() + s * V, steps.begin() + (s + 1) * V);
      const std::vector<double> li = log_softmax_f64(inv.data(), V);
      std::vector<int64_t> ids = top_ids(lo);
      const std::vector<int64_t> ti = top_ids(li);
      ids.insert(ids.end(), ti.begin(), ti.end());
      // A NaN difference is the worst there is (std::max would keep the old value past it).
      for (int64_t id : ids) {
        const double d = std::fabs(li[size_t(id)] - lo[size_t(id)]);
        worst = std::isnan(d) ? d : std::max(worst, d);
      }
      const int64_t oi = top_ids(lo)[0];
      if (oi != ti[0]) {
        EXPECT_LE(lo[size_t(oi)] - lo[size_t(ti[0])], kTol)
            << "step " << s << ": invar chose " << ti[0] << ", the oracle " << oi;
      }
    }
    EXPECT_LE(worst, kTol) << (chained ? "float64 tower + oracle" : "oracle on invar's rows");
    std::printf(
        "image+text, %d greedy steps, %s: max |invar - float64| over top-20 logprobs %.3g\n",
        kSteps, chained ? "float64 tower chained" : "invar's tower rows", worst);
  }
  // The image matters: the same prompt with token_embd rows at the pads gives other logits.
  const std::vector<double> text = [&] {
    SeqState st2(m, n);
    const std::vector<float> t = run_chunked(m, st2, r.prompt, 0, pool);
    return std::vector<double>(t.end() - V, t.end());
  }();
  double moved = 0;
  for (int64_t v = 0; v < V; ++v)
    moved = std::max(moved, std::fabs(text[size_t(v)] - steps[size_t(v)]));
  EXPECT_GT(moved, 1e-2) << "the image did not change the logits";
}

TEST(ImageOracle, SameBitsAcrossChunksThreadsSimd) {
  const Model& m = model();
  const Request& r = request();
  const int64_t V = m.hparams().n_vocab, n = int64_t(r.prompt.size());
  ThreadPool p1(1), p2(2);
  ASSERT_EQ(p2.size(), 2);
  auto run = [&](int64_t chunk, ThreadPool& pool) {
    SeqState st(m, n);
    return run_chunked(m, st, r.prompt, chunk, pool, 0, &r.images);
  };
  const std::vector<float> one = run(0, p1);
  for (int64_t chunk : {1, 3, 9}) {  // 3 and 9 end inside the image run (slots 7..14)
    const std::string d = bits_diff(run(chunk, p1), one, V);
    EXPECT_TRUE(d.empty()) << "chunk " << chunk << ": " << d;
  }
  const std::string d2 = bits_diff(run(3, p2), one, V);
  EXPECT_TRUE(d2.empty()) << "2 threads: " << d2;
  for (SimdLevel lvl : simd_levels_to_test()) {
    const SimdLevelRun run_at(lvl);
    const std::string d = bits_diff(run(9, p1), one, V);
    EXPECT_TRUE(d.empty()) << "simd " << simd_name(lvl) << ": " << d;
    run_at.expect_kernels_ran();
  }
}

}  // namespace
}  // namespace invar::test
