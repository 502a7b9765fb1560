#include "server/http_server.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "server/api_error.h"
#include "server/completion_job.h"
#include "server/server_metrics.h"

namespace invar::server {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kKeepAliveEvery = std::chrono::milliseconds(500);

enum class State { loading, ready, failed, draining, stopped };

const char* state_name(State s) {
  switch (s) {
    case State::loading: return "loading";
    case State::ready: return "ready";
    case State::failed: return "failed";
    case State::draining: return "draining";
    case State::stopped: return "stopped";
  }
  return "?";
}

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(e.to_json(), "application/json");
}

std::string endpoint_label(const std::string& path) {
  for (const char* p : {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics"})
    if (path == p) return p;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models";
  return "other";
}

}  // namespace

struct HttpServer::Impl {
  ServerConfig cfg;
  Loader loader;
  httplib::Server http;
  ServerMetrics metrics;
  std::atomic<State> state{State::loading};
  std::unique_ptr<Backend> backend;  // set once by the loader, before state becomes ready
  std::string load_error;
  std::mutex load_mu;
  std::condition_variable load_cv;
  bool load_done = false;
  std::thread listen_thread, load_thread;
  bool bound = false;

  void setup_routes();
  void handle_completion(const httplib::Request& req, httplib::Response& res, Endpoint ep);
  bool model_known(const std::string& name) const {
    if (name.empty() || name == backend->model_id()) return true;
    for (auto& a : cfg.model_aliases)
      if (name == a) return true;
    return false;
  }
  // 503 unless the model is ready; then backend is safe to use.
  bool require_ready(httplib::Response& res) {
    State s = state.load();
    if (s == State::ready) return true;
    if (s == State::loading) reply_error(res, unavailable("the model is still loading: retry shortly"));
    else if (s == State::failed) reply_error(res, unavailable("the model failed to load: " + load_error));
    else reply_error(res, unavailable("the server is shutting down"));
    return false;
  }
};

void HttpServer::Impl::setup_routes() {
  // One thread per connection in flight: streams hold theirs for their whole length, so the pool
  // is sized past the queue limit, and requests beyond the limit still get a prompt 429.
  size_t threads = size_t(cfg.queue_limit) + 16;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(cfg.max_body_bytes);
  http.set_keep_alive_max_count(1000);

  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!cfg.api_key.empty() && req.path.rfind("/v1/", 0) == 0 &&
        req.get_header_value("Authorization") != "Bearer " + cfg.api_key) {
      reply_error(res, unauthorized());
      return httplib::Server::HandlerResponse::Handled;
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its error
    if (res.status == 413) reply_error(res, payload_too_large(cfg.max_body_bytes));
    else if (res.status == 404)
      reply_error(res, not_found("unknown route: " + req.method + " " + req.path, "not_found"));
    else reply_error(res, ApiError{res.status, "request failed", "invalid_request_error", "", ""});
  });
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg += std::string(": ") + e.what();
    } catch (...) {
    }
    reply_error(res, internal_error(msg));
  });
  http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.count_response(endpoint_label(req.path), res.status);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    State s = state.load();
    nlohmann::json body = {{"status", s == State::ready ? "ok" : state_name(s)}};
    if (s == State::failed) body["message"] = load_error;
    res.status = s == State::ready ? 200 : 503;
    res.set_content(body.dump(), "application/json");
  });
  http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    State s = state.load();
    EngineMetrics em;
    bool have = s == State::ready || s == State::draining;
    if (have) em = backend->metrics();
    res.set_content(metrics.exposition(have ? &em : nullptr, state_name(s)),
                    "text/plain; version=0.0.4");
  });
  auto model_json = [this] {
    return nlohmann::json{{"id", backend->model_id()},
                          {"object", "model"},
                          {"created", 0},
                          {"owned_by", "invar"},
                          {"max_model_len", backend->n_ctx()},
                          {"system_fingerprint", backend->system_fingerprint()}};
  };
  http.Get("/v1/models", [this, model_json](const httplib::Request&, httplib::Response& res) {
    if (!require_ready(res)) return;
    nlohmann::json body = {{"object", "list"}, {"data", nlohmann::json::array({model_json()})}};
    res.set_content(body.dump(), "application/json");
  });
  http.Get(R"(/v1/models/(.+))", [this, model_json](const httplib::Request& req, httplib::Response& res) {
    if (!require_ready(res)) return;
    std::string name = req.matches[1];
    if (!model_known(name))
      return reply_error(res, not_found("the model '" + name + "' does not exist", "model_not_found"));
    res.set_content(model_json().dump(), "application/json");
  });
  http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, Endpoint::completions);
  });
  http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    handle_completion(req, res, Endpoint::chat);
  });
}

void HttpServer::Impl::handle_completion(const httplib::Request& req, httplib::Response& res,
                                         Endpoint ep) {
  if (!require_ready(res)) return;
  std::shared_ptr<CompletionJob> job;
  try {
    ApiRequest r = api_request_parse(req.body, ep);
    if (!model_known(r.model))
      return reply_error(res, not_found("the model '" + r.model + "' does not exist", "model_not_found"));
    job = std::make_shared<CompletionJob>(*backend, std::move(r), metrics);
    job->start(cfg.queue_limit);
  } catch (const ApiError& e) {
    return reply_error(res, e);
  }
  if (!job->request().stream) {
    auto [status, body] = job->run_whole();
    res.status = status;
    res.set_content(body, "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [job](size_t, httplib::DataSink& sink) {
        std::string out = job->stream_next(kKeepAliveEvery);
        if (!out.empty() && !sink.write(out.data(), out.size())) return false;
        if (job->stream_done()) sink.done();
        return true;
      },
      [job](bool success) {
        // Not a clean end: the client went away (or the write timed out) mid-stream.
        if (!success || !job->stream_done()) job->cancel_by_client();
      });
}

HttpServer::HttpServer(ServerConfig cfg, Loader loader) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = std::move(cfg);
  impl_->loader = std::move(loader);
  impl_->setup_routes();
}

HttpServer::~HttpServer() {
  if (impl_->state.load() != State::stopped) shutdown(0);
}

int HttpServer::bind() {
  Impl& m = *impl_;
  int port = m.cfg.port;
  if (port == 0) {
    port = m.http.bind_to_any_port(m.cfg.host);
    if (port < 0) throw Error("cannot bind " + m.cfg.host + " to a free port");
  } else if (!m.http.bind_to_port(m.cfg.host, port)) {
    throw Error("cannot listen on " + m.cfg.host + ":" + std::to_string(port) +
                " (address in use or not local?)");
  }
  m.bound = true;
  return port;
}

void HttpServer::start() {
  Impl& m = *impl_;
  INVAR_CHECK(m.bound, "bind() before start()");
  // A client that vanishes mid-stream must fail the write, not kill the process.
  std::signal(SIGPIPE, SIG_IGN);
  m.listen_thread = std::thread([&m] { m.http.listen_after_bind(); });
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
  // Let the HTTP threads write out what the engine finished (bounded: a stalled client's write
  // times out on its own).
  while (m.metrics.inflight.load() > 0 &&
         Clock::now() < deadline + std::chrono::seconds(2))
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  m.http.stop();
  if (m.listen_thread.joinable()) m.listen_thread.join();
  m.state.store(State::stopped);
}

std::string HttpServer::state() const { return state_name(impl_->state.load()); }

}  // namespace invar::server
