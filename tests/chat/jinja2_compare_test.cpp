// invar's template engine against Python's jinja2 (the reference transformers uses), byte for
// byte: every template of tests/data/chat-templates/ x every request of tests/chat/requests/
// (with content fitted to the template's detected content format, and to the other format),
// the engine snippets of tests/chat/snippets.json, and the content format of every template
// against vLLM's detection run on jinja2's syntax tree. jinja2 runs in this test, through
// tests/chat/jinja2_reference.py; an error on one side must be an error on the other.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat/chat_request.h"
#include "chat/content_format.h"
#include "chat/template.h"

namespace jinja2_compare_test {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string kSource = INVAR_SOURCE_DIR;
const std::string kNow = "2026-03-14T15:09:26";

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<fs::path> files_in(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ext) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Outcome {
  bool ok = false;
  std::string text;  // the rendering, or the error message
};

// Runs jinja2 on every case of the plan; returns its outcomes in order.
std::vector<Outcome> run_jinja2(const ojson& plan) {
  const fs::path dir = fs::temp_directory_path() / ("invar_jinja2_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path plan_path = dir / "plan.json", out_path = dir / "results.json";
  std::ofstream(plan_path) << plan.dump();
  const std::string cmd = std::string(INVAR_PYTHON3) + " " + kSource +
                          "/tests/chat/jinja2_reference.py " + plan_path.string() + " " +
                          out_path.string() + " 2>&1";
  const int st = std::system(cmd.c_str());
  std::vector<Outcome> out;
  if (st == 0 && fs::exists(out_path)) {
    const auto res = nlohmann::json::parse(read_file(out_path));
    std::printf("reference: Python jinja2 %s\n", res["jinja2"].get<std::string>().c_str());
    for (const auto& r : res["results"]) {
      out.push_back({r["ok"].get<bool>(), r["ok"].get<bool>() ? r["text"].get<std::string>()
                                                              : r["error"].get<std::string>()});
    }
  }
  fs::remove_all(dir);
  return out;
}

std::tm now_tm() {
  return invar::chat::parse_iso8601(kNow);
}

Outcome render_source(const std::string& source, const ojson& context) {
  try {
    const invar::chat::Template t(source);
    return {true, t.render(context, now_tm())};
  } catch (const invar::Error& e) {
    return {false, e.what()};
  }
}

// The first differing byte with some context on both sides, for a readable failure.
std::string first_difference(const std::string& want, const std::string& got) {
  size_t k = 0;
  while (k < want.size() && k < got.size() && want[k] == got[k]) ++k;
  const size_t from = k > 40 ? k - 40 : 0;
  return "first difference at byte " + std::to_string(k) +
         "\n  jinja2: " + ojson(want.substr(from, 100)).dump() +
         "\n  invar:  " + ojson(got.substr(from, 100)).dump();
}

struct Tally {
  int equal = 0, total = 0, rendered = 0, errors = 0;
  void check(const std::string& name, const Outcome& want, const Outcome& got) {
    ++total;
    if (want.ok != got.ok) {
      ADD_FAILURE() << name << ": jinja2 " << (want.ok ? "rendered" : "failed: " + want.text)
                    << "; invar " << (got.ok ? "rendered" : "failed: " + got.text);
      return;
    }
    if (want.ok && want.text != got.text) {
      ADD_FAILURE() << name << ": renderings differ, " << first_difference(want.text, got.text);
      return;
    }
    ++equal;
    (want.ok ? rendered : errors)++;
  }
};

using invar::chat::ContentFormat;

ContentFormat other_format(ContentFormat f) {
  return f == ContentFormat::string ? ContentFormat::openai : ContentFormat::string;
}

TEST(Jinja2Compare, ChatTemplatesTimesRequests) {
  const auto templates = files_in(kSource + "/tests/data/chat-templates", ".jinja");
  const auto requests = files_in(kSource + "/tests/chat/requests", ".json");
  ASSERT_GE(templates.size(), 15u);
  ASSERT_GE(requests.size(), 30u);
  // Each template x request twice: content fitted to the format detected ("auto", as
  // `invar serve` renders by default; jinja2_reference.py detects it on its own), then to the
  // other one (--chat-template-content-format forced).
  std::vector<std::string> sources;
  std::vector<ContentFormat> detected;
  ojson plan = {{"cases", ojson::array()}};
  for (const auto& t : templates) {
    sources.push_back(read_file(t));
    detected.push_back(invar::chat::content_format_detect(sources.back()));
    for (const char* format :
         {"auto", invar::chat::content_format_name(other_format(detected.back()))}) {
      for (const auto& r : requests) {
        plan["cases"].push_back({{"template", t.string()},
                                 {"request", r.string()},
                                 {"bos", "<s>"},
                                 {"eos", "</s>"},
                                 {"now", kNow},
                                 {"content_format", format}});
      }
    }
  }
  const auto want = run_jinja2(plan);
  ASSERT_EQ(want.size(), plan["cases"].size())
      << "jinja2 did not run: install python3-jinja2 (scripts/install-deps)";
  Tally tally;
  size_t k = 0;
  std::vector<int> rendered_per_template(templates.size(), 0);
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    for (const ContentFormat format : {detected[ti], other_format(detected[ti])}) {
      const bool is_auto = format == detected[ti];
      for (const auto& r : requests) {
        const ojson req = ojson::parse(read_file(r));
        const ojson ctx = invar::chat::chat_template_context(req, "<s>", "</s>", format);
        const Outcome got = render_source(sources[ti], ctx);
        const std::string name = templates[ti].filename().string() + " x " + r.filename().string() +
                                 " [" + invar::chat::content_format_name(format) +
                                 (is_auto ? ", detected]" : ", forced]");
        tally.check(name, want[k], got);
        if (is_auto) rendered_per_template[ti] += want[k].ok;
        ++k;
      }
    }
  }
  std::printf(
      "jinja2 comparison: %d/%d template x request x content-format cases equal (%d rendered "
      "byte for byte, %d errors on both sides)\n",
      tally.equal, tally.total, tally.rendered, tally.errors);
  EXPECT_EQ(tally.equal, tally.total);
  // The corpus must exercise real renderings, not just agree on errors.
  for (size_t ti = 0; ti < templates.size(); ++ti) {
    EXPECT_GE(rendered_per_template[ti], 5)
        << templates[ti].filename() << " rendered too few cases";
  }
  EXPECT_GT(tally.errors, 0) << "the corpus should include requests a template refuses";
}

// Templates written to reach each branch of vLLM's walk, beside the real ones.
const std::vector<std::pair<std::string, std::string>> kFormatSnippets = {
    {"loop_over_message_content",
     "{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}"},
    {"loop_over_item_content",
     "{% for m in messages %}{% for p in m['content'] %}{{ p }}{% endfor %}{% endfor %}"},
    {"loop_over_filtered_content",
     "{% for m in messages %}{% for p in m.content | selectattr('type', 'equalto', 'text') %}{{ "
     "p.text }}{% endfor %}{% endfor %}"},
    {"loop_over_sliced_list",
     "{% set rest = messages[1:] %}{% for m in rest %}{% for p in m.content %}x{% endfor %}{% "
     "endfor %}"},
    {"loop_over_reassigned_list",
     "{% set a = messages %}{% set b = a | list %}{% for m in b %}{% for p in m.content %}x{% "
     "endfor %}{% endfor %}"},
    {"loop_over_bare_content",
     "{% macro show(content) %}{% for item in content %}{{ item.text }}{% endfor %}{% endmacro "
     "%}{% for m in messages %}{{ show(m.content) }}{% endfor %}"},
    {"loop_over_content_outside_message_loop", "{% for p in messages[0].content %}x{% endfor %}"},
    {"content_as_string", "{% for m in messages %}{{ m.role }}: {{ m.content }}{% endfor %}"},
    {"content_string_test",
     "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% endif %}{% endfor %}"},
    {"loop_over_other_attribute",
     "{% for m in messages %}{% for c in m.tool_calls %}x{% endfor %}{% endfor %}"},
    {"namespace_target_stops_walk",
     "{% set ns = namespace(m=[]) %}{% set ns.m = messages %}{% for m in messages %}{% for p in "
     "m.content %}x{% endfor %}{% endfor %}"},
    {"tuple_loop_target_stops_walk",
     "{% for i, m in messages %}{{ i }}{% endfor %}{% for m in messages %}{% for p in m.content "
     "%}x{% endfor %}{% endfor %}"},
    {"tuple_content_loop_target",
     "{% for m in messages %}{% for a, b in m.content %}x{% endfor %}{% endfor %}"},
    {"assignment_cycle",
     "{% set a = messages %}{% set b = a %}{% set a = b %}{% for m in a %}{% for p in m.content "
     "%}x{% endfor %}{% endfor %}"},
    {"loop_inside_filter_block",
     "{% filter upper %}{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% "
     "endfor %}{% endfilter %}"},
    {"loop_test_on_list",
     "{% set ok = messages is defined %}{% for m in ok %}{% for p in m.content %}x{% endfor %}{% "
     "endfor %}"},
    {"syntax_error", "{% for m in messages %}{% for p in m.content %}"},
};

TEST(Jinja2Compare, ContentFormatDetection) {
  const auto templates = files_in(kSource + "/tests/data/chat-templates", ".jinja");
  ojson plan = {{"cases", ojson::array()}};
  for (const auto& t : templates) plan["cases"].push_back({{"detect", t.string()}, {"now", kNow}});
  for (const auto& [name, source] : kFormatSnippets)
    plan["cases"].push_back({{"detect_source", source}, {"now", kNow}});
  const auto want = run_jinja2(plan);
  ASSERT_EQ(want.size(), plan["cases"].size())
      << "jinja2 did not run: install python3-jinja2 (scripts/install-deps)";
  std::map<std::string, std::string> got_by_name;
  int openai = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    const bool is_template = k < templates.size();
    const std::string name = is_template ? templates[k].filename().string()
                                         : kFormatSnippets[k - templates.size()].first;
    const std::string source =
        is_template ? read_file(templates[k]) : kFormatSnippets[k - templates.size()].second;
    ASSERT_TRUE(want[k].ok) << name << ": " << want[k].text;
    const std::string got =
        invar::chat::content_format_name(invar::chat::content_format_detect(source));
    EXPECT_EQ(got, want[k].text) << name << ": invar detects " << got << ", vLLM's walk "
                                 << want[k].text;
    got_by_name[name] = got;
    openai += got == "openai";
  }
  std::printf("content format: %zu templates and snippets as vLLM detects them, %d openai\n",
              want.size(), openai);
  // The two kinds the default templates stand for: Qwen3 treats content as a string (so its
  // part arrays must be joined), Qwen3.5 iterates parts through its render_content macro.
  EXPECT_EQ(got_by_name["Qwen-Qwen3-0.6B.jinja"], "string");
  EXPECT_EQ(got_by_name["Qwen3.5-4B.jinja"], "openai");
  EXPECT_EQ(got_by_name["loop_over_message_content"], "openai");
  EXPECT_EQ(got_by_name["namespace_target_stops_walk"], "string");
}

TEST(Jinja2Compare, EngineSnippets) {
  const auto snippets = ojson::parse(read_file(kSource + "/tests/chat/snippets.json"));
  ASSERT_GE(snippets.size(), 90u);
  ojson plan = {{"cases", ojson::array()}};
  for (const auto& s : snippets) {
    plan["cases"].push_back({{"source", s["source"]}, {"context", s["context"]}, {"now", kNow}});
  }
  const auto want = run_jinja2(plan);
  ASSERT_EQ(want.size(), snippets.size())
      << "jinja2 did not run: install python3-jinja2 (scripts/install-deps)";
  Tally tally;
  for (size_t k = 0; k < snippets.size(); ++k) {
    const std::string name = snippets[k]["name"].get<std::string>();
    const Outcome got =
        render_source(snippets[k]["source"].get<std::string>(), snippets[k]["context"]);
    tally.check(name, want[k], got);
    // Snippets named err_* are there to fail; the others to render.
    EXPECT_EQ(want[k].ok, name.rfind("err_", 0) != 0) << name << ": " << want[k].text;
  }
  std::printf("jinja2 comparison: %d/%d snippets equal (%d rendered, %d errors on both sides)\n",
              tally.equal, tally.total, tally.rendered, tally.errors);
  EXPECT_EQ(tally.equal, tally.total);
}

}  // namespace jinja2_compare_test
