// `invar make-model --mmproj` and `invar run --mmproj --image` end to end: the random tower is
// written and loaded, a JPEG is decoded, resized, encoded, and its embeddings' digest is the same
// for every --threads and --simd; an image with a prompt is refused, not half-served.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "command_run.h"
#include "test_process_dir.h"

namespace invar {
namespace {

const std::string kInvar = std::string(INVAR_BINARY_DIR) + "/apps/invar/invar";
// A photograph shipped with the llama.cpp checkout beside this tree, when there is one.
const std::string kJpeg = std::string(INVAR_SOURCE_DIR) + "/../llama/tools/mtmd/test-1.jpeg";

std::string digest_of(const std::string& out) {
  std::smatch m;
  return std::regex_search(out, m, std::regex("embeddings sha256 ([0-9a-f]{64})")) ? m[1].str()
                                                                                   : "";
}

TEST(RunImageCli, DigestIndependentOfThreadsAndSimd) {
  if (!std::ifstream(kJpeg)) GTEST_SKIP() << "no test image at " << kJpeg;
  const std::string mmproj = test::test_process_dir("vision_cli") + "/mmproj.gguf";
  auto r = test::command_run(kInvar + " make-model --mmproj " + mmproj + " --embd 96 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("qwen3vl_merger, 2 blocks, C=64, patch 16, projection 96"),
            std::string::npos)
      << r.out;
  const std::string base = kInvar + " run --mmproj " + mmproj + " --image " + kJpeg;
  r = test::command_run(base + " --threads 1 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("640 x 488 pixels, encoded at 640 x 480: 300 tokens x 96"),
            std::string::npos)
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
  EXPECT_EQ(std::filesystem::file_size(raw), 300u * 96u * 4u);
  r = test::command_run(kInvar + " bench vision --mmproj " + mmproj + " --image " + kJpeg +
                        " --threads 1,2 --runs 1 2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("1200 patches, 300 tokens"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 2 | "), std::string::npos) << r.out;
  r = test::command_run(base + " --prompt hi 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("not fed to the language model yet"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace invar
