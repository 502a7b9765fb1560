// A deterministic fake OpenAI server for the probe's tests: tokens and top-20 logprobs are a
// function of a hash of the prompt, and it can misbehave on cache hits the way a real server
// might, so the tests can show that the probe detects it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace invar::probe_test {

enum class FakeMode {
  stable,          // a well-behaved server: hits change nothing
  ulp_on_hit,      // on a hit, one candidate's logprob moves by 1 ulp (float) at `position`
  reorder_on_hit,  // on a hit, two tied candidates at `position` swap places
  mixed_origin,    // like ulp_on_hit, but only on hits whose shared prefix another, shorter
                   // request of the same salt wrote first (the write-up's bug)
};

enum class FakeShape {
  openai,    // completions: legacy tokens/token_logprobs/top_logprobs objects; no ids
  llamacpp,  // completions and chat: logprobs.content[] with ids
};

struct FakeConfig {
  FakeMode mode = FakeMode::stable;
  FakeShape shape = FakeShape::openai;
  int position = 3;  // the generated position that misbehaves
  // mixed_origin: only a writer shorter than this many bytes poisons the shared prefix.
  size_t origin_threshold = SIZE_MAX;
  std::string fingerprint = "fp_fake";
};

class FakeServer {
 public:
  explicit FakeServer(FakeConfig cfg);
  ~FakeServer();
  // Listens on 127.0.0.1: `port` 0 picks a free one. Returns the port.
  int start(int port = 0);
  void stop();
  // Blocks serving (for the standalone executable).
  void serve_forever(int port);
  int requests() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

FakeMode fake_mode_parse(const std::string& s);

}  // namespace invar::probe_test
