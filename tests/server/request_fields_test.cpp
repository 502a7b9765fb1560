// docs/api.md's table of request fields against the registry the parser checks every request
// with (src/server/request_fields.cpp), both ways: every documented row is in the registry with
// the same endpoints, origin, status and accepted values, and every registry entry is
// documented. Plus the registry's own consistency and the parser's treatment of each kind.
#include "server/request_fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "server/api_error.h"
#include "server/api_request.h"

namespace request_fields_test {

using namespace invar::server;

namespace {

struct DocRow {
  std::string endpoints, origin, status, values, notes;
};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(' '), b = s.find_last_not_of(' ');
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::string without_backticks(std::string s) {
  std::erase(s, '`');
  return s;
}

// Rows of the table under "## Every request field", keyed by "name endpoints".
std::map<std::string, DocRow> doc_rows() {
  std::ifstream in(std::string(INVAR_SOURCE_DIR) + "/docs/api.md");
  EXPECT_TRUE(in) << "docs/api.md is missing";
  std::map<std::string, DocRow> rows;
  std::string line;
  bool in_section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_section = line == "## Every request field";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::stringstream ss(line.substr(1));
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(trim(cell));
    EXPECT_GE(cells.size(), 6u) << line;
    if (cells.size() < 6) continue;
    std::string key = without_backticks(cells[0]) + " " + cells[1];
    EXPECT_FALSE(rows.count(key)) << "documented twice: " << key;
    rows[key] = {cells[1], cells[2], cells[3], without_backticks(cells[4]), cells[5]};
  }
  return rows;
}

std::string endpoints_name(unsigned e) {
  return e == kBothEndpoints ? "both" : e == kChatOnly ? "chat" : "completions";
}

TEST(RequestFields, DocsTableMatchesTheRegistryBothWays) {
  auto rows = doc_rows();
  ASSERT_GT(rows.size(), 100u) << "the table in docs/api.md was not found";
  size_t matched = 0;
  for (const RequestField& f : request_fields()) {
    std::string key = std::string(f.name) + " " + endpoints_name(f.endpoints);
    auto it = rows.find(key);
    if (it == rows.end()) {
      ADD_FAILURE() << "not documented in docs/api.md: | `" << f.name << "` | "
                    << endpoints_name(f.endpoints) << " | " << f.origin << " | "
                    << field_status_name(f.status) << " | ... |";
      continue;
    }
    ++matched;
    EXPECT_EQ(it->second.origin, f.origin) << key;
    EXPECT_EQ(it->second.status, field_status_name(f.status)) << key;
    EXPECT_EQ(it->second.notes, f.note) << key;
    if (f.status == FieldStatus::no_op) {
      EXPECT_EQ(it->second.values, f.values) << key;
    }
    rows.erase(it);
  }
  for (auto& [key, row] : rows) ADD_FAILURE() << "documented but not in the registry: " << key;
  EXPECT_EQ(matched, request_fields().size());
}

TEST(RequestFields, RegistryIsConsistent) {
  std::map<std::string, unsigned> seen;
  for (const RequestField& f : request_fields()) {
    EXPECT_EQ(seen[f.name] & f.endpoints, 0u) << f.name << " registered twice for an endpoint";
    seen[f.name] |= f.endpoints;
    EXPECT_NE(std::string(f.note), "") << f.name;
    if (f.status == FieldStatus::no_op) {
      EXPECT_NE(std::string(f.values), "") << f.name;
    }
  }
}

ApiError parse_error(const std::string& body, Endpoint ep) {
  try {
    api_request_parse(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError{0, "", "", "", ""};
}

TEST(RequestFields, ParserRejectsUnknownRejectedAndChangingNoOps) {
  auto e = parse_error(R"({"prompt": "x", "no_such_field": 1})", Endpoint::completions);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "no_such_field");
  e = parse_error(R"({"prompt": "x", "guided_whitespace_pattern": " "})", Endpoint::completions);
  EXPECT_EQ(e.param, "guided_whitespace_pattern");
  e = parse_error(R"({"messages": [{"role": "user", "content": "x"}], "suffix": ""})",
                  Endpoint::chat);
  EXPECT_EQ(e.param, "suffix") << "a completions-only field on chat";
  e = parse_error(R"({"prompt": "x", "typical_p": 0.9})", Endpoint::completions);
  EXPECT_EQ(e.param, "typical_p");
  e = parse_error(R"({"prompt": "x", "n": 2, "best_of": 3})", Endpoint::completions);
  EXPECT_EQ(e.param, "best_of");
  // Accepted: no-op values, nulls, best_of = n.
  EXPECT_EQ(parse_error(R"({"prompt": "x", "typical_p": 1, "cache_prompt": false,
                            "guided_json": null, "n": 3, "best_of": 3, "dry_base": 9})",
                        Endpoint::completions)
                .status,
            0);
}

TEST(RequestFields, ParserReadsTheImplementedExtras) {
  ApiRequest r = api_request_parse(
      R"({"prompt": "x", "n": 3, "min_p": 0.25, "skip_special_tokens": false,
          "stop_token_ids": [4, 5], "truncate_prompt_tokens": 7, "request_id": "abc",
          "user": "u", "n_predict": 9})",
      Endpoint::completions);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.sampling.min_p, 0.25f);
  EXPECT_FALSE(r.skip_special_tokens);
  EXPECT_EQ(r.stop_token_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.truncate_prompt_tokens, 7);
  EXPECT_EQ(r.request_id, "abc");
  EXPECT_EQ(r.user, "u");
  ASSERT_TRUE(r.max_tokens.has_value());
  EXPECT_EQ(*r.max_tokens, 9);
  EXPECT_TRUE(api_request_parse(R"({"prompt": "x"})", Endpoint::completions).skip_special_tokens);
  EXPECT_EQ(parse_error(R"({"prompt": "x", "min_p": 1.5})", Endpoint::completions).param, "min_p");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "n": 0})", Endpoint::completions).param, "n");
  EXPECT_TRUE(
      api_request_parse(R"({"prompt": "x", "stream_options": {"continuous_usage_stats": true}})",
                        Endpoint::completions)
          .continuous_usage);
  EXPECT_EQ(parse_error(R"({"prompt": "x", "stream_options": {"continuous_usage_stats": 1}})",
                        Endpoint::completions)
                .param,
            "stream_options.continuous_usage_stats");
  EXPECT_EQ(parse_error(R"({"prompt": "x", "stream_options": {"include_obfuscation": true}})",
                        Endpoint::completions)
                .param,
            "stream_options.include_obfuscation");
}

}  // namespace

}  // namespace request_fields_test
