#include "server/http_server.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "server/api_error.h"
#include "server/client_limits.h"
#include "server/completion_choices.h"
#include "server/cors.h"
#include "server/front_end.h"
#include "server/http_transport.h"
#include "server/memory_return.h"
#include "server/messages_count_tokens.h"
#include "server/output_constraint.h"
#include "server/pending_prepared.h"
#include "server/prepare_pool.h"
#include "server/prompt_limits.h"
#include "server/props_api.h"
#include "server/response_store.h"
#include "server/responses_front_end.h"
#include "server/server_metrics.h"
#include "server/tenants.h"
#include "server/tokenize_api.h"
#include "server/vllm_metrics.h"

namespace invar::server {
namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kRandomWeightsWarning =
    "a random-weight demo model: its output is noise. Serve a real model with "
    "`invar serve -m FILE.gguf`";

enum class State { loading, ready, failed, draining, stopped };

const char* state_name(State s) {
  switch (s) {
    case State::loading:
      return "loading";
    case State::ready:
      return "ready";
    case State::failed:
      return "failed";
    case State::draining:
      return "draining";
    case State::stopped:
      return "stopped";
  }
  return "?";
}

HttpReply json_reply(int status, std::string body) {
  return {status, "application/json", std::move(body)};
}
HttpReply error_reply(const ApiError& e) {
  return json_reply(e.status, e.to_json());
}

std::string endpoint_label(const std::string& path) {
  for (const char* p :
       {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/ready", "/metrics",
        "/tokenize", "/detokenize", "/v1/tokenize", "/v1/detokenize", "/props", "/version"})
    if (path == p) return p;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  if (path.rfind("/v1/responses", 0) == 0) return "/v1/responses";
  return "other";
}

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The request log's record of a finished completion.
RequestRecord completion_record(const CompletionChoices& c, RequestRecord rec) {
  const ApiRequest& r = c.request();
  JobStats st = c.stats();
  rec.id = c.id();
  rec.model = r.served_name.empty() ? r.model : r.served_name;
  rec.user = r.user;
  rec.n = r.n;
  rec.seed = c.seed();
  rec.usage = st.usage;
  rec.ttft_s = st.ttft_s;
  return rec;
}

// The message of an error body, for the request log.
std::string error_message(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_object()) return "";
  auto m = j["error"].find("message");
  return m != j["error"].end() && m->is_string() ? m->get<std::string>() : "";
}

// A completion in progress, polled by its connection whenever the engine's events wake it.
// Writes its request-log line when it is done with (finished, failed or abandoned).
class PendingCompletion : public PendingReply {
 public:
  // `front_end` (null for chat and completions) rewrites the answer in its own shape.
  PendingCompletion(std::unique_ptr<CompletionChoices> job, std::shared_ptr<FrontEnd> front_end,
                    RequestRecord rec, LogFormat log, Clock::time_point t0)
      : job_(std::move(job)),
        front_end_(std::move(front_end)),
        stream_(job_->request().stream),
        rec_(std::move(rec)),
        log_(log),
        t0_(t0) {}
  ~PendingCompletion() override {
    RequestRecord r = completion_record(*job_, std::move(rec_));
    r.duration_s = std::chrono::duration<double>(Clock::now() - t0_).count();
    request_log_write(r, log_);
  }

  bool streaming() const override { return stream_; }

  bool poll(bool tick, std::string* out) override {
    if (!stream_) {
      auto r = job_->poll_whole();
      if (r) {
        rec_.status = r->first;
        if (r->first != 200) rec_.error = error_message(r->second);
        reply_ = front_end_ ? front_end_->whole(r->first, r->second)
                            : json_reply(r->first, std::move(r->second));
      }
      return r.has_value();
    }
    // A tick after a quiet interval sends what is there, or an SSE comment as keep-alive (a
    // vanished client is then noticed by the failed write).
    rec_.status = 200;
    if (tick ? !active_ : job_->ready()) {
      std::string sse = job_->stream_next();
      *out += front_end_ ? front_end_->stream(sse, job_->stream_done()) : sse;
    }
    active_ = !tick;
    return job_->stream_done();
  }

  HttpReply reply() override { return std::move(reply_); }
  void started_at(Clock::time_point t0) { t0_ = t0; }
  void client_gone() override {
    rec_.status = 499;  // nginx's "client closed request"
    job_->cancel_by_client();
  }

 private:
  std::unique_ptr<CompletionChoices> job_;
  std::shared_ptr<FrontEnd> front_end_;
  bool stream_;
  bool active_ = false;  // woken since the last tick
  HttpReply reply_;
  RequestRecord rec_;
  LogFormat log_;
  Clock::time_point t0_;
};

}  // namespace

struct HttpServer::Impl {
  ServerConfig cfg;
  Tenants tenants;  // --api-key, --api-key-file (tenants.h)
  Loader loader;
  ServerMetrics metrics;
  std::atomic<State> state{State::loading};
  std::unique_ptr<Backend> backend;  // set once by the loader, before state becomes ready
  std::string load_error;
  std::mutex load_mu;
  std::condition_variable load_cv;
  bool load_done = false;
  std::thread load_thread;
  // Finished Responses kept for GET and previous_response_id (--response-store-bytes); the
  // requests in flight hold it, so it is declared before them.
  std::unique_ptr<ResponseStore> responses;
  // Declared after the backend: preparations, then connections (and the requests they hold),
  // go first.
  std::unique_ptr<PreparePool> prepare;
  std::unique_ptr<HttpTransport> transport;
  std::unique_ptr<IdleTrimmer> trimmer;  // null with idle_trim_s 0
  bool bound = false;

  Routed route(const HttpRequest& req, const Waker& wake);
  Routed route_logged(const HttpRequest& req, const Waker& wake);
  // cancelled: the client's flag while it is prepared on the pool (null inline). `front_end`
  // (front_end.h): the body is its dialect's, translated to a chat body; errors and the answer
  // in its shape. Null for chat and completions.
  Routed handle_completion(const HttpRequest& req, Endpoint ep, const Waker& wake,
                           const PendingPrepared::Cancelled& cancelled,
                           std::shared_ptr<FrontEnd> front_end = nullptr);
  Routed handle_tokenize(const HttpRequest& req);
  Routed handle_count_tokens(const HttpRequest& req, const FrontEnd& front_end);
  // /v1/responses/input_tokens (POST) and /v1/responses/{id} (GET, DELETE).
  Routed handle_responses(const HttpRequest& req, const Waker& wake);
  // The chat's images read (data: or file:// URLs) into r.image_files. Throws ApiError.
  void images_read(ApiRequest& r) const;
  // `handle` inline for a small body, else on the prepare pool (429 when its queue is full).
  using Handle = std::function<Routed(const HttpRequest&, const PendingPrepared::Cancelled&)>;
  Routed prepared(const HttpRequest& req, const Waker& wake, Handle handle);
  HttpReply readiness();
  // 400 once the request has spent more than prepare_cpu_s of CPU: the calling thread's since
  // `t0`, and `other_s` on other threads (the vision tower's workers).
  void cpu_check(double t0, const char* what, double other_s = 0) const {
    const double used = thread_cpu_seconds() - t0 + other_s;
    if (used > cfg.prepare_cpu_s) throw prepare_cpu_over(used, cfg.prepare_cpu_s, what);
  }
  // `tenant`: tenant_of(req), which route() reads once.
  bool authorized(const HttpRequest& req, const Tenant* tenant) const {
    if (tenants.list.empty()) return true;
    bool guarded = req.path.rfind("/v1/", 0) == 0 || req.path == "/tokenize" ||
                   req.path == "/detokenize" || req.path == "/props" ||
                   (req.path == "/metrics" && !cfg.metrics_public);
    return !guarded || tenant != nullptr;
  }
  // The tenant whose key the request presents: one Authorization header (the whole value), or
  // without one, one x-api-key header (Anthropic's clients send the key there); null without
  // auth or without a known key.
  const Tenant* tenant_of(const HttpRequest& req) const {
    if (tenants.list.empty()) return nullptr;
    if (req.head.count("Authorization") == 0) {
      const std::string* key = req.head.field("x-api-key");
      if (!key || req.head.count("x-api-key") != 1) return nullptr;
      return tenants.find("Bearer " + *key);
    }
    const std::string* auth = req.head.field("Authorization");
    if (!auth || req.head.count("Authorization") != 1) return nullptr;
    return tenants.find(*auth);
  }
  bool model_known(const std::string& name) const {
    if (name.empty()) return true;
    if (!cfg.served_model_names.empty())
      return std::find(cfg.served_model_names.begin(), cfg.served_model_names.end(), name) !=
             cfg.served_model_names.end();
    if (name == backend->model_id()) return true;
    for (auto& a : cfg.model_aliases)
      if (name == a) return true;
    return false;
  }
  // An error unless the model is ready; then backend is safe to use.
  std::optional<ApiError> not_ready() {
    State s = state.load();
    if (s == State::ready) return std::nullopt;
    if (s == State::loading) return unavailable("the model is still loading: retry shortly");
    if (s == State::failed) return unavailable("the model failed to load: " + load_error);
    return unavailable("the server is shutting down");
  }
  // Who asks, for the engine's fairness: the tenant whose API key is presented (with one
  // --api-key every client presents the one key, so they are one client and share by request),
  // else the peer's address, else the OpenAI `user` field. The log and the engine never hold a
  // secret, only the tenant's name.
  std::string client_key(const HttpRequest& req, const ApiRequest& r) const {
    if (const Tenant* t = tenant_of(req)) return "tenant:" + t->name;
    if (!req.peer.empty()) return "peer:" + req.peer;
    return "user:" + r.user;
  }
  // With one --api-key every caller is that key's client: a per-client cap would only lower the
  // server's own, so it binds there only when asked for.
  int64_t client_queue_cap() const {
    if (cfg.client_queue_limit == 0 && !cfg.api_key.empty()) return cfg.queue_limit;
    return client_cap(cfg.client_queue_limit, cfg.queue_limit);
  }
  RequestBudget budget() const {
    RequestBudget b;
    b.tokens = cfg.max_request_tokens > 0
                   ? cfg.max_request_tokens
                   : backend->n_ctx() * std::max<int64_t>(1, backend->max_running() / 4);
    b.logprobs = cfg.max_request_logprobs > 0 ? cfg.max_request_logprobs : 4 * b.tokens;
    return b;
  }
  std::vector<std::string> served_names() const {
    if (cfg.served_model_names.empty()) return {backend->model_id()};
    return cfg.served_model_names;
  }
  nlohmann::json model_json(const std::string& name) const {
    nlohmann::json m = {{"id", name},
                        {"object", "model"},
                        {"created", 0},
                        {"owned_by", "invar"},
                        {"max_model_len", backend->n_ctx()},
                        {"system_fingerprint", backend->system_fingerprint()}};
    // What the model reads (as OpenRouter's and LM Studio's model lists say it).
    m["input_modalities"] =
        backend->vision() ? nlohmann::json{"text", "image"} : nlohmann::json{"text"};
    if (cfg.random_weights) {
      m["random_weights"] = true;
      m["warning"] = kRandomWeightsWarning;
    }
    return m;
  }
};

Routed HttpServer::Impl::route(const HttpRequest& req, const Waker& wake) {
  const std::string& m = req.head.method;
  const std::string& p = req.path;
  bool get = m == "GET" || m == "HEAD";
  // A CORS preflight carries no credentials: it is answered before the auth check.
  if (m == "OPTIONS" && !cfg.allowed_origins.empty()) return {cors_preflight(req), nullptr};
  // Another front end's path (front_end.h): its errors in its own shape from here on.
  const Tenant* tenant = tenant_of(req);
  std::shared_ptr<FrontEnd> front_end =
      front_end_for(p, {tenant ? tenant->name : std::string(), responses.get()});
  if (!authorized(req, tenant))
    return {front_end ? front_end->error(unauthorized()) : error_reply(unauthorized()), nullptr};
  auto wrong_method = [&](const char* allowed) {
    return Routed{error_reply({405,
                               "method " + echo_cut(m) + " is not allowed on " + echo_cut(p) +
                                   " (use " + allowed + ")",
                               "invalid_request_error", "", "method_not_allowed"}),
                  nullptr};
  };
  const bool ready_query = req.head.target.size() > p.size() &&
                           req.head.target.compare(p.size(), std::string::npos, "?ready") == 0;
  if (p == "/ready" || (p == "/health" && ready_query)) {
    if (!get) return wrong_method("GET");
    return {readiness(), nullptr};
  }
  if (p == "/health") {
    if (!get) return wrong_method("GET");
    State s = state.load();
    nlohmann::json body = {{"status", s == State::ready ? "ok" : state_name(s)}};
    if (s == State::failed) body["message"] = load_error;
    return {json_reply(s == State::ready ? 200 : 503, body.dump()), nullptr};
  }
  if (p == "/metrics") {
    if (!get) return wrong_method("GET");
    State s = state.load();
    EngineMetrics em;
    bool have = s == State::ready || s == State::draining;
    if (have) em = backend->metrics();
    metrics.client_connection_refusals.store(transport->peer_refusals());
    std::string text = metrics.exposition(have ? &em : nullptr, state_name(s));
    if (have) text += vllm_metrics_exposition(em, metrics, served_names().front());
    if (have && backend->vision()) text += image_metrics_exposition(backend->image_stats());
    text +=
        "# HELP invar_http_connections_open client connections open\n"
        "# TYPE invar_http_connections_open gauge\n"
        "invar_http_connections_open " +
        std::to_string(transport->connections()) +
        "\n"
        "# HELP invar_memory_trims_total idle periods after which freed heap memory went back "
        "to the system (--idle-trim-seconds)\n"
        "# TYPE invar_memory_trims_total counter\n"
        "invar_memory_trims_total " +
        std::to_string(trimmer ? trimmer->trims() : 0) + "\n";
    text +=
        grammar_metrics_exposition(grammar::compile_cache_stats(), grammar::compile_cache_budget());
    return {{200, "text/plain; version=0.0.4", std::move(text)}, nullptr};
  }
  if (p == "/v1/models" || p.rfind("/v1/models/", 0) == 0) {
    if (!get) return wrong_method("GET");
    if (auto e = not_ready()) return {error_reply(*e), nullptr};
    if (p == "/v1/models" || p == "/v1/models/") {
      nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array()}};
      for (auto& n : served_names()) body["data"].push_back(model_json(n));
      return {json_reply(200, body.dump()), nullptr};
    }
    std::string name = percent_decode(p.substr(11));
    if (!model_known(name))
      return {error_reply(not_found("the model '" + echo_cut(name) + "' does not exist",
                                    "model_not_found")),
              nullptr};
    return {
        json_reply(200,
                   model_json(cfg.served_model_names.empty() ? backend->model_id() : name).dump()),
        nullptr};
  }
  if (p.rfind("/v1/responses/", 0) == 0) return handle_responses(req, wake);
  if (front_end) {
    if (m != "POST")
      return {
          front_end->error(
              {405, "method " + echo_cut(m) + " is not allowed on " + echo_cut(p) + " (use POST)",
               "invalid_request_error", "", "method_not_allowed"}),
          nullptr};
    if (p == "/v1/messages/count_tokens")
      return prepared(req, wake,
                      [this, front_end](const HttpRequest& r, const PendingPrepared::Cancelled&) {
                        return handle_count_tokens(r, *front_end);
                      });
    return prepared(
        req, wake,
        [this, front_end, wake](const HttpRequest& r, const PendingPrepared::Cancelled& c) {
          return handle_completion(r, Endpoint::chat, wake, c, front_end);
        });
  }
  if (p == "/v1/completions" || p == "/v1/chat/completions") {
    if (m != "POST") return wrong_method("POST");
    const Endpoint ep = p == "/v1/completions" ? Endpoint::completions : Endpoint::chat;
    return prepared(req, wake,
                    [this, ep, wake](const HttpRequest& r, const PendingPrepared::Cancelled& c) {
                      return handle_completion(r, ep, wake, c);
                    });
  }
  if (p == "/tokenize" || p == "/detokenize" || p == "/v1/tokenize" || p == "/v1/detokenize") {
    if (m != "POST") return wrong_method("POST");
    return prepared(req, wake, [this](const HttpRequest& r, const PendingPrepared::Cancelled&) {
      return handle_tokenize(r);
    });
  }
  if (p == "/props") {
    if (!get) return wrong_method("GET");
    if (auto e = not_ready()) return {error_reply(*e), nullptr};
    // The template text is the model's: never let its bytes make the body invalid UTF-8.
    return {json_reply(200, props_json(*backend, cfg, backend->metrics())
                                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)),
            nullptr};
  }
  if (p == "/version") {
    if (!get) return wrong_method("GET");
    return {json_reply(200, version_json(cfg).dump()), nullptr};
  }
  return {error_reply(not_found("unknown route: " + echo_cut(m) + " " + echo_cut(p), "not_found")),
          nullptr};
}

Routed HttpServer::Impl::route_logged(const HttpRequest& req, const Waker& wake) {
  auto t0 = Clock::now();
  Routed r = route(req, wake);
  if (r.pending) {  // it writes its own line when done (a preparation: once prepared)
    if (auto* pc = dynamic_cast<PendingCompletion*>(r.pending.get())) pc->started_at(t0);
    return r;
  }
  RequestRecord rec;
  rec.id = request_log_id();
  rec.method = req.head.method;
  rec.path = req.path;
  rec.status = r.reply.status;
  if (r.reply.status >= 400) rec.error = error_message(r.reply.body);
  rec.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
  request_log_write(rec, cfg.log_format);
  return r;
}

Routed HttpServer::Impl::prepared(const HttpRequest& req, const Waker& wake, Handle handle) {
  // A chat with an image is decoded and encoded on the pool whatever its size: a tiny PNG can
  // decode into many pixels, and the tower takes seconds. Text that merely mentions an image
  // part's type goes there too, which costs it only a thread hop.
  // A constraint is compiled on the pool too (compile_cached: a cache hit costs a hash). The
  // test is on the body's text, like the image one: a body that only mentions a field's name
  // costs a thread hop.
  const auto constrained = [](const std::string& body) {
    for (const char* k : output_constraint_fields())
      if (body.find(std::string("\"") + k + "\"") != std::string::npos) return true;
    return body.find("\"tool_choice\"") != std::string::npos ||
           body.find("\"strict\"") != std::string::npos;
  };
  // Every path but completions takes images, each front end in its own part type
  // ("image_url", "input_image", Anthropic's "image").
  const bool image = req.path != "/v1/completions" && req.body.find("image") != std::string::npos;
  if (req.body.size() <= cfg.prepare_inline_bytes && !image && !constrained(req.body))
    return handle(req, nullptr);
  const auto t0 = Clock::now();
  auto work = [handle = std::move(handle), req](const PendingPrepared::Cancelled& c) -> Routed {
    try {
      return handle(req, c);
    } catch (const std::exception& e) {
      return {error_reply(internal_error(std::string("internal error: ") + e.what())), nullptr};
    }
  };
  // Once prepared: a completion writes its own log line (timed from here), a reply gets its
  // line as route_logged writes them.
  auto taken = [this, t0, method = req.head.method, path = req.path](Routed& r) {
    if (auto* pc = dynamic_cast<PendingCompletion*>(r.pending.get())) return pc->started_at(t0);
    RequestRecord rec;
    rec.id = request_log_id();
    rec.method = method;
    rec.path = path;
    rec.status = r.reply.status;
    if (r.reply.status >= 400) rec.error = error_message(r.reply.body);
    rec.duration_s = std::chrono::duration<double>(Clock::now() - t0).count();
    request_log_write(rec, cfg.log_format);
  };
  auto pending = PendingPrepared::start(*prepare, std::move(work), wake, std::move(taken));
  if (!pending)
    return {error_reply(overloaded("the server is already preparing " +
                                   std::to_string(prepare->max_waiting()) +
                                   " large requests (--prepare-queue): retry later")),
            nullptr};
  return {{}, std::move(pending)};
}

HttpReply HttpServer::Impl::readiness() {
  State s = state.load();
  const int64_t inflight = metrics.inflight.load();
  const size_t preparing = prepare->waiting();
  nlohmann::json body = {{"status", "ready"},
                         {"inflight", inflight},
                         {"queue_limit", cfg.queue_limit},
                         {"preparing", preparing},
                         {"prepare_queue", prepare->max_waiting()}};
  if (s != State::ready) {
    body["status"] = state_name(s);
  } else if (inflight >= cfg.queue_limit || preparing >= prepare->max_waiting()) {
    body["status"] = "saturated";
    body["message"] = inflight >= cfg.queue_limit
                          ? "every request slot (--queue-limit) is in flight"
                          : "the preparation queue (--prepare-queue) is full";
  }
  const bool ok = body["status"] == "ready";
  return json_reply(ok ? 200 : 503, body.dump());
}

Routed HttpServer::Impl::handle_tokenize(const HttpRequest& req) {
  if (auto e = not_ready()) return {error_reply(*e), nullptr};
  auto known = [this](const std::string& name) { return model_known(name); };
  try {
    const double cpu0 = thread_cpu_seconds();
    const bool tokenize = req.path == "/tokenize" || req.path == "/v1/tokenize";
    std::string body = tokenize ? tokenize_api(*backend, req.body, known)
                                : detokenize_api(*backend, req.body, known);
    cpu_check(cpu0, "parsing and tokenising");
    return {json_reply(200, std::move(body)), nullptr};
  } catch (const ApiError& e) {
    return {error_reply(e), nullptr};
  }
}

Routed HttpServer::Impl::handle_count_tokens(const HttpRequest& req, const FrontEnd& front_end) {
  if (auto e = not_ready()) return {front_end.error(*e), nullptr};
  try {
    const double cpu0 = thread_cpu_seconds();
    std::string body = messages_count_tokens(
        *backend, req.body, [this](const std::string& name) { return model_known(name); });
    cpu_check(cpu0, "parsing and tokenising");
    return {json_reply(200, std::move(body)), nullptr};
  } catch (const ApiError& e) {
    return {front_end.error(e), nullptr};
  }
}

Routed HttpServer::Impl::handle_responses(const HttpRequest& req, const Waker& wake) {
  const std::string& m = req.head.method;
  const Tenant* t = tenant_of(req);
  const std::string tenant = t ? t->name : std::string();
  const bool count = req.path == "/v1/responses/input_tokens";
  if (!count && req.path.find('/', 14) != std::string::npos)
    return {error_reply(not_found("unknown route: " + echo_cut(m) + " " + echo_cut(req.path) +
                                      " (of the Responses API invar serves POST /v1/responses, "
                                      "/v1/responses/input_tokens and GET, DELETE "
                                      "/v1/responses/{id}: docs/api.md)",
                                  "not_found")),
            nullptr};
  if (count ? m != "POST" : m != "GET" && m != "DELETE")
    return {error_reply({405,
                         "method " + echo_cut(m) + " is not allowed on " + echo_cut(req.path) +
                             (count ? " (use POST)" : " (use GET or DELETE)"),
                         "invalid_request_error", "", "method_not_allowed"}),
            nullptr};
  if (!count)
    return {responses_stored(m, percent_decode(req.path.substr(14)), responses.get(), tenant),
            nullptr};
  return prepared(req, wake,
                  [this, tenant](const HttpRequest& r, const PendingPrepared::Cancelled&) {
                    if (auto e = not_ready()) return Routed{error_reply(*e), nullptr};
                    auto known = [this](const std::string& name) { return model_known(name); };
                    try {
                      const double cpu0 = thread_cpu_seconds();
                      const std::string body =
                          json_text(responses_tokenize_body(r.body, responses.get(), tenant));
                      std::string counted = tokenize_api(*backend, body, known);
                      cpu_check(cpu0, "parsing and tokenising");
                      return Routed{json_reply(200, responses_input_tokens_json(counted)), nullptr};
                    } catch (const ApiError& e) {
                      return Routed{error_reply(e), nullptr};
                    }
                  });
}

void HttpServer::Impl::images_read(ApiRequest& r) const {
  const std::vector<ChatImage>& parts = r.chat.images;
  if (!backend->vision())
    throw bad_request(parts[0].field,
                      "this server has no vision tower: image parts need a model served with "
                      "--mmproj FILE");
  if (int64_t(parts.size()) > cfg.max_images_per_request)
    throw bad_request(parts[size_t(cfg.max_images_per_request)].field,
                      "the request holds " + std::to_string(parts.size()) +
                          " images; this server takes at most " +
                          std::to_string(cfg.max_images_per_request) +
                          " per request (--max-images-per-request)");
  auto files = std::make_shared<std::vector<std::string>>();
  for (ChatImage& im : r.chat.images) {
    files->push_back(image_source_read(im.url, im.field, cfg.image_source));
    im.url = std::string();  // read (megabytes); the field stays, for the encoder's errors
  }
  r.image_files = std::move(files);
}

Routed HttpServer::Impl::handle_completion(const HttpRequest& req, Endpoint ep, const Waker& wake,
                                           const PendingPrepared::Cancelled& cancelled,
                                           std::shared_ptr<FrontEnd> front_end) {
  const auto fail = [&front_end](const ApiError& e) -> Routed {
    return {front_end ? front_end->error(e) : error_reply(e), nullptr};
  };
  if (auto e = not_ready()) return fail(*e);
  try {
    const double cpu0 = thread_cpu_seconds();
    const PromptLimits limits{backend->n_ctx(), backend->max_token_bytes()};
    ApiRequest r = front_end
                       ? api_request_parse(json_text(front_end->chat_body(req.body)), ep, &limits)
                       : api_request_parse(req.body, ep, &limits);
    cpu_check(cpu0, "parsing the body");
    if (!model_known(r.model))
      return fail(
          not_found("the model '" + echo_cut(r.model) + "' does not exist", "model_not_found"));
    if (!cfg.served_model_names.empty()) r.served_name = cfg.served_model_names.front();
    r.client_key = client_key(req, r);
    // Every cache a request can hit or time is its tenant's alone (tenants.h).
    const Tenant* tenant = tenant_of(req);
    r.tenant = tenant ? tenant->name : std::string();
    r.cache_salt = tenant_cache_salt(tenant, r.cache_salt);
    if (!r.chat.images.empty()) images_read(r);
    // The tower runs within the same budget, on this thread and its own workers, and stops
    // between its units once the budget is spent or the client gone.
    const ImageBounds images{cancelled, cpu0, cfg.prepare_cpu_s};
    auto job =
        std::make_unique<CompletionChoices>(*backend, std::move(r), metrics, budget(), images);
    cpu_check(cpu0, "rendering and tokenising the prompt", job->image_pool_cpu_seconds());
    job->start(cfg.queue_limit, client_queue_cap(), wake);
    RequestRecord rec;
    rec.method = req.head.method;
    rec.path = req.path;
    return {{},
            std::make_unique<PendingCompletion>(std::move(job), std::move(front_end),
                                                std::move(rec), cfg.log_format, Clock::now())};
  } catch (const ApiError& e) {
    return fail(e);
  }
}

HttpServer::HttpServer(ServerConfig cfg, Loader loader) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.cfg = std::move(cfg);
  m.loader = std::move(loader);
  m.tenants = tenants_load(m.cfg.api_key, m.cfg.api_key_file);
  m.responses = std::make_unique<ResponseStore>(m.cfg.response_store_bytes);
  TransportConfig t;
  t.host = m.cfg.host;
  t.port = m.cfg.port;
  t.max_body_bytes = m.cfg.max_body_bytes;
  t.max_connections = m.cfg.max_connections;
  t.max_connections_per_peer = m.cfg.client_max_connections;
  t.head_timeout_s = m.cfg.head_timeout_s;
  t.body_timeout_s = m.cfg.body_timeout_s;
  t.body_stall_s = m.cfg.body_stall_s;
  t.idle_timeout_s = m.cfg.idle_timeout_s;
  t.allowed_origins = m.cfg.allowed_origins;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  m.prepare = std::make_unique<PreparePool>(
      m.cfg.prepare_threads > 0 ? m.cfg.prepare_threads : std::min(2, cores),
      std::max<size_t>(1, m.cfg.prepare_queue));
  m.transport = std::make_unique<HttpTransport>(
      t, [&m](const HttpRequest& req, const Waker& wake) { return m.route_logged(req, wake); },
      [&m](const std::string& method, const std::string& path, int status,
           const std::string* refusal) {
        // A refusal is logged here (a handled request, by its handler), before it is counted:
        // every response /metrics counts has its request-log line written.
        if (refusal) {
          RequestRecord rec;
          rec.id = request_log_id();
          rec.method = method;
          rec.path = path;
          rec.status = status;
          rec.error = *refusal;
          request_log_write(rec, m.cfg.log_format);
        }
        m.metrics.count_response(endpoint_label(path), status);
      });
}

HttpServer::~HttpServer() {
  if (impl_->state.load() != State::stopped) shutdown(0);
}

int HttpServer::bind() {
  int port = impl_->transport->bind();
  impl_->bound = true;
  return port;
}

void HttpServer::start() {
  Impl& m = *impl_;
  INVAR_CHECK(m.bound, "bind() before start()");
  // A client that vanishes mid-stream must fail the write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  if (m.cfg.mmap_threshold > 0) malloc_mmap_threshold(m.cfg.mmap_threshold);
  grammar::compile_cache_budget_set(m.cfg.grammar_cache_bytes);
  if (m.cfg.idle_trim_s > 0)
    m.trimmer = std::make_unique<IdleTrimmer>(
        m.cfg.idle_trim_s, [&m] { return m.metrics.responses_total.load(); },
        [&m] { return m.metrics.inflight.load() == 0 && m.prepare->waiting() == 0; });
  m.transport->start();
  m.load_thread = std::thread([&m] {
    std::unique_ptr<Backend> b;
    std::string err;
    try {
      b = m.loader();
    } catch (const std::exception& e) {
      err = e.what();
    }
    {
      std::lock_guard<std::mutex> lock(m.load_mu);
      if (b) {
        m.backend = std::move(b);
        State expected = State::loading;
        m.state.compare_exchange_strong(expected, State::ready);
      } else {
        m.load_error = err.empty() ? "loader returned nothing" : err;
        State expected = State::loading;
        m.state.compare_exchange_strong(expected, State::failed);
      }
      m.load_done = true;
    }
    m.load_cv.notify_all();
  });
}

bool HttpServer::wait_loaded(std::string* error) {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> lock(m.load_mu);
  m.load_cv.wait(lock, [&] { return m.load_done; });
  if (m.backend) return true;
  if (error) *error = m.load_error;
  return false;
}

void HttpServer::shutdown(double timeout_s) {
  Impl& m = *impl_;
  if (m.state.load() == State::stopped) return;
  m.state.store(State::draining);
  if (m.load_thread.joinable()) m.load_thread.join();
  auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  if (m.backend) m.backend->drain(timeout_s);
  // Let the connections write out what the engine finished (bounded: a stalled client's write
  // times out on its own).
  while (m.metrics.inflight.load() > 0 && Clock::now() < deadline + std::chrono::seconds(2))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.transport->stop();
  m.prepare->stop();
  m.trimmer.reset();
  m.state.store(State::stopped);
}

std::string HttpServer::state() const {
  return state_name(impl_->state.load());
}

}  // namespace invar::server
