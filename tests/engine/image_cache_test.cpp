// Images through the engine (issue 28) on qwen35-tiny: a request with an image has the same
// logits cold, on a full prefix-cache hit after the same image, and with the cache off; the
// cache keys image blocks by the pixels' hash, so a second request with the same image reuses
// them (cached_tokens counts the image's), one with another image or with no image does not.
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace image_cache_test {

constexpr int32_t kPad = 7;

// An image of a 3 × 4 merged grid at slot 10 of a 120-token prompt; rows from `seed`.
std::shared_ptr<const SeqImages> image_make(const Model& m, uint32_t seed,
                                            std::vector<int32_t>& prompt) {
  auto im = std::make_shared<SeqImages>();
  im->pad_id = kPad;
  SeqImage one;
  one.start = 10;
  one.ny = 3;
  one.nx = 4;
  one.pixels_sha256 = "pixels-" + std::to_string(seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  one.rows.resize(size_t(one.n_tokens() * m.hparams().n_embd));
  for (float& v : one.rows) v = u(rng);
  std::fill_n(prompt.begin() + one.start, one.n_tokens(), kPad);
  im->images.push_back(std::move(one));
  return im;
}

TEST(ImageCache, SameImageSharesBlocksOthersDoNot) {
  const Model& m = model_get("qwen35-tiny");
  std::mt19937 rng(42);
  std::vector<int32_t> prompt = tokens_random(rng, 120, m.hparams().n_vocab);
  const auto a = image_make(m, 1, prompt), b = image_make(m, 2, prompt);
  auto with = [&](std::shared_ptr<const SeqImages> im) {
    GenerationRequest r = request_make(prompt, 4, true);
    r.images = std::move(im);
    return r;
  };
  const int64_t L = int64_t(prompt.size());
  EngineConfig off = config_base();
  off.prefix_cache = false;
  const Outcome cold_a = run_sequential(m, off, {with(a)})[0];
  const Outcome cold_b = run_sequential(m, off, {with(b)})[0];
  const Outcome text = run_sequential(m, off, {with(nullptr)})[0];
  EXPECT_NE(digest_of(cold_a), digest_of(cold_b)) << "the image changed nothing";
  EXPECT_NE(digest_of(cold_a), digest_of(text)) << "the image changed nothing";

  const auto out =
      run_sequential(m, config_base(), {with(a), with(a), with(b), with(nullptr), with(b)});
  EXPECT_EQ(out[0].cached_tokens, 0);
  EXPECT_EQ(out[1].cached_tokens, 112) << "the same image: every full block reused";
  EXPECT_EQ(out[2].cached_tokens, 0) << "another image's blocks were reused";
  EXPECT_EQ(out[3].cached_tokens, 0) << "a text request reused an image's blocks";
  EXPECT_EQ(out[4].cached_tokens, 112);
  expect_same_bits(cold_a, out[0], L, "a, first");
  expect_same_bits(cold_a, out[1], L, "a, cache hit");
  expect_same_bits(cold_b, out[2], L, "b after a");
  expect_same_bits(text, out[3], L, "text after images");
  expect_same_bits(cold_b, out[4], L, "b, cache hit");
}

TEST(ImageCache, ChunkSizesSplittingTheImage) {
  const Model& m = model_get("qwen35-tiny");
  std::mt19937 rng(42);
  std::vector<int32_t> prompt = tokens_random(rng, 120, m.hparams().n_vocab);
  GenerationRequest r = request_make(prompt, 4, true);
  r.images = image_make(m, 1, prompt);
  r.prompt = prompt;
  const Outcome ref = run_sequential(m, config_base(), {r})[0];
  for (int64_t chunk : {5, 13, 64}) {  // 5 and 13 end inside the image run (slots 10..21)
    EngineConfig cfg = config_base();
    cfg.max_batch_tokens = chunk;
    expect_same_bits(ref, run_sequential(m, cfg, {r})[0], int64_t(prompt.size()),
                     "chunk " + std::to_string(chunk));
  }
}

TEST(ImageCache, MalformedImagesAreRefused) {
  const Model& m = model_get("qwen35-tiny");
  std::mt19937 rng(42);
  std::vector<int32_t> prompt = tokens_random(rng, 40, m.hparams().n_vocab);
  GenerationRequest r = request_make(prompt, 2, false);
  auto im = std::make_shared<SeqImages>(*image_make(m, 1, prompt));
  r.prompt = prompt;
  r.prompt[12] = kPad + 1;  // a slot of the image that is not the pad
  r.images = im;
  Engine engine(m, nullptr, config_base());
  EXPECT_THROW(engine.submit(r, [](RequestEvent&&) {}), EngineError);
  r.prompt = prompt;
  r.cache_salt = std::string("a\0b", 3);
  EXPECT_THROW(engine.submit(r, [](RequestEvent&&) {}), EngineError);
}

}  // namespace image_cache_test
}  // namespace invar::testing_engine
