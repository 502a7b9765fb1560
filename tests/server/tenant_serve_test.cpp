// Tenants through the real `invar serve`: two API keys from --api-key-file are two tenants whose
// prefix caches never meet — the same prompt, even under the same cache_salt, is a hit only for
// the tenant that sent it first (cached_tokens), and the answers are the same bits either way. A
// key file's mistakes are refused with the line named; a wrong key gets 401. The key may come as
// `Authorization: Bearer K` or as Anthropic's `x-api-key: K`.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "serve_process.h"
#include "server/tenants.h"

namespace tenant_serve_test {

using namespace invar::server::testing;
using invar::server::Tenant;
using invar::server::tenant_cache_salt;
using invar::server::tenants_load;
using json = nlohmann::json;
namespace fs = std::filesystem;

const std::string kKeyA = "key-of-tenant-a-0123456789";
const std::string kKeyB = "key-of-tenant-b-9876543210";

std::string file_with(const std::string& name, const std::string& text) {
  const std::string path = std::string(INVAR_BINARY_DIR) + "/tests/server/" + name;
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << text;
  return path;
}

// `header`: Authorization (the key as a bearer token) or x-api-key (the key as it is: Anthropic's
// clients send it so).
json complete(int port, const std::string& key, const std::string& salt, int* status = nullptr,
              const std::string& header = "Authorization") {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(120, 0);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 200; ++i) prompt.push_back(10 + (i * 7) % 300);
  json body = {{"prompt", prompt},
               {"max_tokens", 3},
               {"temperature", 0},
               {"logprobs", 5},
               {"ignore_eos", true}};
  if (!salt.empty()) body["cache_salt"] = salt;
  const std::string value = header == "Authorization" ? "Bearer " + key : key;
  auto r = c.Post("/v1/completions", {{header, value}}, body.dump(), "application/json");
  EXPECT_TRUE(r);
  if (!r) return json();
  if (status) *status = r->status;
  if (r->status != 200) return json();
  return json::parse(r->body);
}

int64_t cached_of(const json& r) {
  return r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
}

TEST(TenantServe, TwoKeysShareNoPrefixCache) {
  const std::string keys =
      file_with("tenants.keys", "# two tenants\nalpha " + kKeyA + "\n\nbeta\t" + kKeyB + "\n");
  ServeProcess s({"--model", kTinyModel, "--threads", "1", "--block-size", "16", "--log-format",
                  "none", "--api-key-file", keys},
                 "tenant_serve");
  ASSERT_NE(s.port(), 0) << s.log();
  const json a1 = complete(s.port(), kKeyA, "shared");
  ASSERT_FALSE(a1.is_null());
  EXPECT_EQ(cached_of(a1), 0);
  const json a2 = complete(s.port(), kKeyA, "shared");
  EXPECT_GT(cached_of(a2), 0) << "the tenant's own prefix is a hit";
  const json b1 = complete(s.port(), kKeyB, "shared");
  EXPECT_EQ(cached_of(b1), 0) << "another tenant's prefix, under the same cache_salt, is not";
  const json b0 = complete(s.port(), kKeyB, "");
  EXPECT_EQ(cached_of(b0), 0) << "nor without a salt";
  const json b2 = complete(s.port(), kKeyB, "shared");
  EXPECT_GT(cached_of(b2), 0);
  EXPECT_EQ(a1["choices"][0]["logprobs"], b1["choices"][0]["logprobs"]) << "same bits";
  EXPECT_EQ(a2["choices"][0]["logprobs"], b2["choices"][0]["logprobs"]);
  // The key in x-api-key is the same tenant's: its prefix is a hit there too.
  const json b3 = complete(s.port(), kKeyB, "shared", nullptr, "x-api-key");
  ASSERT_FALSE(b3.is_null()) << "x-api-key was not read";
  EXPECT_GT(cached_of(b3), 0) << "x-api-key named another tenant";
  int status = 0;
  complete(s.port(), "not-a-key-of-anyone-000", "", &status);
  EXPECT_EQ(status, 401);
  status = 0;
  complete(s.port(), "not-a-key-of-anyone-000", "", &status, "x-api-key");
  EXPECT_EQ(status, 401);
  EXPECT_EQ(s.log().find(kKeyA), std::string::npos) << "a key reached the log";
}

double metric_of(int port, const std::string& name) {
  httplib::Client c("127.0.0.1", port);
  auto r = c.Get("/metrics", {{"Authorization", "Bearer " + kKeyA}});
  if (!r) return -1;
  const size_t at = r->body.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atof(r->body.c_str() + at + name.size() + 2);
}

// The grammar compile cache is each tenant's own: a schema one tenant compiled is a compile
// (a miss) for the other, whose time cannot tell it was sent before.
TEST(TenantServe, GrammarCompileCacheIsEachTenantsOwn) {
  const std::string keys =
      file_with("tenants-grammar.keys", "alpha " + kKeyA + "\nbeta " + kKeyB + "\n");
  ServeProcess s(
      {"--model", kTinyModel, "--threads", "1", "--log-format", "none", "--api-key-file", keys},
      "tenant_serve_grammar");
  ASSERT_NE(s.port(), 0) << s.log();
  const auto constrained = [&](const std::string& key) {
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(120, 0);
    const json body = {{"prompt", "x"},
                       {"max_tokens", 2},
                       {"temperature", 0},
                       {"guided_regex", "[a-z]{1,9}-[0-9]{2,5}"}};
    auto r = c.Post("/v1/completions", {{"Authorization", "Bearer " + key}}, body.dump(),
                    "application/json");
    return r ? r->status : 0;
  };
  ASSERT_EQ(constrained(kKeyA), 200);
  ASSERT_EQ(constrained(kKeyA), 200);
  const double compiles = metric_of(s.port(), "invar_grammar_compiles_total");
  EXPECT_EQ(metric_of(s.port(), "invar_grammar_compile_cache_hits_total"), 1) << "the own hit";
  ASSERT_EQ(constrained(kKeyB), 200);
  EXPECT_EQ(metric_of(s.port(), "invar_grammar_compile_cache_hits_total"), 1)
      << "another tenant's grammar was a hit";
  EXPECT_EQ(metric_of(s.port(), "invar_grammar_compiles_total"), compiles + 1);
}

TEST(TenantKeys, FileMistakesAreRefusedWithTheLine) {
  const auto refused = [](const std::string& text, const std::string& why) {
    try {
      tenants_load("", file_with("bad.keys", text));
      ADD_FAILURE() << "accepted: " << text;
    } catch (const invar::Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused("a " + kKeyA + "\na " + kKeyB + "\n", "line 2: tenant a twice");
  refused("a " + kKeyA + "\nb " + kKeyA + "\n", "line 2: a key given twice");
  refused("a short\n", "line 1: a key is at least 16");
  refused("bad/name " + kKeyA + "\n", "line 1: a tenant name");
  refused("# nothing\n", "no key in it");
  EXPECT_THROW(tenants_load("", "/nonexistent/keys"), invar::Error);
  const auto t = tenants_load(kKeyA, file_with("ok.keys", kKeyB + "\n"));
  ASSERT_EQ(t.list.size(), 2u);
  EXPECT_EQ(t.list[0].name, "default");
  EXPECT_EQ(t.list[1].name, "key1");
  EXPECT_EQ(t.find("Bearer " + kKeyB), &t.list[1]);
  EXPECT_EQ(t.find("Bearer " + kKeyB + "x"), nullptr);
  EXPECT_EQ(t.find(kKeyB), nullptr) << "the whole header value, scheme included";
  // Namespaces cannot be joined by choosing a salt.
  const Tenant ab{"ab", "k", {}}, a{"a", "k", {}};
  EXPECT_NE(tenant_cache_salt(&ab, "c"), tenant_cache_salt(&a, "b:c"));
  EXPECT_NE(tenant_cache_salt(&a, "x"), tenant_cache_salt(&ab, "x"));
}

}  // namespace tenant_serve_test
