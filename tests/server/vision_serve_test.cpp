// Images through the real `invar serve --mmproj` (issue 28): a random tower of the tiny qwen35's
// width (make-model --mmproj), Qwen3.5's chat template, PNG and JPEG data URLs sent over HTTP.
// The contract on a multimodal prefix: a second question about the same image hits the prefix
// cache past the image (cached_tokens more than the text before it), skips the tower (the
// encoder cache's counter moves, the encode counter does not) and has the bits of a cold
// server; streamed = whole; another image hits nothing past the image. Hostile images and
// URLs are 400s that leave the server serving.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <thread>

#include "command_run.h"
#include "http_test_util.h"
#include "image_write.h"
#include "sanitizer_build.h"
#include "serve_process.h"

namespace vision_serve_test {

using namespace invar::server::testing;
using json = nlohmann::json;

namespace {

const std::string kTemplate = std::string(INVAR_TEST_DATA_DIR) + "/chat-templates/Qwen3.5-4B.jinja";

invar::RgbImage random_rgb(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  invar::RgbImage img{w, h, std::vector<uint8_t>(size_t(w) * h * 3)};
  for (auto& v : img.rgb) v = uint8_t(rng());
  return img;
}

std::string png_of(int w, int h, uint32_t seed) {
  const std::vector<uint8_t> f =
      invar::test::png_encode(random_rgb(w, h, seed).rgb, w, h, PNG_FORMAT_RGB);
  return {f.begin(), f.end()};
}

std::string jpeg_of(int w, int h, uint32_t seed) {
  const std::vector<uint8_t> f = invar::test::jpeg_encode(random_rgb(w, h, seed), 90);
  return {f.begin(), f.end()};
}

uint32_t crc32_of(const std::string& s) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

// A PNG whose header claims w × h pixels (a valid CRC) over a small image's data: a
// decompression bomb or a 100000 × 1 strip to the decoder, a few hundred bytes on the wire.
std::string png_claiming(uint32_t w, uint32_t h) {
  std::string p = png_of(32, 32, 9);
  auto put = [&p](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[at + size_t(i)] = char((v >> (24 - 8 * i)) & 0xff);
  };
  put(16, w);  // IHDR data starts at 16: signature 8, length 4, type 4
  put(20, h);
  put(29, crc32_of(p.substr(12, 17)));
  return p;
}

std::string base64_of(const std::string& in) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v =
        uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8 | uint8_t(in[i + 2]);
    for (int k = 3; k >= 0; --k) out += a[(v >> (6 * k)) & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16;
    out += std::string{a[v >> 18], a[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == in.size()) {
    const uint32_t v = uint32_t(uint8_t(in[i])) << 16 | uint32_t(uint8_t(in[i + 1])) << 8;
    out += std::string{a[v >> 18], a[(v >> 12) & 63], a[(v >> 6) & 63], '='};
  }
  return out;
}

json image_part(const std::string& url) {
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}
json png_part(const std::string& png) {
  return image_part("data:image/png;base64," + base64_of(png));
}

// A system turn (the text prefix every request shares), then the user's parts.
json chat(const json& parts, bool stream = false) {
  return {
      {"messages",
       {{{"role", "system"},
         {"content", "You read scanned invoices and answer questions about them in a few words."}},
        {{"role", "user"}, {"content", parts}}}},
      {"max_tokens", 4},
      {"temperature", 0},
      {"logprobs", true},
      {"top_logprobs", 20},
      {"stream", stream}};
}

struct Reply {
  int status = 0;
  json body;  // whole: the response; streamed: {"logprobs": [...], "usage": ...}
  std::string text;
};

Reply post(const ServeProcess& s, const json& body, const std::string& key = "") {
  httplib::Client c("127.0.0.1", s.port());
  c.set_read_timeout(60, 0);
  httplib::Headers h;
  if (!key.empty()) h.emplace("Authorization", "Bearer " + key);
  auto r = c.Post("/v1/chat/completions", h, body.dump(), "application/json");
  Reply out;
  if (!r) return out;
  out.status = r->status;
  out.text = r->body;
  if (!body.value("stream", false)) {
    out.body = json::parse(r->body, nullptr, false);
    return out;
  }
  json lp = json::array();
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("data: {", 0) != 0) continue;
    const json ev = json::parse(line.substr(6));
    for (const json& ch : ev["choices"])
      if (ch.contains("logprobs") && ch["logprobs"].is_object())
        for (const json& t : ch["logprobs"]["content"]) lp.push_back(t);
  }
  out.body = {{"logprobs", lp}};
  return out;
}

int64_t cached_of(const Reply& r) {
  return r.body["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

double metric_of(const ServeProcess& s, const std::string& name) {
  httplib::Client c("127.0.0.1", s.port());
  auto r = c.Get("/metrics");
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atof(r->body.c_str() + at + name.size() + 2);
}

// The tiny qwen35 (E 96, Qwen3's vocabulary: it has the vision tokens) and a random tower of
// its width, made once per test process; the images a test sends; the media directory.
struct Files {
  std::string dir, lm, mm, media;
  Files() {
    dir =
        std::filesystem::temp_directory_path() / ("invar-vision-serve-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir + "/media");
    lm = dir + "/lm.gguf";
    mm = dir + "/mm.gguf";
    media = dir + "/media";
    const auto r = invar::test::command_run(
        kInvarBin + " make-model --arch qwen35 --embd 96 --layers 2 --out " + lm + " --mmproj " +
        mm + " 2>&1");
    EXPECT_NE(r.out.find("lm.gguf: qwen35"), std::string::npos) << r.out;
  }
  ~Files() { std::filesystem::remove_all(dir); }
};

const Files& files() {
  static Files f;
  return f;
}

std::vector<std::string> serve_args(const std::vector<std::string>& more = {}) {
  std::vector<std::string> a = {files().lm,
                                "--mmproj",
                                files().mm,
                                "--chat-template",
                                kTemplate,
                                "--block-size",
                                "16",
                                "--threads",
                                "1",
                                "--allowed-local-media-path",
                                files().media,
                                "--max-images-per-request",
                                "3"};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

// 256 × 128 pixels: an 8 × 4 merged grid, 32 image tokens (two 16-token blocks).
const std::string& image_a() {
  static const std::string p = png_of(256, 128, 1);
  return p;
}
const std::string& image_b() {
  static const std::string p = png_of(256, 128, 2);
  return p;
}

}  // namespace

TEST(VisionServe, SecondQuestionHitsThePrefixAndTheEncoderCacheWithColdBits) {
  ServeProcess warm(serve_args(), "vision_serve_warm");
  ASSERT_NE(warm.port(), 0) << warm.log();
  const json q1 = chat({png_part(image_a()), {{"type", "text"}, {"text", "What is the total?"}}});
  const json q2 =
      chat({png_part(image_a()), {{"type", "text"}, {"text", "Who issued it, and when?"}}});
  const json q2b =
      chat({png_part(image_b()), {{"type", "text"}, {"text", "Who issued it, and when?"}}});

  const Reply r1 = post(warm, q1);
  ASSERT_EQ(r1.status, 200) << r1.text;
  EXPECT_EQ(metric_of(warm, "invar_image_encodes_total"), 1);
  EXPECT_EQ(metric_of(warm, "invar_image_encode_cache_hits_total"), 0);
  const Reply r2 = post(warm, q2);
  ASSERT_EQ(r2.status, 200) << r2.text;
  EXPECT_EQ(metric_of(warm, "invar_image_encodes_total"), 1) << "the same image was re-encoded";
  EXPECT_EQ(metric_of(warm, "invar_image_encode_cache_hits_total"), 1);
  const Reply s2 = post(warm, chat(q2["messages"][1]["content"], true));
  ASSERT_EQ(s2.status, 200) << s2.text;
  const Reply rb = post(warm, q2b);
  ASSERT_EQ(rb.status, 200) << rb.text;
  EXPECT_EQ(metric_of(warm, "invar_image_encodes_total"), 2);

  // Another image shares the blocks of the text before the image and nothing after it; the
  // same image shares the image's blocks too.
  const int64_t prompt = r2.body["usage"]["prompt_tokens"].get<int64_t>();
  EXPECT_GE(prompt, 32 + 20) << "the image's 32 pads are not in the prompt";
  EXPECT_GT(cached_of(rb), 0) << "the text before the image was not reused";
  EXPECT_GT(cached_of(r2), cached_of(rb) + 16) << "the image's blocks were not reused";
  EXPECT_LT(cached_of(rb), prompt - 32) << "another image hit past the image";

  ServeProcess cold(serve_args(), "vision_serve_cold");
  ASSERT_NE(cold.port(), 0) << cold.log();
  const Reply c2 = post(cold, q2);
  ASSERT_EQ(c2.status, 200) << c2.text;
  EXPECT_EQ(cached_of(c2), 0);
  const json& want = c2.body["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(want.size(), 4u);
  EXPECT_EQ(want[0]["top_logprobs"].size(), 20u);
  EXPECT_EQ(r2.body["choices"][0]["logprobs"]["content"], want)
      << "a prefix-cache and encoder-cache hit changed the bits";
  EXPECT_EQ(s2.body["logprobs"], want) << "streamed differs from whole";
  EXPECT_NE(rb.body["choices"][0]["logprobs"]["content"], want) << "the image changed nothing";
  EXPECT_EQ(r2.body["system_fingerprint"], c2.body["system_fingerprint"]);
}

// Two tenants (--api-key-file) send the same image: each has its own encoder cache and prefix
// cache, so neither can tell from a hit (or its time) that the other sent it; the bits agree.
TEST(VisionServe, EncoderCacheIsEachTenantsOwn) {
  const std::string keys = files().dir + "/tenants.keys";
  std::ofstream(keys) << "alpha key-of-alpha-0123456789\nbeta key-of-beta-0123456789\n";
  ServeProcess s(serve_args({"--api-key-file", keys, "--metrics-public"}), "vision_serve_tenants");
  ASSERT_NE(s.port(), 0) << s.log();
  const json q = chat({png_part(image_a()), {{"type", "text"}, {"text", "What is the total?"}}});
  const Reply a1 = post(s, q, "key-of-alpha-0123456789");
  ASSERT_EQ(a1.status, 200) << a1.text;
  const Reply a2 = post(s, q, "key-of-alpha-0123456789");
  ASSERT_EQ(a2.status, 200) << a2.text;
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), 1) << "a tenant's own hit";
  EXPECT_GT(cached_of(a2), 0);
  const Reply b1 = post(s, q, "key-of-beta-0123456789");
  ASSERT_EQ(b1.status, 200) << b1.text;
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), 1)
      << "another tenant's image was a hit";
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 2);
  EXPECT_EQ(cached_of(b1), 0) << "another tenant's prefix was a hit";
  EXPECT_EQ(b1.body["choices"][0]["logprobs"], a1.body["choices"][0]["logprobs"]);
  EXPECT_EQ(post(s, q).status, 401);
}

// Two images in one message, each at its part's place with its own positions and pixel key: a
// cold server, a warm one (both images cached and encoded before) and the order swapped.
TEST(VisionServe, TwoImagesEachAtItsPlace) {
  ServeProcess s(serve_args(), "vision_serve_two");
  ASSERT_NE(s.port(), 0) << s.log();
  const json text = {{"type", "text"}, {"text", "Compare the two."}};
  const json ab =
      chat({png_part(image_a()), {{"type", "text"}, {"text", "and"}}, png_part(image_b()), text});
  const json ba =
      chat({png_part(image_b()), {{"type", "text"}, {"text", "and"}}, png_part(image_a()), text});
  const Reply cold = post(s, ab);
  ASSERT_EQ(cold.status, 200) << cold.text;
  EXPECT_GE(cold.body["usage"]["prompt_tokens"].get<int64_t>(), 64 + 20);
  const Reply swapped = post(s, ba);
  ASSERT_EQ(swapped.status, 200) << swapped.text;
  const Reply warm = post(s, ab);
  ASSERT_EQ(warm.status, 200) << warm.text;
  EXPECT_GT(cached_of(warm), 64) << "both images' blocks should be reused";
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 2);
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), 4);
  EXPECT_EQ(warm.body["choices"][0]["logprobs"], cold.body["choices"][0]["logprobs"]);
  EXPECT_NE(swapped.body["choices"][0]["logprobs"], cold.body["choices"][0]["logprobs"]);
  // curl, as a user sends it: the body from a file (the same request as `ab`), the same bits.
  const std::string body_file = files().dir + "/ab.json";
  std::ofstream(body_file) << ab.dump();
  const CurlResult by_curl = curl("-H 'Content-Type: application/json' --data-binary @" +
                                  body_file + " " + s.url() + "/v1/chat/completions");
  ASSERT_EQ(by_curl.status, 200) << by_curl.body;
  EXPECT_EQ(json::parse(by_curl.body)["choices"][0]["logprobs"],
            cold.body["choices"][0]["logprobs"]);
  // A JPEG, and a file under --allowed-local-media-path, are read as well.
  const std::string jpg = jpeg_of(96, 64, 3);
  Reply r = post(s, chat({image_part("data:image/jpeg;base64," + base64_of(jpg)), text}));
  EXPECT_EQ(r.status, 200) << r.text;
  std::ofstream(files().media + "/a.png", std::ios::binary) << image_a();
  r = post(s, chat({image_part("file://" + files().media + "/a.png"),
                    {{"type", "text"}, {"text", "Who issued it, and when?"}}}));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), 7) << "a file is the same pixels";
  // A lossless WebP of image A's pixels: decoded by libwebp to the same pixels, so the encoder
  // cache (keyed by pixels, not bytes) serves it.
  const std::vector<uint8_t> webp = invar::test::webp_encode(random_rgb(256, 128, 1), true);
  r = post(s, chat({image_part("data:image/webp;base64," +
                               base64_of(std::string(webp.begin(), webp.end()))),
                    {{"type", "text"}, {"text", "Who issued it, and when?"}}}));
  EXPECT_EQ(r.status, 200) << r.text;
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), 8) << "a WebP of the same pixels";
  httplib::Client c("127.0.0.1", s.port());
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_NE(models->body.find("\"input_modalities\":[\"text\",\"image\"]"), std::string::npos)
      << models->body;
  auto props = c.Get("/props");
  ASSERT_TRUE(props);
  EXPECT_NE(props->body.find("\"vision\":true"), std::string::npos) << props->body;
}

// Every hostile image or URL is a 400 naming the problem, within bounded memory (the client's
// own timeout guards against a hang), and the server keeps serving.
TEST(VisionServe, HostileImagesAre400s) {
  ServeProcess s(serve_args({"--max-image-bytes", "100000"}), "vision_serve_hostile");
  ASSERT_NE(s.port(), 0) << s.log();
  const json text = {{"type", "text"}, {"text", "What is it?"}};
  std::ofstream(files().dir + "/outside.png", std::ios::binary) << image_a();
  std::filesystem::create_symlink(files().dir + "/outside.png", files().media + "/link.png");
  const std::string good = png_of(64, 64, 5);
  const std::vector<std::pair<json, std::string>> cases = {
      {image_part("data:image/png;base64,@@not base64@@"), "not valid base64"},
      {png_part(good.substr(0, good.size() / 2)), "PNG"},
      {png_part(png_claiming(100000, 100000)), "16384"},
      {png_part(png_claiming(100000, 1)), "16384"},
      {png_part(png_claiming(8100, 40)), "aspect"},
      {image_part("data:image/png;base64," + std::string(200000, 'A')), "over"},
      {image_part("data:text/plain;base64,aGVsbG8="), "not an image"},
      {image_part("https://example.com/cat.png"), "remote image URLs are not fetched"},
      {image_part("file://" + files().dir + "/outside.png"), "outside the directory"},
      {image_part("file://" + files().media + "/link.png"), "outside the directory"},
      {image_part("file://" + files().media + "/../outside.png"), "outside the directory"},
      {{{"type", "image_url"}}, "image_url' is required"},
  };
  for (const auto& [part, want] : cases) {
    const Reply r = post(s, chat({part, text}));
    EXPECT_EQ(r.status, 400) << part.dump().substr(0, 200) << "\n" << r.text;
    EXPECT_NE(r.text.find(want), std::string::npos) << want << "\n" << r.text;
    EXPECT_EQ(r.body["error"]["param"], "messages[1].content[0].image_url") << r.text;
  }
  const json many = chat({png_part(good), png_part(good), png_part(good), png_part(good), text});
  Reply r = post(s, many);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.text.find("--max-images-per-request"), std::string::npos) << r.text;
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 0) << "a refused image reached the tower";
  // An image in the system turn: Qwen3.5's template refuses it, before the tower runs.
  json sys = chat(json::array({text}));
  sys["messages"][0]["content"] = json::array({png_part(good)});
  r = post(s, sys);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.text.find("System message cannot contain images"), std::string::npos) << r.text;
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 0) << "a refused prompt was encoded";
  // A prompt too long for the context with an image, and an image whose header alone says it
  // cannot fit (4000 × 4000: 4096 tokens at the pixel budget; its data is a 32 × 32 image's, so
  // a decode would fail on it): both refused from the header's size, before the tower.
  json long_text = chat({png_part(good), {{"type", "text"}, {"text", std::string(3000, 'x')}}});
  long_text["max_tokens"] = 4090;
  for (const json& q : {long_text, chat({png_part(png_claiming(4000, 4000)), text})}) {
    r = post(s, q);
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.text.find("maximum context length"), std::string::npos) << r.text;
  }
  EXPECT_EQ(metric_of(s, "invar_image_encodes_started_total"), 0)
      << "the tower ran for a prompt the context cannot hold";
  // /tokenize cannot count an image's tokens without decoding it: refused, not miscounted.
  httplib::Client c("127.0.0.1", s.port());
  json tok = chat({png_part(good), text});
  for (const char* k : {"max_tokens", "temperature", "logprobs", "top_logprobs", "stream"})
    tok.erase(k);
  auto t = c.Post("/tokenize", tok.dump(), "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_NE(t->body.find("does not read images"), std::string::npos) << t->body;
  r = post(s, chat({png_part(good), text}));
  EXPECT_EQ(r.status, 200) << r.text;
  if (!invar::test::kSanitizerBuild) {
    EXPECT_LT(resident_kib(s.pid()), 1 << 20) << "a hostile image took memory";
  }
}

// A compressible w × h picture: a large image in a small request body.
std::string gradient_png(int w, int h) {
  std::vector<uint8_t> rgb(size_t(w) * size_t(h) * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = rgb.data() + (size_t(y) * size_t(w) + size_t(x)) * 3;
      p[0] = uint8_t(x), p[1] = uint8_t(y), p[2] = 128;
    }
  const std::vector<uint8_t> f = invar::test::png_encode(rgb, w, h, PNG_FORMAT_RGB);
  return {f.begin(), f.end()};
}

// Polls until the counter reaches `want` (or 60 s pass) and returns its value.
double metric_wait(const ServeProcess& s, const std::string& name, double want) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  double v = metric_of(s, name);
  while (v < want && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    v = metric_of(s, name);
  }
  return v;
}

// The tower runs within the request's budgets (issue 51): its CPU, on every thread it runs on,
// counts in --prepare-cpu-seconds, and a request over it ends with the text preparation's error
// (the tower stopped between its units, counted); the next request is served.
TEST(VisionServe, TowerWithinTheCpuBudget) {
  // 0.03 s: parsing this small body (a few KB) takes a fraction of it under any sanitizer; the
  // tower on 1024 patches takes several times it even in release (~0.17 s).
  ServeProcess s(serve_args({"--prepare-cpu-seconds", "0.03"}), "vision_serve_budget");
  ASSERT_NE(s.port(), 0) << s.log();
  Reply r = post(s, chat({png_part(gradient_png(512, 512)), {{"type", "text"}, {"text", "Hi"}}}));
  EXPECT_EQ(r.status, 400) << r.text;
  EXPECT_NE(r.text.find("encoding its images"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("--prepare-cpu-seconds"), std::string::npos) << r.text;
  EXPECT_EQ(metric_of(s, "invar_image_encodes_over_budget_total"), 1);
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 0) << "the tower ran to its end";
  // The next request is served (text: an image's base64 alone takes 0.04 s of parsing under
  // ASan, over this budget).
  r = post(s, chat(json::array({{{"type", "text"}, {"text", "Hi"}}})));
  EXPECT_EQ(r.status, 200) << r.text;
}

// A client that resets its connection while its image is in the tower: the tower stops at its
// next unit (counted as cancelled), the only preparation thread is free, and the next image
// request is encoded and served. That request's data URL is larger than the context's text bound
// (4096 tokens × the vocabulary's longest token, ~384 KiB): an image's bytes are not message
// text, only its tokens count.
TEST(VisionServe, ClientGoneStopsTheTower) {
  ServeProcess s(serve_args({"--prepare-threads", "1", "--ctx-size", "4096"}), "vision_serve_gone");
  ASSERT_NE(s.port(), 0) << s.log();
  // 2304 patches (a body of a few KB): each attention half takes ~0.3 s in release, so the reset
  // lands inside the tower.
  const json big = chat({png_part(gradient_png(768, 768)), {{"type", "text"}, {"text", "Hi"}}});
  const std::string body = big.dump();
  const int fd = connect_local(s.port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd,
                       "POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\n"
                       "Content-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n" + body));
  ASSERT_LT(body.size(), size_t(64) << 10);
  ASSERT_EQ(metric_wait(s, "invar_image_encodes_started_total", 1), 1);
  const linger reset{1, 0};  // close with RST, as the client in the finding did
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
  EXPECT_EQ(metric_wait(s, "invar_image_encodes_cancelled_total", 1), 1)
      << "the tower ran on for a client that was gone";
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 0) << "the tower ran to its end";
  const std::string png = png_of(512, 384, 7);  // random pixels: ~590 KB, 192 tokens
  ASSERT_GT(png.size(), size_t(400) << 10);
  const Reply r = post(s, chat({png_part(png), {{"type", "text"}, {"text", "What is it?"}}}));
  EXPECT_EQ(r.status, 200) << r.text.substr(0, 400);
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 1);
}

// `invar probe --image`: every arm's requests show the image before the document, so the
// arms measure a multimodal shared prefix; against invar serve --mmproj every completion of
// task B has the same digest in every arm, and the prefix cache and the encoder cache were hit.
TEST(VisionServe, ProbeWithAnImageIsStable) {
  ServeProcess s(serve_args(), "vision_serve_probe");
  ASSERT_NE(s.port(), 0) << s.log();
  const std::string dir = files().dir + "/probe";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/a.png", std::ios::binary) << image_a();
  const std::string out =
      invar::test::command_run(
          kInvarBin + " probe --url " + s.url() + " --api chat --preset seed --doc-chars 400 " +
          "--runs 2 --max-tokens 4 --threshold-span 4 --threshold-step 4 --image " + dir +
          "/a.png --json --out " + dir + "/out 2>&1")
          .out;
  const json report = json::parse(out.substr(out.find('{')), nullptr, false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report["verdict"], "stable") << out;
  std::set<std::string> digests;
  int64_t cached_max = 0;
  std::ifstream records(dir + "/out/records.jsonl");
  int n = 0;
  for (std::string line; std::getline(records, line); ++n) {
    const json r = json::parse(line);
    if (r["task"] == "B") digests.insert(r["digests"]["order"].get<std::string>());
    const json& c = r["completion"]["usage"]["cached_tokens"];
    if (c.is_number()) cached_max = std::max(cached_max, c.get<int64_t>());
  }
  EXPECT_GE(n, 10) << out;
  EXPECT_EQ(digests.size(), 1u) << out;
  EXPECT_GT(cached_max, 32) << "no request hit the prefix cache past the image";
  EXPECT_EQ(metric_of(s, "invar_image_encodes_total"), 1);
  EXPECT_EQ(metric_of(s, "invar_image_encode_cache_hits_total"), n - 1);
  // A completions probe cannot carry the image: refused before any request.
  const std::string bad =
      invar::test::command_run(kInvarBin + " probe --url " + s.url() +
                               " --api completions --preset seed --image " + dir + "/a.png 2>&1")
          .out;
  EXPECT_NE(bad.find("--image needs --api chat"), std::string::npos) << bad;
}

// Without --mmproj an image part is a 400 that says so; a tower of another width, a file that
// is no mmproj, or a model that reads no images end `invar serve` with an error naming it.
TEST(VisionServe, ServersThatCannotTakeImages) {
  ServeProcess text_only({files().lm, "--chat-template", kTemplate, "--threads", "1"},
                         "vision_serve_text_only");
  ASSERT_NE(text_only.port(), 0) << text_only.log();
  const Reply r =
      post(text_only, chat({png_part(png_of(64, 64, 5)), {{"type", "text"}, {"text", "Hi"}}}));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.text.find("no vision tower"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("--mmproj"), std::string::npos) << r.text;
  httplib::Client c("127.0.0.1", text_only.port());
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_NE(models->body.find("\"input_modalities\":[\"text\"]"), std::string::npos)
      << models->body;

  const std::string wide = files().dir + "/wide.gguf";
  invar::test::command_run(kInvarBin + " make-model --mmproj " + wide + " --embd 64 2>&1");
  const std::string tiny_next = std::string(INVAR_TEST_DATA_DIR) + "/models/qwen3next-tiny.gguf";
  const std::vector<std::pair<std::vector<std::string>, std::string>> bad = {
      {{files().lm, "--mmproj", wide}, "projection width 64"},
      {{files().lm, "--mmproj", files().lm}, "an mmproj file has 'clip'"},
      {{tiny_next, "--mmproj", files().mm}, "reads no images"},
  };
  for (const auto& [args, want] : bad) {
    ServeProcess s(args, "vision_serve_bad");
    EXPECT_EQ(s.port(), 0);
    s.stop(SIGKILL, 10);
    EXPECT_NE(s.log().find(want), std::string::npos) << want << "\n" << s.log();
  }
}

// OpenAI Responses' input_image is the chat's image_url part: the same prompt tokens, the same
// bits (the 20 top logprobs of each output token).
TEST(VisionServe, ResponsesInputImageIsTheChatsImage) {
  ServeProcess s(serve_args(), "vision_serve_responses");
  ASSERT_NE(s.port(), 0) << s.log();
  const std::string url = "data:image/png;base64," + base64_of(image_a());
  const json q = chat({image_part(url), {{"type", "text"}, {"text", "What is the total?"}}});
  const Reply c = post(s, q);
  ASSERT_EQ(c.status, 200) << c.text;
  const json body = {{"instructions", q["messages"][0]["content"]},
                     {"input",
                      {{{"role", "user"},
                        {"content",
                         {{{"type", "input_image"}, {"image_url", url}},
                          {{"type", "input_text"}, {"text", "What is the total?"}}}}}}},
                     {"max_output_tokens", 4},
                     {"temperature", 0},
                     {"top_logprobs", 20}};
  httplib::Client cl("127.0.0.1", s.port());
  cl.set_read_timeout(60, 0);
  auto r = cl.Post("/v1/responses", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json resp = json::parse(r->body);
  EXPECT_EQ(resp["usage"]["input_tokens"], c.body["usage"]["prompt_tokens"]);
  const json& want = c.body["choices"][0]["logprobs"]["content"];
  const json* msg = nullptr;
  for (const json& o : resp["output"])
    if (o["type"] == "message") msg = &o;
  ASSERT_NE(msg, nullptr) << resp.dump();
  const json& got = (*msg)["content"][0]["logprobs"];
  ASSERT_FALSE(want.empty()) << c.text;
  ASSERT_EQ(got.size(), want.size()) << resp.dump();
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]["token"], want[i]["token"]);
    EXPECT_EQ(got[i]["logprob"], want[i]["logprob"]);
    ASSERT_EQ(got[i]["top_logprobs"].size(), want[i]["top_logprobs"].size());
    for (size_t k = 0; k < got[i]["top_logprobs"].size(); ++k)
      EXPECT_EQ(got[i]["top_logprobs"][k]["logprob"], want[i]["top_logprobs"][k]["logprob"]);
  }
}

}  // namespace vision_serve_test
