#include "bench_grammar_peer.h"

#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "fleet_processes.h"
#include "probe/server_process.h"

namespace invar::app {

struct GrammarPeer::Impl {
  std::filesystem::path dir;
  ChildProcess proc;
  int port = 0;
};

GrammarPeer::GrammarPeer(const std::string& path, const std::string& model, int threads)
    : impl_(std::make_unique<Impl>()) {
  if (!std::filesystem::is_regular_file(path))
    throw Error("bench grammar: --peer llama-server=" + path + ": no such file");
  impl_->dir = std::filesystem::temp_directory_path() /
               ("invar-bench-grammar-" + std::to_string(::getpid()));
  std::filesystem::create_directories(impl_->dir);
  impl_->port = probe::port_free_find();
  // One slot, no warm-up request, the prompt cache on (invar's rounds prefill the same prompt
  // too: only decode is compared).
  impl_->proc = ChildProcess({path, "-m", model, "-t", std::to_string(threads), "-tb",
                              std::to_string(threads), "-c", "4096", "-np", "1", "--host",
                              "127.0.0.1", "--port", std::to_string(impl_->port), "--no-warmup"},
                             impl_->dir / "llama-server.log");
  if (!health_wait(impl_->proc, impl_->port, 300)) {
    const std::string log = impl_->proc.log_text();
    throw Error("bench grammar: llama-server did not become healthy; its log ends:\n" +
                log.substr(log.size() > 3000 ? log.size() - 3000 : 0));
  }
}

GrammarPeer::~GrammarPeer() {
  impl_->proc = ChildProcess();  // stops it
  std::error_code ec;
  std::filesystem::remove_all(impl_->dir, ec);
}

GrammarPeer::Decoded GrammarPeer::decode(const std::string& prompt, int64_t n,
                                         const std::string& json_schema) {
  nlohmann::json body = {{"prompt", prompt}, {"n_predict", n},  {"temperature", 0},    {"top_k", 1},
                         {"seed", 1},        {"stream", false}, {"cache_prompt", true}};
  if (json_schema.empty())
    body["ignore_eos"] = true;
  else
    body["json_schema"] = nlohmann::json::parse(json_schema);
  httplib::Client c("127.0.0.1", impl_->port);
  c.set_read_timeout(600, 0);
  auto r = c.Post("/completion", body.dump(), "application/json");
  if (!r) throw Error("bench grammar: llama-server: no answer to /completion");
  if (r->status != 200)
    throw Error("llama-server answered " + std::to_string(r->status) + ": " +
                r->body.substr(0, 200));
  const auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_discarded() || !j.contains("timings"))
    throw Error("bench grammar: llama-server's answer has no timings: " + r->body.substr(0, 500));
  Decoded d;
  d.tok_s = j["timings"].value("predicted_per_second", 0.0);
  d.tokens = j["timings"].value("predicted_n", int64_t{0});
  return d;
}

}  // namespace invar::app
