#include "fake_server.h"

#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <vector>

namespace invar::probe_test {
namespace {

using json = nlohmann::ordered_json;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hash_str(const std::string& s) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct Cand {
  int64_t id;
  float logprob;
};

// [k] candidates at `pos`, value descending then id ascending. Candidates 5 and 6 always tie.
std::vector<Cand> candidates(uint64_t prompt_hash, int pos, int k) {
  std::vector<Cand> c;
  uint64_t s = mix(prompt_hash ^ (uint64_t(pos) * 0x2545f4914f6cdd1dull));
  float lp = -0.05f - float(s % 1000) / 4000.0f;
  int64_t base = int64_t(s % 5000);
  for (int i = 0; i < k; i++) {
    if (i == 6) {
      c.push_back({c.back().id + 1, c.back().logprob});  // a tie, ordered by id
    } else {
      c.push_back({base + 17 * i + int64_t(mix(s + i) % 13), lp});
    }
    lp -= 0.25f + float(mix(s ^ uint64_t(i)) % 100) / 400.0f;
  }
  return c;
}

std::string tok_text(int64_t id) {
  return " w" + std::to_string(id);
}

}  // namespace

FakeMode fake_mode_parse(const std::string& s) {
  if (s == "stable") return FakeMode::stable;
  if (s == "ulp") return FakeMode::ulp_on_hit;
  if (s == "reorder") return FakeMode::reorder_on_hit;
  if (s == "mixed") return FakeMode::mixed_origin;
  throw std::runtime_error("unknown fake mode " + s);
}

struct FakeServer::Impl {
  FakeConfig cfg;
  httplib::Server svr;
  std::thread th;
  mutable std::mutex mu;
  int requests = 0;
  // Per salt: prompts seen, and for each prompt whether its cached prefix is poisoned.
  std::map<std::string, std::map<std::string, bool>> seen;

  json respond(const json& req, bool chat) {
    std::string prompt;
    if (chat) {
      for (const auto& m : req.at("messages")) prompt += m.at("content").get<std::string>() + "\n";
    } else {
      prompt = req.at("prompt").get<std::string>();
    }
    const std::string salt = req.value("cache_salt", "");
    const int max_tokens = req.value("max_tokens", 16);
    const int k = chat ? req.value("top_logprobs", 0) : req.value("logprobs", 0);
    bool hit = false, poisoned = false;
    {
      std::lock_guard<std::mutex> lk(mu);
      requests++;
      auto& salt_seen = seen[salt];
      auto it = salt_seen.find(prompt);
      if (it != salt_seen.end()) {
        hit = true;
        poisoned = it->second;
      } else {
        // mixed_origin: a different, shorter earlier prompt on the same document (same first
        // 200 bytes) wrote the shared blocks; this prompt's repeats read them back.
        bool p = false;
        for (const auto& [other, _] : salt_seen)
          if (other.compare(0, 200, prompt, 0, 200) == 0 && other.size() < cfg.origin_threshold)
            p = true;
        salt_seen[prompt] = p;
      }
    }
    const bool misbehave =
        hit && (cfg.mode == FakeMode::ulp_on_hit || cfg.mode == FakeMode::reorder_on_hit ||
                (cfg.mode == FakeMode::mixed_origin && poisoned));
    const uint64_t h = hash_str(prompt);
    json content = json::array();
    json tokens = json::array(), token_lps = json::array(), tops = json::array();
    std::string text;
    for (int pos = 0; pos < max_tokens; pos++) {
      std::vector<Cand> c = candidates(h, pos, std::max(k, 8));
      if (misbehave && pos == cfg.position) {
        if (cfg.mode == FakeMode::reorder_on_hit) {
          std::swap(c[5], c[6]);
        } else {
          c[4].logprob = std::nextafter(c[4].logprob, 0.0f);
        }
      }
      c.resize(size_t(k));
      const Cand chosen = candidates(h, pos, 1)[0];
      text += tok_text(chosen.id);
      auto entry = [&](const Cand& x) {
        json e = json::object();
        if (cfg.shape == FakeShape::llamacpp) e["id"] = x.id;
        e["token"] = tok_text(x.id);
        e["logprob"] = double(x.logprob);
        e["bytes"] = json::array();
        for (unsigned char b : tok_text(x.id)) e["bytes"].push_back(int(b));
        return e;
      };
      json e = entry(chosen);
      json top = json::array();
      for (const auto& x : c) top.push_back(entry(x));
      e["top_logprobs"] = top;
      content.push_back(e);
      tokens.push_back(tok_text(chosen.id));
      token_lps.push_back(double(chosen.logprob));
      json d = json::object();
      for (const auto& x : c) d[tok_text(x.id)] = double(x.logprob);
      tops.push_back(d);
    }
    int64_t prompt_tokens = 1;
    for (char ch : prompt)
      if (ch == ' ') prompt_tokens++;
    json choice = json::object();
    choice["index"] = 0;
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", text}};
      choice["logprobs"] = {{"content", content}};
    } else {
      choice["text"] = text;
      if (cfg.shape == FakeShape::llamacpp) {
        choice["logprobs"] = {{"content", content}};
      } else {
        choice["logprobs"] = {{"tokens", tokens},
                              {"token_logprobs", token_lps},
                              {"top_logprobs", tops},
                              {"text_offset", json::array()}};
      }
    }
    choice["finish_reason"] = "length";
    json out = json::object();
    out["id"] = "cmpl-fake";
    out["object"] = chat ? "chat.completion" : "text_completion";
    out["model"] = req.value("model", "fake-model");
    out["system_fingerprint"] = cfg.fingerprint;
    out["choices"] = json::array({choice});
    out["usage"] = {{"prompt_tokens", prompt_tokens},
                    {"completion_tokens", max_tokens},
                    {"total_tokens", prompt_tokens + max_tokens},
                    {"prompt_tokens_details", {{"cached_tokens", hit ? prompt_tokens - 1 : 0}}}};
    return out;
  }

  void routes() {
    svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}", "application/json");
    });
    svr.Get("/v1/models", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(
          "{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\",\"object\":\"model\"}]}",
          "application/json");
    });
    auto handler = [this](bool chat) {
      return [this, chat](const httplib::Request& rq, httplib::Response& res) {
        try {
          res.set_content(respond(json::parse(rq.body), chat).dump(), "application/json");
        } catch (const std::exception& e) {
          res.status = 400;
          res.set_content(json{{"error", {{"message", e.what()}}}}.dump(), "application/json");
        }
      };
    };
    svr.Post("/v1/chat/completions", handler(true));
    svr.Post("/v1/completions", handler(false));
  }
};

FakeServer::FakeServer(FakeConfig cfg) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->routes();
}

FakeServer::~FakeServer() {
  stop();
}

int FakeServer::start(int port) {
  if (port == 0) {
    port = impl_->svr.bind_to_any_port("127.0.0.1");
  } else if (!impl_->svr.bind_to_port("127.0.0.1", port)) {
    throw std::runtime_error("cannot bind port " + std::to_string(port));
  }
  impl_->th = std::thread([this] { impl_->svr.listen_after_bind(); });
  while (!impl_->svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return port;
}

void FakeServer::serve_forever(int port) {
  if (!impl_->svr.bind_to_port("127.0.0.1", port))
    throw std::runtime_error("cannot bind port " + std::to_string(port));
  impl_->svr.listen_after_bind();
}

void FakeServer::stop() {
  if (impl_->th.joinable()) {
    impl_->svr.stop();
    impl_->th.join();
  }
}

int FakeServer::requests() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->requests;
}

}  // namespace invar::probe_test
