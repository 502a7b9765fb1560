#include "bench_serve_load.h"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench_clock.h"
#include "core/error.h"

namespace invar::app {
namespace {

using json = nlohmann::json;

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const char* const kNouns[] = {
    "report",  "river",    "council",  "engine",   "harvest", "market",  "village", "bridge",
    "library", "station",  "budget",   "forest",   "museum",  "harbour", "school",  "factory",
    "garden",  "railway",  "bakery",   "hospital", "storm",   "archive", "orchard", "valley",
    "ledger",  "workshop", "festival", "canal",    "mill",    "county",  "survey",  "network"};
const char* const kVerbs[] = {"describes", "recorded", "expanded", "repaired", "measured",
                              "opened",    "delayed",  "funded",   "reviewed", "replaced",
                              "moved",     "counted",  "supplied", "closed",   "planned"};
const char* const kAdjectives[] = {"northern", "small",   "annual", "old",     "new",
                                   "eastern",  "busy",    "quiet",  "public",  "local",
                                   "wooden",   "central", "narrow", "seasonal"};
const char* const kLinks[] = {"after",  "before", "while", "because", "although",
                              "unless", "since",  "when",  "until",   "as"};

template <size_t N>
const char* pick(const char* const (&words)[N], uint64_t& s) {
  return words[splitmix64(s) % N];
}

std::string sentence(uint64_t& s) {
  std::string t = std::string("The ") + pick(kAdjectives, s) + " " + pick(kNouns, s) + " " +
                  pick(kVerbs, s) + " the " + pick(kNouns, s);
  switch (splitmix64(s) % 4) {
    case 0:
      t += " in " + std::to_string(1890 + splitmix64(s) % 130);
      break;
    case 1:
      t += std::string(" ") + pick(kLinks, s) + " the " + pick(kAdjectives, s) + " " +
           pick(kNouns, s) + " " + pick(kVerbs, s) + " " + std::to_string(2 + splitmix64(s) % 97) +
           " " + pick(kNouns, s) + "s";
      break;
    case 2:
      t += std::string(", ") + pick(kLinks, s) + " the " + pick(kNouns, s) + " was " +
           pick(kAdjectives, s);
      break;
    default:
      break;
  }
  return t + ".";
}

int64_t words_in(const std::string& s) {
  return std::count(s.begin(), s.end(), ' ') + 1;
}

RequestResult request_send(int port, const LoadRequest& req) {
  RequestResult r;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(600, 0);
  cli.set_write_timeout(60, 0);
  SseRead sse;
  sse.result = &r;
  sse.clock = wall_seconds;
  httplib::Request hr;
  hr.method = "POST";
  hr.path = req.path;
  hr.body = req.body;
  hr.set_header("Content-Type", "application/json");
  hr.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    sse.feed(data, len);
    return true;
  };
  sse.start = wall_seconds();
  auto res = cli.send(hr);
  sse.finish();
  if (!res) {
    r.error = "connection error " + httplib::to_string(res.error());
  } else if (res->status != 200) {
    r.error = "HTTP " + std::to_string(res->status) + " " + sse.pending.substr(0, 200);
  } else if (!sse.done) {
    r.error = "stream ended without data: [DONE]";
  } else if (r.ttft_s < 0) {
    r.error = "stream carried no generated text";
  } else {
    r.ok = true;
  }
  return r;
}

}  // namespace

std::string document_prose(uint64_t seed, int words) {
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  std::string doc = "Records of the " + std::string(pick(kAdjectives, s)) + " " + pick(kNouns, s) +
                    ", volume " + std::to_string(seed) + ".\n";
  int64_t n = words_in(doc);
  for (int section = 1; n < words; ++section) {
    doc += "\nSection " + std::to_string(section) + ": the " + pick(kNouns, s) + ".\n";
    const int sentences = 3 + int(splitmix64(s) % 5);
    for (int k = 0; k < sentences && n < words; ++k) {
      const std::string t = sentence(s);
      doc += (k ? " " : "") + t;
      n += words_in(t);
    }
    doc += "\n";
  }
  return doc;
}

int64_t tokens_count(int port, const std::string& text) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(60, 0);
  auto res = cli.Post("/tokenize", json{{"content", text}}.dump(), "application/json");
  if (!res || res->status != 200)
    throw Error("POST /tokenize on port " + std::to_string(port) + " failed: " +
                (res ? "HTTP " + std::to_string(res->status) + " " + res->body.substr(0, 200)
                     : httplib::to_string(res.error())));
  const json j = json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("tokens") || !j["tokens"].is_array())
    throw Error("POST /tokenize answered without a \"tokens\" array");
  return int64_t(j["tokens"].size());
}

std::string document_sized(int port, uint64_t seed, int64_t min_tokens, int64_t max_tokens) {
  const int64_t target = (min_tokens + max_tokens) / 2;
  int words = int(std::max<int64_t>(8, target / 2));
  std::string doc;
  for (int attempt = 0; attempt < 6; ++attempt) {
    doc = document_prose(seed, words);
    const int64_t n = tokens_count(port, doc);
    if (n >= min_tokens && n < max_tokens) return doc;
    words = std::max(8, int(std::lround(double(words) * double(target) / double(n))));
  }
  throw Error("no document of " + std::to_string(min_tokens) + " to " + std::to_string(max_tokens) +
              " tokens after 6 tries (last " + std::to_string(tokens_count(port, doc)) +
              "); widen the range");
}

std::vector<LoadRequest> workload_build(const std::vector<std::string>& documents,
                                        const WorkloadSpec& spec) {
  static const char* const kAsks[] = {"Summarise section", "What was measured in section",
                                      "Who funded the work in section",
                                      "List the places named in section"};
  std::vector<LoadRequest> out;
  const int d_count = int(documents.size());
  for (int i = 0; i < d_count * spec.questions; ++i) {
    const int d = i % d_count, q = i / d_count;
    const std::string question = "Question " + std::to_string(q + 1) + ": " + kAsks[(q + d) % 4] +
                                 " " + std::to_string(1 + (q * 3 + d) % 5) + ", in one paragraph.";
    const bool greedy = spec.sampling == "greedy" || (spec.sampling == "mixed" && q % 2 == 0);
    json body = {{"max_tokens", spec.max_tokens},
                 {"ignore_eos", true},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}},
                 {"cache_prompt", true}};
    if (greedy) {
      body["temperature"] = 0;
    } else {
      body["temperature"] = 0.8;
      body["top_p"] = 0.95;
      body["seed"] = 1000 + i;
    }
    if (spec.top_logprobs > 0 && spec.chat) {
      body["logprobs"] = true;
      body["top_logprobs"] = spec.top_logprobs;
    } else if (spec.top_logprobs > 0) {
      body["logprobs"] = spec.top_logprobs;
    }
    const std::string text = documents[size_t(d)] + "\n" + question;
    if (spec.chat) {
      body["messages"] = json::array({{{"role", "user"}, {"content", text}}});
      out.push_back({"/v1/chat/completions", body.dump()});
    } else {
      body["prompt"] = text + "\nAnswer:";
      out.push_back({"/v1/completions", body.dump()});
    }
  }
  return out;
}

namespace {

// One line per token of a chunk's logprobs: chat's {content: [{token, logprob, top_logprobs}]}
// or completions' parallel arrays {tokens, token_logprobs, top_logprobs}.
void logprobs_append(const json& lp, std::string& lines) {
  if (!lp.is_object()) return;
  if (lp.contains("content") && lp["content"].is_array()) {
    for (const json& t : lp["content"]) lines += t.dump() + "\n";
    return;
  }
  const json none;
  const auto at = [&](const char* key, size_t k) -> const json& {
    return lp.contains(key) && lp[key].is_array() && k < lp[key].size() ? lp[key][k] : none;
  };
  if (!lp.contains("tokens") || !lp["tokens"].is_array()) return;
  for (size_t k = 0; k < lp["tokens"].size(); ++k)
    lines += json::array({at("tokens", k), at("token_logprobs", k), at("top_logprobs", k)}).dump() +
             "\n";
}

}  // namespace

void SseRead::feed(const char* data, size_t len) {
  pending.append(data, len);
  for (size_t end; (end = pending.find("\n\n")) != std::string::npos; pending.erase(0, end + 2)) {
    const std::string event = pending.substr(0, end);
    if (event.rfind("data: ", 0) != 0) continue;
    const std::string payload = event.substr(6);
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    const json j = json::parse(payload, nullptr, false);
    if (!j.is_object()) continue;
    bool text = false;
    if (j.contains("choices") && j["choices"].is_array())
      for (const json& c : j["choices"]) {
        const json* t = nullptr;
        if (c.contains("text")) t = &c["text"];
        if (c.contains("delta") && c["delta"].is_object() && c["delta"].contains("content"))
          t = &c["delta"]["content"];
        if (t && t->is_string() && !t->get<std::string>().empty()) {
          text = true;
          generated_text += t->get<std::string>();
        }
        // A reasoning parser (llama-server's default, invar's for thinking templates) streams
        // the text before </think> as reasoning_content: generated all the same. A random-weight
        // model never closes its <think>, so counting content only called those streams empty.
        if (c.contains("delta") && c["delta"].is_object() &&
            c["delta"].contains("reasoning_content")) {
          const json& rc = c["delta"]["reasoning_content"];
          if (rc.is_string() && !rc.get<std::string>().empty()) {
            text = true;
            generated_text += rc.get<std::string>();
          }
        }
        if (c.contains("logprobs")) logprobs_append(c["logprobs"], logprob_lines);
      }
    if (text) {
      const double t = clock() - start;
      if (result->ttft_s < 0) result->ttft_s = t;
      if (last_text >= 0) result->gaps_s.push_back(t - last_text);
      last_text = t;
      text_chunks++;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const json& u = j["usage"];
      usage_seen = true;
      result->generated = u.value("completion_tokens", int64_t(0));
      result->prompt = u.value("prompt_tokens", int64_t(0));
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object())
        result->cached = u["prompt_tokens_details"].value("cached_tokens", int64_t(0));
    }
    if (j.contains("timings") && j["timings"].is_object()) {
      const json& t = j["timings"];
      predicted_n = t.value("predicted_n", predicted_n);
      prompt_n = t.value("prompt_n", prompt_n);
      cache_n = t.value("cache_n", cache_n);
    }
  }
}

void SseRead::finish() {
  result->output = generated_text + "\n" + logprob_lines;
  // llama-server reports the cache in timings (cache_n cached, prompt_n computed); its usage may
  // lack prompt_tokens_details.
  if (cache_n >= 0 && prompt_n >= 0 && result->cached == 0) {
    result->cached = cache_n;
    result->prompt = prompt_n + cache_n;
  }
  if (!usage_seen) result->generated = predicted_n >= 0 ? predicted_n : text_chunks;
}

RoundResult load_closed_run(int port, const std::vector<LoadRequest>& requests, int concurrency) {
  RoundResult r;
  r.requests.resize(requests.size());
  std::atomic<size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < concurrency; ++c)
    clients.emplace_back([&] {
      for (size_t i = next++; i < requests.size(); i = next++)
        r.requests[i] = request_send(port, requests[i]);
    });
  for (auto& t : clients) t.join();
  r.wall_s = seconds_since(t0);
  return r;
}

RoundResult load_open_run(int port, const std::vector<LoadRequest>& requests, double rate) {
  RoundResult r;
  r.requests.resize(requests.size());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> senders;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::duration<double>(double(i) / rate)));
    senders.emplace_back([&, i] { r.requests[i] = request_send(port, requests[i]); });
  }
  for (auto& t : senders) t.join();
  r.wall_s = seconds_since(t0);
  return r;
}

RoundSummary round_summarize(const RoundResult& r) {
  RoundSummary s;
  std::vector<double> ttft, gaps;
  for (const RequestResult& q : r.requests) {
    if (!q.ok) {
      s.errors++;
      if (s.first_error.empty()) s.first_error = q.error;
      // Tokens a failed stream delivered before it broke were computed and sent all the same
      // (llama-server cuts some random-weight streams at their last chunk: its output parser
      // throws on text that ends inside a UTF-8 character); they count, the error is reported.
      if (q.ttft_s >= 0) {
        ttft.push_back(q.ttft_s);
        gaps.insert(gaps.end(), q.gaps_s.begin(), q.gaps_s.end());
        s.generated += q.generated;
      }
      continue;
    }
    ttft.push_back(q.ttft_s);
    gaps.insert(gaps.end(), q.gaps_s.begin(), q.gaps_s.end());
    s.generated += q.generated;
    s.cached += q.cached;
    s.computed += q.prompt - q.cached;
  }
  const double wall = std::max(r.wall_s, 1e-9);
  s.generated_tps = double(s.generated) / wall;
  s.computed_tps = double(s.computed) / wall;
  s.cached_tps = double(s.cached) / wall;
  s.ttft_p50_s = percentile(ttft, 0.5);
  s.ttft_p99_s = percentile(ttft, 0.99);
  s.itl_p50_s = percentile(gaps, 0.5);
  s.itl_p99_s = percentile(gaps, 0.99);
  return s;
}

RoundSummary rounds_median(const std::vector<RoundSummary>& rounds) {
  RoundSummary m;
  const auto median = [&](double RoundSummary::*f) {
    std::vector<double> v;
    for (const auto& r : rounds) v.push_back(r.*f);
    return percentile(v, 0.5);
  };
  m.generated_tps = median(&RoundSummary::generated_tps);
  m.computed_tps = median(&RoundSummary::computed_tps);
  m.cached_tps = median(&RoundSummary::cached_tps);
  m.ttft_p50_s = median(&RoundSummary::ttft_p50_s);
  m.ttft_p99_s = median(&RoundSummary::ttft_p99_s);
  m.itl_p50_s = median(&RoundSummary::itl_p50_s);
  m.itl_p99_s = median(&RoundSummary::itl_p99_s);
  for (const auto& r : rounds) {
    m.generated += r.generated;
    m.computed += r.computed;
    m.cached += r.cached;
    m.errors += r.errors;
    if (m.first_error.empty()) m.first_error = r.first_error;
  }
  return m;
}

}  // namespace invar::app
