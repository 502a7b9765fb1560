// Plans: the seed preset's shape, the file format's errors, prompts that share a prefix.
#include "probe/plan.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "probe/openai_client.h"
#include "probe/runner.h"

namespace invar::probe {
namespace plan_test {

TEST(ProbePlan, SeedPresetIsTheWriteUpsPlan) {
  Plan p = plan_preset_seed("");
  EXPECT_EQ(p.runs, 10);
  EXPECT_EQ(p.max_tokens, 32);
  EXPECT_EQ(p.top_k, 20);
  ASSERT_EQ(p.arms.size(), 4u);
  EXPECT_EQ(p.arms[0].kind, ArmKind::clean);
  EXPECT_EQ(p.arms[1].kind, ArmKind::contaminated);
  EXPECT_EQ(p.arms[1].warm, "A");
  EXPECT_EQ(p.arms[2].kind, ArmKind::no_cache);
  EXPECT_EQ(p.arms[3].kind, ArmKind::threshold);
  for (const auto& a : p.arms) EXPECT_EQ(a.task, "B");
  // The built-in document: ~3,000 tokens of text (about 4 bytes a token), compiled in.
  EXPECT_GT(builtin_document().size(), 10000u);
  EXPECT_LT(builtin_document().size(), 16000u);
  // ASCII only: the tiny test models' vocabularies hold only the 128 ASCII byte tokens.
  for (unsigned char c : builtin_document())
    ASSERT_LT(c, 0x80) << "non-ASCII byte in the built-in document";
  // A and B share the document as their prefix and differ after it.
  const std::string a = task_prompt(p, plan_task(p, "A"), 0);
  const std::string b = task_prompt(p, plan_task(p, "B"), 0);
  const std::string doc = builtin_document().substr(0, 1000);
  EXPECT_EQ(a.compare(0, doc.size(), doc), 0);
  EXPECT_EQ(b.compare(0, doc.size(), doc), 0);
  EXPECT_NE(a, b);
  // Threshold cells: A's tail from -16 to +16 fillers in steps of 4.
  std::vector<int> f = threshold_fillers(p.arms[3]);
  ASSERT_EQ(f.size(), 9u);
  EXPECT_EQ(f.front(), 0);
  EXPECT_EQ(f.back(), 32);
  EXPECT_EQ(task_prompt(p, plan_task(p, "A"), 3), a + " ok ok ok");
  EXPECT_EQ(plan_request_count(p), 10 + 11 + 10 + 9 * 3);
  EXPECT_EQ(plan_preset_seed("my doc").documents[0].text, "my doc");
}

TEST(ProbePlan, DocumentTruncatesAtALineEnd) {
  EXPECT_EQ(document_truncate("ab\ncd\nef\n", 7), "ab\ncd\n");
  EXPECT_EQ(document_truncate("ab\ncd\nef\n", 100), "ab\ncd\nef\n");
  EXPECT_EQ(document_truncate("abcdef", 3), "abc");
  const std::string d = document_truncate(builtin_document(), 5000);
  EXPECT_LE(d.size(), 5000u);
  EXPECT_GT(d.size(), 4000u);
  EXPECT_EQ(d.back(), '\n');
}

TEST(ProbePlan, FromJson) {
  json j = json::parse(R"({
    "documents": [{"name": "d", "text": "Doc."}],
    "tasks": [{"name": "A", "document": "d", "question": "qa"},
              {"name": "B", "document": "d", "question": "qb", "instructions": "JSON"}],
    "arms": [{"kind": "clean", "task": "B"}, {"name": "t", "kind": "threshold", "task": "B",
              "warm": "A", "span": 2, "step": 1}],
    "runs": 3, "max_tokens": 8, "top_k": 5, "filler": " x", "request": {"top_p": 1}
  })");
  Plan p = plan_from_json(j, ".");
  ASSERT_EQ(p.arms.size(), 2u);
  EXPECT_EQ(p.arms[0].name, "clean");
  EXPECT_EQ(p.arms[0].runs, 3);
  EXPECT_EQ(p.arms[1].runs, 2);  // threshold: runs per cell
  EXPECT_EQ(threshold_fillers(p.arms[1]).size(), 5u);
  EXPECT_EQ(task_prompt(p, plan_task(p, "B"), 2), "Doc.\n\nqb\nJSON x x");
  EXPECT_EQ(p.request["top_p"], 1);
}

TEST(ProbePlan, ErrorsNameTheField) {
  auto err = [](const char* text) {
    try {
      plan_from_json(json::parse(text), ".");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"documents": [], "tasks": [], "arms": []})").find("arms: empty"),
            std::string::npos);
  EXPECT_NE(
      err(R"({"documents": [{"name": "d", "text": "x"}], "tasks": [{"name": "B", "document": "e", "question": "q"}], "arms": [{"kind": "clean", "task": "B"}]})")
          .find("tasks.B.document"),
      std::string::npos);
  EXPECT_NE(
      err(R"({"documents": [{"name": "d", "text": "x"}], "tasks": [{"name": "B", "document": "d", "question": "q"}], "arms": [{"kind": "contaminated", "task": "B"}]})")
          .find(".warm"),
      std::string::npos);
  EXPECT_NE(
      err(R"({"documents": [{"name": "d", "text": "x"}], "tasks": [{"name": "B", "document": "d", "question": "q"}], "arms": [{"kind": "warm", "task": "B"}]})")
          .find("arms[0].kind"),
      std::string::npos);
  EXPECT_NE(err(R"({"top_k": 21, "documents": [], "tasks": [], "arms": []})").find("plan.top_k"),
            std::string::npos);
  EXPECT_NE(err(R"({"documents": [{"name": "d"}], "tasks": [], "arms": []})").find("documents[0]"),
            std::string::npos);
}

// --image: the file becomes a data URL (MIME from its signature, base64 with padding) in an
// image part before the task's text; a completions request cannot carry it.
TEST(ProbePlan, ImageGoesBeforeTheTextOfChatRequests) {
  const std::string dir = ::testing::TempDir();
  std::ofstream(dir + "/p.png", std::ios::binary) << std::string("\x89PNG\r\n\x1a\nab", 10);
  std::ofstream(dir + "/j.jpg", std::ios::binary) << std::string("\xff\xd8\xff", 3);
  std::ofstream(dir + "/t.txt") << "hello";
  EXPECT_EQ(image_data_url(dir + "/p.png"), "data:image/png;base64,iVBORw0KGgphYg==");
  EXPECT_EQ(image_data_url(dir + "/j.jpg"), "data:image/jpeg;base64,/9j/");
  EXPECT_THROW(image_data_url(dir + "/t.txt"), Error);
  CompletionRequest r;
  r.user = "Q";
  r.image_url = "data:image/jpeg;base64,/9j/";
  const json b = request_body(Api::chat, "m", r);
  EXPECT_EQ(b["messages"][0]["content"].dump(),
            R"([{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/"}},)"
            R"({"type":"text","text":"Q"}])");
  EXPECT_THROW(request_body(Api::completions, "m", r), Error);
  const Plan p = plan_from_json(json::parse(R"({"image": "j.jpg", "documents": [{"name": "d",
      "text": "x"}], "tasks": [{"name": "B", "document": "d", "question": "q"}],
      "arms": [{"name": "clean", "kind": "clean", "task": "B"}]})"),
                                dir);
  EXPECT_EQ(p.image, "data:image/jpeg;base64,/9j/");
}

}  // namespace plan_test
}  // namespace invar::probe
