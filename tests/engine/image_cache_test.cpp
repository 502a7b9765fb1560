// Images through the engine (issue 28) on qwen35-tiny: a request with an image has the same
// logits cold, on a full prefix-cache hit after the same image, and with the cache off; the
// cache keys image slots by the pixels' hash, so a second request with the same image reuses
// its blocks (cached_tokens counts the image's), one with another image or with no image reuses
// only the blocks before the image.
#include "invariance_harness.h"

namespace invar::testing_engine {
namespace image_cache_test {

constexpr int32_t kPad = 7;

// An image of a 3 × 4 merged grid at slot `start` of the prompt; rows from `seed`.
std::shared_ptr<const SeqImages> image_make(const Model& m, uint32_t seed,
                                            std::vector<int32_t>& prompt, int64_t start = 10) {
  auto im = std::make_shared<SeqImages>();
  im->pad_id = kPad;
  SeqImage one;
  one.start = start;
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

// A 120-token prompt with image a or b (3 × 4 grids, other pixels) at slot `start`, and both
// requests' logits computed with the prefix cache off.
struct TwoImages {
  TwoImages(uint32_t seed, int64_t start) : m(model_get("qwen35-tiny")) {
    std::mt19937 rng(seed);
    prompt = tokens_random(rng, 120, m.hparams().n_vocab);
    a = image_make(m, 1, prompt, start);
    b = image_make(m, 2, prompt, start);
    EngineConfig off = config_base();
    off.prefix_cache = false;
    cold_a = run_sequential(m, off, {with(a)})[0];
    cold_b = run_sequential(m, off, {with(b)})[0];
    text = run_sequential(m, off, {with(nullptr)})[0];
  }
  GenerationRequest with(std::shared_ptr<const SeqImages> im) const {
    GenerationRequest r = request_make(prompt, 4, true);
    r.images = std::move(im);
    return r;
  }
  int64_t n() const { return int64_t(prompt.size()); }
  const Model& m;
  std::vector<int32_t> prompt;
  std::shared_ptr<const SeqImages> a, b;
  Outcome cold_a, cold_b, text;
};

TEST(ImageCache, SameImageSharesBlocksOthersDoNot) {
  const TwoImages t(42, 10);
  EXPECT_NE(digest_of(t.cold_a), digest_of(t.cold_b)) << "the image changed nothing";
  EXPECT_NE(digest_of(t.cold_a), digest_of(t.text)) << "the image changed nothing";
  const auto out = run_sequential(
      t.m, config_base(), {t.with(t.a), t.with(t.a), t.with(t.b), t.with(nullptr), t.with(t.b)});
  EXPECT_EQ(out[0].cached_tokens, 0);
  EXPECT_EQ(out[1].cached_tokens, 112) << "the same image: every full block reused";
  // The image is in block 0: another image or none shares no block.
  EXPECT_EQ(out[2].cached_tokens, 0) << "another image's blocks were reused";
  EXPECT_EQ(out[3].cached_tokens, 0) << "a text request reused an image's blocks";
  EXPECT_EQ(out[4].cached_tokens, 112);
  expect_same_bits(t.cold_a, out[0], t.n(), "a, first");
  expect_same_bits(t.cold_a, out[1], t.n(), "a, cache hit");
  expect_same_bits(t.cold_b, out[2], t.n(), "b after a");
  expect_same_bits(t.text, out[3], t.n(), "text after images");
  expect_same_bits(t.cold_b, out[4], t.n(), "b, cache hit");
}

// The image at slot 40 (block 2 of 16-slot blocks): blocks 0 and 1 are text and shared with a
// request without the image or with another image; from block 2 on only the same image hits.
TEST(ImageCache, BlocksBeforeTheImageAreShared) {
  const TwoImages t(43, 40);
  const auto out =
      run_sequential(t.m, config_base(), {t.with(nullptr), t.with(t.a), t.with(t.b), t.with(t.a)});
  EXPECT_EQ(out[1].cached_tokens, 32) << "the text blocks before the image";
  EXPECT_EQ(out[2].cached_tokens, 32) << "another image: the text blocks before it only";
  EXPECT_EQ(out[3].cached_tokens, 112);
  expect_same_bits(t.text, out[0], t.n(), "text first");
  expect_same_bits(t.cold_a, out[1], t.n(), "a after text");
  expect_same_bits(t.cold_b, out[2], t.n(), "b after a");
  expect_same_bits(t.cold_a, out[3], t.n(), "a, cache hit");
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
}

}  // namespace image_cache_test
}  // namespace invar::testing_engine
