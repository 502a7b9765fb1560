#include "server/completion_choices.h"

#include <algorithm>
#include <optional>
#include <random>

#include "core/error.h"

namespace invar::server {
namespace {

// 63 random bits: a seed the client can send back as a JSON integer.
uint64_t random_seed() {
  static thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^
                                          std::random_device{}()};
  return gen() >> 1;
}

std::string random_request_id() {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(random_seed()));
  return buf;
}

// The events of an SSE text ("data: …\n\n" and ": comment\n\n"), without their separators.
std::vector<std::string> sse_split(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find("\n\n", at);
    if (end == std::string::npos) end = text.size();
    out.push_back(text.substr(at, end - at));
    at = end + 2;
  }
  return out;
}

// `r` without its prompt (text, ids, chat messages): what the choices after the first need.
// Tools stay: the output parser reads them.
ApiRequest without_prompt(ApiRequest&& r, ApiRequest* with_prompt) {
  ApiRequest out;
  std::optional<std::string> text = std::move(r.prompt_text);
  std::vector<int32_t> ids = std::move(r.prompt_ids);
  nlohmann::ordered_json chat = std::move(r.chat.request);
  // The images (their URLs and bytes: megabytes) are the prompt's too.
  std::vector<ChatImage> images = std::move(r.chat.images);
  auto files = std::move(r.image_files);
  r.chat.images.clear();
  r.image_files.reset();
  r.prompt_text.reset();
  r.prompt_ids.clear();
  r.chat.request = nlohmann::ordered_json::object();
  if (chat.is_object() && chat.contains("tools")) r.chat.request["tools"] = chat["tools"];
  out = r;
  r.prompt_text = std::move(text);
  r.prompt_ids = std::move(ids);
  r.chat.request = std::move(chat);
  r.chat.images = std::move(images);
  r.image_files = std::move(files);
  *with_prompt = std::move(r);
  return out;
}

}  // namespace

CompletionChoices::CompletionChoices(Backend& backend, ApiRequest req, ServerMetrics& metrics,
                                     const RequestBudget& budget, const ImageBounds& images)
    : backend_(backend), metrics_(metrics) {
  if (!req.has_seed) req.sampling.seed = random_seed();
  if (req.request_id.empty()) req.request_id = random_request_id();
  std::vector<CompletionPrompt> more = std::move(req.more_prompts);
  req.more_prompts.clear();
  n_prompts_ = 1 + int64_t(more.size());
  ApiRequest full;
  req_ = without_prompt(std::move(req), &full);
  // Choice i of each prompt samples with seed + i: any choice is one request with n = 1 and
  // that seed (and that prompt).
  auto choice = [this](ApiRequest one, int64_t i) {
    one.n = 1;
    one.sampling.seed = req_.sampling.seed + uint64_t(i);
    one.has_seed = true;
    // Several choices: usage is summed here, so the choices send none of their own.
    if (req_.n * n_prompts_ > 1) one.include_usage = false;
    return one;
  };
  // Prompt-major: the n choices of prompt p are jobs p·n .. p·n + n − 1; the first of them
  // renders and tokenises the prompt and computes its prompt logprobs, the others share them.
  for (int64_t p = 0; p < n_prompts_; ++p) {
    if (p > 0) {
      full = req_;
      full.prompt_text = std::move(more[size_t(p - 1)].text);
      full.prompt_ids = std::move(more[size_t(p - 1)].ids);
    }
    JobPrompt prompt = job_prompt_make(backend, full, images);
    image_pool_cpu_s_ += prompt.image_pool_cpu_s;
    full.chat.images.clear();  // encoded into prompt.images: the bytes go
    full.image_files.reset();
    const JobPrompt again = prompt;  // the later choices' (tokens and grammar are shared, const)
    jobs_.push_back(std::make_unique<CompletionJob>(backend, choice(std::move(full), 0), metrics,
                                                    std::move(prompt)));
    const CompletionJob* first = jobs_.back().get();
    for (int64_t i = 1; i < req_.n; ++i)
      jobs_.push_back(
          std::make_unique<CompletionJob>(backend, choice(req_, i), metrics, again, first));
  }
  budget_check(budget);
  whole_.resize(jobs_.size());
  first_sent_.assign(jobs_.size(), false);
}

CompletionChoices::~CompletionChoices() {
  jobs_.clear();  // cancels what still runs before the slot is given back
  if (admitted_) metrics_.inflight.fetch_sub(1);
  if (client_slot_) metrics_.inflight_by_client.release(req_.client_key);
}

void CompletionChoices::budget_check(const RequestBudget& budget) const {
  // Over every prompt: n × Σ (prompt + max_tokens), n × Σ (max_tokens × top + prompt × k).
  const int64_t n = req_.n, m = jobs_.front()->max_tokens();
  int64_t p = 0, prompt_lp = 0;
  const int64_t prompt_k = std::max<int64_t>(jobs_.front()->prompt_logprobs_k(), 0);
  for (int64_t q = 0; q < n_prompts_; ++q) {
    const int64_t size = jobs_[size_t(q * n)]->prompt_size();
    p += size;
    prompt_lp += size * prompt_k;
  }
  const bool chat = req_.endpoint == Endpoint::chat;
  const std::string prompts = n_prompts_ > 1 ? std::to_string(n_prompts_) + " prompts: " : "";
  const int64_t tokens = n * (p + n_prompts_ * m);
  if (tokens > budget.tokens)
    throw bad_request(
        n > 1 ? "n" : (n_prompts_ > 1 ? "prompt" : "max_tokens"),
        prompts + "n × (prompt + max_tokens) = " + std::to_string(n) + " × (" + std::to_string(p) +
            " + " + std::to_string(n_prompts_ * m) + ") = " + std::to_string(tokens) +
            " tokens is over this server's per-request limit of " + std::to_string(budget.tokens) +
            " (--max-request-tokens): lower n or max_tokens" +
            (n_prompts_ > 1 ? ", or send fewer prompts" : ""));
  const int64_t top = req_.logprobs ? req_.top_logprobs : 0;
  const int64_t logprobs = n * (n_prompts_ * m * top + prompt_lp);
  if (logprobs > budget.logprobs)
    throw bad_request(top > 0 ? (chat ? "top_logprobs" : "logprobs") : "prompt_logprobs",
                      prompts + "n × (max_tokens × top logprobs + prompt × prompt logprobs) = " +
                          std::to_string(n) + " × (" + std::to_string(n_prompts_ * m) + " × " +
                          std::to_string(top) + " + " + std::to_string(p) + " × " +
                          std::to_string(prompt_k) + ") = " + std::to_string(logprobs) +
                          " logprob candidates is over this server's per-request limit of " +
                          std::to_string(budget.logprobs) +
                          " (--max-request-logprobs): lower n, max_tokens or the logprobs asked");
}

void CompletionChoices::start(int64_t queue_limit, int64_t client_limit,
                              std::function<void()> notify) {
  // The client's own cap first: a client that floods is refused while the server still has
  // room for the others (a cap at or above the server's never binds).
  if (client_limit < queue_limit) {
    if (!metrics_.inflight_by_client.acquire(req_.client_key, client_limit)) {
      ++metrics_.client_queue_refusals;
      throw overloaded("this client already has " + std::to_string(client_limit) +
                       " requests in flight, its limit (--client-queue-limit): retry when one "
                       "has finished; other clients are still served");
    }
    client_slot_ = true;
  }
  if (metrics_.inflight.fetch_add(1) >= queue_limit) {
    metrics_.inflight.fetch_sub(1);
    throw overloaded("server is at its queue limit of " + std::to_string(queue_limit) +
                     " requests in flight: retry later");
  }
  admitted_ = true;
  std::vector<GenerationRequest> reqs;
  std::vector<EventSink> sinks;
  for (auto& j : jobs_) {
    auto [g, sink] = j->engine_request(notify);
    reqs.push_back(std::move(g));
    sinks.push_back(std::move(sink));
  }
  std::vector<RequestId> ids;
  try {
    ids = backend_.submit_group(std::move(reqs), std::move(sinks));
  } catch (const EngineError& e) {
    throw api_error_of(e.kind(), e.param(), e.what());
  } catch (const Error& e) {
    throw bad_request("", e.what());  // a refusal without a kind is about the request
  }
  for (size_t i = 0; i < jobs_.size(); ++i) jobs_[i]->submitted(ids[i]);
}

std::string CompletionChoices::id() const {
  return (req_.endpoint == Endpoint::chat ? "chatcmpl-" : "cmpl-") + req_.request_id;
}

JobStats CompletionChoices::stats() const {
  JobStats total = jobs_[0]->stats();
  Usage& u = total.usage;
  u.prompt_tokens = u.cached_tokens = 0;
  u.completion_tokens = u.draft_tokens = u.accepted_draft_tokens = 0;
  for (size_t i = 0; i < jobs_.size(); ++i) {
    const JobStats s = jobs_[i]->stats();
    if (i % size_t(req_.n) == 0) {  // a prompt counts once, by its first choice
      u.prompt_tokens += s.usage.prompt_tokens;
      u.cached_tokens += s.usage.cached_tokens;
    }
    u.completion_tokens += s.usage.completion_tokens;
    u.draft_tokens += s.usage.draft_tokens;
    u.accepted_draft_tokens += s.usage.accepted_draft_tokens;
    if (s.ttft_s >= 0 && (total.ttft_s < 0 || s.ttft_s < total.ttft_s)) total.ttft_s = s.ttft_s;
    total.duration_s = std::max(total.duration_s, s.duration_s);
  }
  return total;
}

bool CompletionChoices::ready() {
  for (auto& j : jobs_)
    if (!j->stream_done() && j->ready()) return true;
  return false;
}

void CompletionChoices::cancel_by_client() {
  for (auto& j : jobs_) j->cancel_by_client();
}

std::optional<std::pair<int, std::string>> CompletionChoices::poll_whole() {
  for (size_t i = 0; i < jobs_.size(); ++i) {
    if (!whole_[i]) whole_[i] = jobs_[i]->poll_whole();
    if (whole_[i] && whole_[i]->first != 200) {
      cancel_by_client();  // the request has failed: the other choices are not wanted
      return whole_[i];
    }
  }
  for (auto& w : whole_)
    if (!w) return std::nullopt;
  if (jobs_.size() == 1) return whole_[0];
  json out = json::parse(whole_[0]->second);
  Usage u = usage_from_json(out["usage"]);
  u.prompt_tokens = u.cached_tokens = 0;
  u.completion_tokens = u.draft_tokens = u.accepted_draft_tokens = 0;
  json choices = json::array();
  for (size_t i = 0; i < whole_.size(); ++i) {
    json one = json::parse(whole_[i]->second);
    const Usage ui = usage_from_json(one["usage"]);
    if (i % size_t(req_.n) == 0) {  // a prompt counts once, by its first choice
      u.prompt_tokens += ui.prompt_tokens;
      u.cached_tokens += ui.cached_tokens;
    }
    u.completion_tokens += ui.completion_tokens;
    u.draft_tokens += ui.draft_tokens;
    u.accepted_draft_tokens += ui.accepted_draft_tokens;
    for (auto& c : one["choices"]) {
      c["index"] = int64_t(i);
      choices.push_back(std::move(c));
    }
  }
  out["choices"] = std::move(choices);
  out["usage"] = usage_json(u);
  return std::make_pair(200, json_text(out));
}

// One choice's chunk as the client gets it: its index, the shared envelope, and (first chunk
// only) the prompt logprobs. A chunk that needs none of that passes through unparsed.
std::string CompletionChoices::rewrite_chunk(size_t choice, const std::string& data) {
  bool first = !first_sent_[choice];
  bool plp = first && req_.prompt_logprobs.has_value();
  if (jobs_.size() == 1 && !plp && !envelope_.is_null()) return data;
  json c = json::parse(data);
  if (c.contains("error") || !c.contains("choices")) return data;
  if (envelope_.is_null()) envelope_ = c;
  if (c["choices"].empty()) return data;  // a usage chunk (n = 1 only)
  first_sent_[choice] = true;
  c["id"] = envelope_["id"];
  c["created"] = envelope_["created"];
  // Several choices: the request's usage so far, summed as the last chunk sums it.
  if (jobs_.size() > 1 && req_.include_usage && req_.continuous_usage)
    c["usage"] = usage_json(stats().usage);
  for (auto& ch : c["choices"]) {
    ch["index"] = int64_t(choice);
    if (plp) ch["prompt_logprobs"] = jobs_[choice]->prompt_logprobs_value();
  }
  return json_text(c);
}

std::string CompletionChoices::usage_chunk() {
  json c = envelope_;
  c["choices"] = json::array();
  c["usage"] = usage_json(stats().usage);
  return sse_event(c);
}

std::string CompletionChoices::stream_next() {
  if (done_) return "";
  std::string out;
  for (size_t i = 0; i < jobs_.size() && !done_; ++i) {
    CompletionJob& j = *jobs_[i];
    if (j.stream_done() || !j.ready()) continue;
    for (const std::string& ev : sse_split(j.stream_next(std::chrono::milliseconds(0)))) {
      if (ev.rfind("data: ", 0) != 0 || ev == "data: [DONE]") continue;
      std::string data = rewrite_chunk(i, ev.substr(6));
      out += "data: " + data + "\n\n";
      if (data.rfind("{\"error\"", 0) == 0) {
        cancel_by_client();  // the request has failed: the other choices are not wanted
        done_ = true;
        break;
      }
    }
  }
  if (!done_) {
    done_ = std::all_of(jobs_.begin(), jobs_.end(), [](auto& j) { return j->stream_done(); });
    if (done_ && jobs_.size() > 1 && req_.include_usage && !envelope_.is_null())
      out += usage_chunk();
  }
  if (done_) out += "data: [DONE]\n\n";
  return out.empty() ? ": keep-alive\n\n" : out;
}

}  // namespace invar::server
