// The HTTP side of `invar serve`: routes, auth, admission, SSE streaming and graceful drain,
// over the event-driven connection layer of http_transport.h. It starts listening before the model
// is loaded (/health answers 503 "loading" meanwhile) and talks to the model only through a
// Backend.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/compile.h"
#include "server/backend.h"
#include "server/image_source.h"
#include "server/request_log.h"

namespace invar::server {

struct ServerConfig {
  std::string host = "127.0.0.1";    // loopback unless told otherwise
  int port = 8080;                   // 0: any free port (bind() returns it)
  std::string api_key;               // "" → no auth; else /v1/* and /metrics need "Bearer <key>"
  std::string api_key_file;          // --api-key-file: a tenant per key (tenants.h)
  bool metrics_public = false;       // /metrics open even when api_key is set
  size_t max_body_bytes = 4u << 20;  // larger bodies get 413
  int64_t queue_limit = 256;         // requests in flight before 429 (n choices are one)
  // Work one request may ask for (completion_choices.h), 0: derived once the model is loaded:
  // n × (prompt + max_tokens) ≤ n_ctx × max_running / 4 (a quarter of what the engine holds
  // at once, every slot at the full context), and logprob candidates ≤ 4 × that.
  int64_t max_request_tokens = 0;
  int64_t max_request_logprobs = 0;
  // Preparation (prepare_pool.h): bodies over prepare_inline_bytes, and chats with images, are
  // parsed, rendered, tokenised (and their images encoded) on prepare_threads low-priority
  // threads (0: min(2, cores), so that one image in the tower does not hold every other large
  // request), at most prepare_queue waiting (then 429); a request whose preparation takes over
  // prepare_cpu_s of CPU (the tower's threads included) gets 400.
  // A body that asks for a constrained output (output_constraint_fields(), tool_choice, strict
  // tools) is prepared there whatever its size: a grammar of a few hundred bytes can take
  // seconds to compile.
  size_t prepare_inline_bytes = 64u << 10;
  int prepare_threads = 0;
  size_t prepare_queue = 16;
  double prepare_cpu_s = 2.0;
  // Memory returns after load (memory_return.h): malloc_trim once idle this long (0: never),
  // and allocations of at least mmap_threshold bytes mapped (0: glibc's dynamic threshold).
  double idle_trim_s = 1.0;
  size_t mmap_threshold = 128u << 10;
  // --grammar-cache-bytes: compiled grammars kept for reuse (grammar::compile_cached), bytes.
  size_t grammar_cache_bytes = grammar::kCompileCacheBytesDefault;
  // --response-store-bytes: finished Responses (POST /v1/responses, store true) kept in memory
  // for GET and previous_response_id, least recently used dropped first (response_store.h).
  int64_t response_store_bytes = int64_t(64) << 20;
  int max_connections = 4096;  // open connections before a 503
  // Per client (client_limits.h), so that one client is refused (429) before the server-wide
  // limits refuse everyone: requests in flight of one client (API key, else peer address) and
  // open connections from one address. 0: three quarters of queue_limit / max_connections (with
  // one api_key every caller is that key's client: no per-client request cap unless asked). A
  // cap at or above the server-wide limit never binds.
  int64_t client_queue_limit = 0;
  int client_max_connections = 0;
  double head_timeout_s = 10, body_timeout_s = 30, body_stall_s = 5;  // see http_transport.h
  double idle_timeout_s = 30;
  std::vector<std::string> model_aliases;  // names accepted in "model" besides the model id
  // --served-model-name: the names /v1/models lists and "model" must match (the first is the
  // name responses carry); empty: the model's id and model_aliases.
  std::vector<std::string> served_model_names;
  std::vector<std::string> allowed_origins;  // --allowed-origins: CORS ("*": any); none: off
  LogFormat log_format = LogFormat::text;    // one line per request on stderr
  // Images in chat requests (a backend with a vision tower): where they may come from
  // (--allowed-local-media-path, image_source.h) and how many one request may hold
  // (--max-images-per-request; more get 400).
  ImageSourceConfig image_source;
  int64_t max_images_per_request = 8;
  // What /props, /version and /v1/models say about what is served (set by `invar serve`).
  std::string model_path;       // /props model_path
  int64_t total_slots = 0;      // /props total_slots: requests computing at once (--max-num-seqs)
  std::string version;          // /version
  std::string build_info;       // /props build_info
  bool random_weights = false;  // the demo model of `invar serve` without --model: said everywhere
};

class HttpServer {
 public:
  using Loader = std::function<std::unique_ptr<Backend>()>;  // may throw invar::Error
  HttpServer(ServerConfig cfg, Loader loader);
  ~HttpServer();  // shuts down (without drain) if still running
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int bind();    // binds the socket; returns the port. Throws invar::Error.
  void start();  // serves on a background thread and runs the loader on another
  // Blocks until the loader returns: true when ready, else false with its message.
  bool wait_loaded(std::string* error);
  // Stops admitting work, lets in-flight requests finish for up to timeout_s (then cancels
  // them), and stops listening.
  void shutdown(double timeout_s);
  std::string state() const;  // loading | ready | failed | draining | stopped

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace invar::server
