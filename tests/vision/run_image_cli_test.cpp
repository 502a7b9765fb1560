// `invar make-model --mmproj` and `invar run --mmproj --image` end to end: the random tower is
// written and loaded, a JPEG is decoded, resized, encoded, and its embeddings' digest is the same
// for every --threads and --simd; with a prompt the language model reads it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "command_run.h"
#include "image_write.h"
#include "test_process_dir.h"

namespace invar {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
// A 168 × 128 JPEG made once per process (a smooth picture with some texture): resized to
// 160 × 128 (the patch × merge multiple of 32), 80 patches, 20 tokens; small, because the
// sanitizer trees run this too.
const std::string& jpeg_path() {
  static const std::string path = [] {
    RgbImage img{168, 128, std::vector<uint8_t>(size_t(168 * 128 * 3))};
    for (int64_t y = 0; y < img.height; ++y)
      for (int64_t x = 0; x < img.width; ++x) {
        uint8_t* p = img.rgb.data() + (y * img.width + x) * 3;
        p[0] = uint8_t(x * 255 / 167);
        p[1] = uint8_t(y * 255 / 127);
        p[2] = uint8_t(((x / 8) ^ (y / 8)) * 37);
      }
    const std::vector<uint8_t> f = test::jpeg_encode(img, 90);
    const std::string out = test::test_process_dir("vision_cli_image") + "/test.jpeg";
    std::ofstream(out, std::ios::binary)
        .write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
    return out;
  }();
  return path;
}

std::string digest_of(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("embeddings sha256 ([0-9a-f]{64})")) ? m[1].str()
                                                                                   : "";
}

TEST(RunImageCli, DigestIndependentOfThreadsAndSimd) {
  const std::string mmproj = test::test_process_dir("vision_cli") + "/mmproj.gguf";
  auto r = test::command_run(kInvar + " make-model --mmproj " + mmproj + " --embd 96 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("qwen3vl_merger, 2 blocks, C=64, patch 16, projection 96"),
            std::string::npos)
      << r.out;
  const std::string base = kInvar + " run --mmproj " + mmproj + " --image " + jpeg_path();
  r = test::command_run(base + " --threads 1 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("168 x 128 pixels, encoded at 160 x 128: 20 tokens x 96"), std::string::npos)
      << r.out;
  const std::string want = digest_of(r.out);
  ASSERT_FALSE(want.empty()) << r.out;
  for (const std::string flags : {" --threads 2", " --threads 3 --simd off"}) {
    r = test::command_run(base + flags + " 2>&1");
    ASSERT_EQ(r.status, 0) << r.out;
    EXPECT_EQ(digest_of(r.out), want) << flags;
  }
  const std::string raw = test::test_process_dir("vision_cli") + "/emb.f32";
  r = test::command_run(base + " --embeddings-out " + raw + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(std::filesystem::file_size(raw), 20u * 96u * 4u);
  r = test::command_run(kInvar + " bench vision --mmproj " + mmproj + " --image " + jpeg_path() +
                        " --threads 1,2 --runs 1 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("80 patches, 20 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 2 | "), std::string::npos) << r.out;
}

std::string text_digest_of(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("\ndigest ([0-9a-f]{64})")) ? m[1].str() : "";
}

// An image with a prompt: the chat template's image part becomes <|vision_start|>, one
// <|image_pad|> per merged row (20 for this JPEG), <|vision_end|>; the model reads the tower's
// rows there and answers. The answer's digest is the same for any --threads, --chunk (7 and 100
// split the image run), --simd and --spec mtp, and another image or none changes it.
TEST(RunImageCli, ImageAndPromptThroughTheLanguageModel) {
  const std::string d = test::test_process_dir("vision_cli_lm");
  auto r = test::command_run(kInvar +
                             " make-model --arch qwen35 --embd 96 --layers 4 --mtp-bigram --out " +
                             d + "/lm.gguf --mmproj " + d + "/mm.gguf 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string base = kInvar + " run " + d + "/lm.gguf --chat " + "--chat-template " +
                           INVAR_SOURCE_DIR +
                           "/tests/data/chat-templates/Qwen3.5-4B.jinja --prompt 'What is this?' " +
                           "-n 24 --ignore-eos";
  const std::string image = " --mmproj " + d + "/mm.gguf --image " + jpeg_path();
  r = test::command_run(base + image + " --json 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("4 x 5 merged tokens at 4"), std::string::npos) << r.out;
  // <|im_start|>user\n<|vision_start|> then the pads, then <|vision_end|>.
  std::string pads;
  for (int i = 0; i < 20; ++i) pads += ",151655";
  EXPECT_NE(r.out.find("\"prompt_tokens\":[151644,872,198,151652" + pads + ",151653,"),
            std::string::npos)
      << r.out.substr(0, 400);
  r = test::command_run(base + image + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string want = text_digest_of(r.out);
  ASSERT_FALSE(want.empty()) << r.out;
  // Two runs, each moving several conditions at once (a difference in any one fails them): the
  // model-level image tests (model_image_oracle) cover each condition alone.
  for (const std::string flags :
       {" --threads 2 --chunk 7 --simd off", " --spec mtp --chunk 100 --threads 3 --simd avx2"}) {
    r = test::command_run(base + image + flags + " 2>&1");
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.out;
    EXPECT_EQ(text_digest_of(r.out), want) << flags;
    // Speculation really ran: drafts were proposed and some kept.
    if (flags.find("mtp") != std::string::npos) {
      EXPECT_TRUE(std::regex_search(r.out, std::regex("spec mtp: [1-9][0-9]* drafted, [1-9]")))
          << r.out;
    }
  }
  r = test::command_run(base + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(text_digest_of(r.out), want) << "the image changed nothing";
  // A Qwen3-VL tower with deepstack mergers is refused for the language model, naming why.
  r = test::command_run(kInvar + " make-model --mmproj " + d +
                        "/ds.gguf --embd 96 --deepstack 1 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  r = test::command_run(kInvar + " run " + d + "/lm.gguf --mmproj " + d + "/ds.gguf --image " +
                        jpeg_path() + " --prompt hi 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("deepstack"), std::string::npos) << r.out;

  // `bench model --image`: the image-encode table of `bench vision` after the model's, beside a
  // stand-in llama-mtmd-cli (a script answering with llama.cpp's log line and logging its
  // arguments) given the same model, mmproj, image and threads.
  const std::string peer = d + "/llama-mtmd-cli";
  {
    std::ofstream f(peer);
    f << "#!/bin/sh\necho \"$@\" >> " << d << "/peer.args\n"
      << "echo 'image slice encoded in 40 ms' >&2\necho 'mtmd batch encoding done in 250.0 ms' "
         ">&2\n";
  }
  std::filesystem::permissions(peer, std::filesystem::perms::owner_all);
  r = test::command_run(kInvar + " bench model --model " + d +
                        "/lm.gguf --prompts 8 --decode 1 --threads 1 --image " + jpeg_path() +
                        " --mmproj " + d + "/mm.gguf --peer-mtmd llama-mtmd-cli=" + peer + " 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("image encode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("80 patches, 20 tokens"), std::string::npos) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\\| 1 \\| [0-9.]+ \\| 250.0 \\| "))) << r.out;
  std::ifstream args(d + "/peer.args");
  std::string line;
  std::getline(args, line);
  EXPECT_NE(line.find("-m " + d + "/lm.gguf --mmproj " + d + "/mm.gguf --image " + jpeg_path()),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("-t 1"), std::string::npos) << line;
  r = test::command_run(kInvar + " bench model --model " + d + "/lm.gguf --image " + jpeg_path() +
                        " 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--image and --mmproj go together"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace invar
