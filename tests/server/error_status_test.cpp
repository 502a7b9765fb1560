// Only invar's own bugs may answer 500. This lists every place in the server and the engine
// that can produce one — an internal_error(), a literal 500, an ErrorKind::internal — and fails
// when one appears anywhere else, so a new path to a 500 is reviewed before it lands: input the
// client can fix must map to a 4xx (api_error_of, bad_request, ...).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <vector>

#include "server/api_error.h"

namespace error_status_test {

namespace {

namespace fs = std::filesystem;

// Code only: // comments are dropped (string literals are left alone; none of the patterns
// below appears in one).
std::string code_of(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  std::string line;
  while (std::getline(f, line)) {
    const size_t c = line.find("//");
    ss << (c == std::string::npos ? line : line.substr(0, c)) << "\n";
  }
  return ss.str();
}

int count(const std::string& text, const std::regex& re) {
  return int(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

TEST(ErrorStatus, FiveHundredsOnlyWhereReviewed) {
  const fs::path root = INVAR_SOURCE_DIR;
  const std::map<std::string, std::regex> patterns = {
      {"internal_error(", std::regex(R"(\binternal_error\s*\()")},
      {"500", std::regex(R"((status\s*=\s*500\b)|(\{\s*500\s*,))")},
      {"ErrorKind::internal", std::regex(R"(ErrorKind::internal\b)")}};
  // file → pattern → count, each with its reason.
  const std::map<std::string, std::map<std::string, int>> allowed = {
      // The declaration; the definition, its status, and api_error_of's ErrorKind::internal case.
      {"src/server/api_error.h", {{"internal_error(", 1}}},
      {"src/server/api_error.cpp",
       {{"internal_error(", 2}, {"500", 1}, {"ErrorKind::internal", 1}}},
      // An exception escaped a request handler: nothing the client sent is checked that late.
      {"src/server/http_server.cpp", {{"internal_error(", 1}}},
      // A chat answer that is not a JSON object, rewritten as a message: invar's own output.
      {"src/server/messages_front_end.cpp", {{"500", 1}}},
      // The transport's last guard around the router: the same case, one layer down.
      {"src/server/http_transport.cpp", {{"internal_error(", 1}, {"500", 1}}},
      // RequestEvent's default kind, a forward pass that threw (a bug or a broken machine), and
      // an exception other than EngineError from one chunk's sampling (a bug: a grammar's
      // run-time limit is made invalid_request in constraint.cpp), which fails that request only.
      {"src/engine/request.h", {{"ErrorKind::internal", 1}}},
      {"src/engine/engine.cpp", {{"ErrorKind::internal", 2}}},
      // The sampler chose a token the grammar's mask had set to -inf: a bug, never the input.
      {"src/engine/constraint.cpp", {{"ErrorKind::internal", 1}}},
  };
  int files = 0, sites = 0;
  std::vector<fs::path> sources = {root / "apps/invar/cmd_serve.cpp"};
  for (const char* dir : {"src/server", "src/engine"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.path().extension() == ".cpp" || e.path().extension() == ".h")
        sources.push_back(e.path());
  for (const fs::path& path : sources) {
    ++files;
    const std::string rel = fs::relative(path, root).string();
    const std::string code = code_of(path);
    for (const auto& [name, re] : patterns) {
      const int n = count(code, re);
      int want = 0;
      if (auto f = allowed.find(rel); f != allowed.end())
        if (auto p = f->second.find(name); p != f->second.end()) want = p->second;
      // Fewer is fine (a path to 500 removed); more is a new one to review.
      EXPECT_LE(n, want) << rel << ": " << n << " × " << name
                         << " — can this answer 500 for input the client could fix?";
      sites += n;
    }
  }
  EXPECT_GT(files, 15) << "the source tree was not found at " << root;
  EXPECT_GE(sites, 3) << "the patterns no longer find the known sites";
}

// A non-finite logit (damaged weights) is the model's failure, not the server's and not the
// client's: 502 with its own code.
TEST(ErrorStatus, NonFiniteLogitsAre502) {
  const invar::server::ApiError e =
      invar::server::api_error_of(invar::ErrorKind::nonfinite, "", "non-finite logit");
  EXPECT_EQ(e.status, 502);
  EXPECT_EQ(e.code, "nonfinite_logits");
  EXPECT_EQ(e.message, "non-finite logit");
}

}  // namespace

}  // namespace error_status_test
