// `invar serve`: the OpenAI-compatible HTTP server (src/server) over one model. It listens
// before the model is loaded (/health says "loading"), and on SIGINT/SIGTERM drains in-flight
// requests (bounded by --drain-timeout) and exits 0; a second SIGINT/SIGTERM ends the drain at
// once. SIGHUP, SIGUSR1 and SIGUSR2 are logged and ignored (the log is stderr: nothing to reopen).
// A model that fails to load ends the process with an error.
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "command.h"
#include "core/activations.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/user_cache_dir.h"
#include "engine/drafter_make.h"
#include "forge/make_model.h"
#include "gguf/gguf.h"
#include "model/hparams.h"
#include "model/sha256_cache.h"
#include "peer_flags.h"
#include "server/http_server.h"
#include "spec_flags.h"
#include "tokenizer/tokenizer.h"
#include "version.h"

namespace invar::app {
namespace {

// Served when no model is given: make-model's defaults with the Qwen3 vocabulary, under the
// user's cache directory (never the working directory), written on first use. Its file name is
// the model id /v1/models lists, so that no client takes it for a real model.
constexpr const char* kDemoModelFile = "invar-demo-random-weights.gguf";

struct ServeOptions {
  std::string model;
  server::ServerConfig server;
  EngineConfig engine;
  bool no_prefix_cache = false;
  std::string simd;
  std::string activations = "f32";  // numerics profile of the matrix products (core/activations.h)
  double drain_timeout_s = 30;
  std::string log_format = "text";
  server::BackendOptions backend;
  std::string tool_call_parser;  // "": from the template
  std::string reasoning_format = "auto";
  std::string content_format = "auto";
  std::string replay_outputs;  // tests: replay fixture outputs instead of running the model
  std::vector<std::string> peer_notes;  // what invar does with the peers' flags (peer_flags.h)
  bool allow_long_context = false;      // -c past the model's trained context: warn, not refuse
};

std::string demo_model_path() {
  const std::string dir = user_cache_dir();
  if (dir.empty())
    throw Error(
        "no model given, and no cache directory for the demo model ($XDG_CACHE_HOME and $HOME "
        "are unset): give one with -m FILE.gguf");
  return dir + "/models/" + kDemoModelFile;
}

void demo_model_warn(const std::string& path) {
  std::fprintf(stderr,
               "invar serve: WARNING: no model given: serving a RANDOM-WEIGHT DEMO MODEL (%s)\n"
               "invar serve: WARNING: its answers are noise; it is there to try the API. Serve a "
               "real model with `invar serve -m FILE.gguf`\n",
               path.c_str());
}

void demo_model_create(const std::string& path) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::fprintf(stderr, "invar serve: writing the demo model %s (first use)\n", path.c_str());
  MakeModelConfig c;
  c.type = DType::BF16;
  Vocab v = vocab_from_tokenizer_json(std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json");
  GgufWriter w;
  make_model(c, int64_t(v.tokens.size()), w);
  vocab_to_gguf(v, w);
  // Two servers starting at once each write their own file; the rename is atomic.
  std::string tmp = path + ".partial." + std::to_string(getpid());
  w.write(tmp);
  std::filesystem::rename(tmp, path);
}

// The next of `sigs` (all blocked); SIGHUP/SIGUSR1/SIGUSR2 are logged and come back as 0, as
// does the end of `timeout` (null: wait for ever).
int next_signal(const sigset_t& sigs, const timespec* timeout) {
  int sig = timeout ? sigtimedwait(&sigs, nullptr, timeout) : 0;
  if (!timeout && sigwait(&sigs, &sig) != 0) return 0;
  if (sig == SIGHUP || sig == SIGUSR1 || sig == SIGUSR2) {
    std::fprintf(stderr, "invar serve: %s ignored\n", strsignal(sig));
    return 0;
  }
  return sig < 0 ? 0 : sig;
}

// -c past the context the model was trained for (its RoPE scaling included): refused unless
// --allow-long-context, as vLLM refuses --max-model-len past the model's unless
// VLLM_ALLOW_LONG_MAX_MODEL_LEN=1; then a warning. Reads the GGUF header only; a file it cannot
// read is left to the load, which names what is wrong with it.
void context_check(const std::string& path, int64_t n_ctx, bool allowed) {
  if (n_ctx <= 0 || !std::filesystem::exists(path)) return;
  Hparams hp;
  try {
    hp = hparams_from_gguf(*GgufFile::open(path, /*populate=*/false));
  } catch (const Error&) {
    return;
  }
  if (hp.n_ctx_train <= 0 || n_ctx <= hp.n_ctx_limit()) return;
  const std::string what = "--ctx-size " + std::to_string(n_ctx) + " exceeds the " +
                           std::to_string(hp.n_ctx_limit()) +
                           " tokens the model was trained for (its context_length" +
                           (hp.n_ctx_limit() > hp.n_ctx_train ? " with RoPE scaling" : "") + ")";
  if (!allowed)
    throw Error(what +
                ": positions past it may give noise. Give --allow-long-context to serve it anyway");
  std::fprintf(stderr, "invar serve: WARNING: %s; served anyway (--allow-long-context)\n",
               what.c_str());
}

int run_serve(ServeOptions& o) {
  for (const std::string& note : o.peer_notes)
    std::fprintf(stderr, "invar serve: %s\n", note.c_str());
  if (!o.simd.empty()) {
    auto level = simd_parse(o.simd);
    if (!level) throw Error("--simd must be off, avx2 or avx512, not '" + o.simd + "'");
    simd_set(*level);
  }
  const auto profile = activations_parse(o.activations);
  if (!profile) throw Error("--activations must be f32 or q8, not '" + o.activations + "'");
  activations_set(*profile);
  if (!o.tool_call_parser.empty())
    o.backend.tool_call_syntax = server::tool_call_syntax_parse(o.tool_call_parser);
  if (o.reasoning_format != "auto" && o.reasoning_format != "none")
    throw Error("--reasoning-format must be auto or none, not '" + o.reasoning_format + "'");
  o.backend.reasoning = o.reasoning_format == "auto";
  o.backend.content_format = chat::content_format_parse(o.content_format);
  if (o.backend.sha256_cache_dir == "none") o.backend.sha256_cache_dir.clear();
  if (!o.backend.chat_template_file.empty() &&
      !std::filesystem::exists(o.backend.chat_template_file))
    throw Error("no chat template file at " + o.backend.chat_template_file);
  o.engine.prefix_cache = !o.no_prefix_cache;
  drafter_config_check(o.engine.spec, o.engine.draft);
  o.engine.max_queue = o.server.queue_limit;
  if (o.server.queue_limit < 1) throw Error("--queue-limit must be at least 1");
  if (o.server.client_queue_limit < 0 || o.server.client_max_connections < 0)
    throw Error("--client-queue-limit and --client-max-connections must be ≥ 0 (0: derived)");
  if (o.server.max_request_tokens < 0 || o.server.max_request_logprobs < 0)
    throw Error("--max-request-tokens and --max-request-logprobs must be ≥ 0 (0: derived)");
  if (o.engine.max_running < 1) throw Error("--max-num-seqs must be at least 1");
  if (o.engine.grammar_state_bytes < 0) throw Error("--grammar-state-bytes must be ≥ 0");
  if (o.server.response_store_bytes < 0) throw Error("--response-store-bytes must be ≥ 0");
  if (o.server.max_images_per_request < 0 || o.server.image_source.max_bytes < 1 ||
      o.backend.image_cache_bytes < 0)
    throw Error(
        "--max-images-per-request and --image-cache-bytes must be ≥ 0, --max-image-bytes ≥ 1");
  if (!o.backend.mmproj.empty() && !std::filesystem::exists(o.backend.mmproj))
    throw Error("--mmproj: no file at " + o.backend.mmproj);
  if (!o.server.image_source.allowed_local_media_path.empty() &&
      !std::filesystem::is_directory(o.server.image_source.allowed_local_media_path))
    throw Error("--allowed-local-media-path: " + o.server.image_source.allowed_local_media_path +
                " is not a directory");
  bool default_model = o.model.empty();
  std::string path = default_model ? demo_model_path() : o.model;
  if (!default_model && !std::filesystem::exists(path)) throw Error("no model file at " + path);
  context_check(path, o.engine.n_ctx, o.allow_long_context);
  o.server.model_aliases = {path, std::filesystem::path(path).filename().string()};
  o.server.model_path = path;
  o.server.total_slots = o.engine.max_running;
  o.server.version = INVAR_VERSION;
  o.server.build_info = version_text();
  for (size_t p; (p = o.server.build_info.find('\n')) != std::string::npos;)
    o.server.build_info.replace(p, 1, "; ");
  o.server.random_weights = default_model;
  if (default_model) demo_model_warn(path);
  if (o.log_format == "text")
    o.server.log_format = server::LogFormat::text;
  else if (o.log_format == "json")
    o.server.log_format = server::LogFormat::json;
  else if (o.log_format == "none")
    o.server.log_format = server::LogFormat::none;
  else
    throw Error("--log-format must be text, json or none, not '" + o.log_format + "'");

  // Every client connection is a descriptor: allow as many as the hard limit does.
  rlimit fds{};
  if (getrlimit(RLIMIT_NOFILE, &fds) == 0 && fds.rlim_cur < fds.rlim_max) {
    fds.rlim_cur = fds.rlim_max;
    setrlimit(RLIMIT_NOFILE, &fds);
  }

  // Signals are taken by sigwait below: block them before any thread starts so that every
  // thread inherits the mask.
  sigset_t sigs;
  sigemptyset(&sigs);
  for (int s : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) sigaddset(&sigs, s);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  EngineConfig ecfg = o.engine;
  server::BackendOptions bopts = o.backend;
  const std::string replay = o.replay_outputs;
  server::HttpServer srv(o.server, [path, default_model, ecfg, bopts, replay] {
    if (default_model && !std::filesystem::exists(path)) demo_model_create(path);
    if (!replay.empty()) return server::replay_backend_load(path, replay, bopts);
    return server::engine_backend_load(path, ecfg, bopts);
  });
  int port = 0;
  try {
    port = srv.bind();
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.find("in use") != std::string::npos)
      why += " (another process listens there: stop it or choose another --port)";
    throw Error(why);
  }
  srv.start();
  std::fprintf(stderr, "invar serve: listening on http://%s:%d (loading %s)\n",
               o.server.host.c_str(), port, path.c_str());
  if (o.server.response_store_bytes > 0)
    std::fprintf(stderr,
                 "invar serve: stored responses (/v1/responses) take up to %.1f MiB of memory "
                 "and are lost on restart (--response-store-bytes)\n",
                 double(o.server.response_store_bytes) / (1 << 20));

  // A loader failure ends the process; otherwise wait for a signal.
  std::thread loaded([&srv, port, default_model, path] {
    std::string err;
    if (srv.wait_loaded(&err)) {
      if (default_model) demo_model_warn(path);
      std::fprintf(stderr, "invar serve: ready on port %d\n", port);
    } else {
      std::fprintf(stderr, "invar serve: loading failed: %s\n", err.c_str());
      kill(getpid(), SIGTERM);
    }
  });
  int sig = 0;
  while (sig != SIGINT && sig != SIGTERM) sig = next_signal(sigs, nullptr);
  std::string err;
  if (srv.state() == "failed") {
    loaded.join();
    srv.wait_loaded(&err);
    srv.shutdown(0);
    throw Error("cannot load " + path + ": " + err);
  }
  std::fprintf(stderr, "invar serve: %s: draining (up to %.0f s)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", o.drain_timeout_s);
  std::atomic<bool> drained{false};
  std::thread drain([&] {
    srv.shutdown(o.drain_timeout_s);  // waits for a load in progress
    drained = true;
  });
  while (!drained) {
    timespec poll{0, 50'000'000};
    int again = next_signal(sigs, &poll);
    if (again == SIGINT || again == SIGTERM) {
      std::fprintf(stderr, "invar serve: second %s: stopping without drain\n",
                   again == SIGINT ? "SIGINT" : "SIGTERM");
      std::fflush(stderr);
      std::_Exit(128 + again);
    }
  }
  drain.join();
  loaded.join();
  std::fprintf(stderr, "invar serve: stopped\n");
  return 0;
}

// A token count as vLLM writes it (32k, 1M; peer_flags.h), rewritten to digits for CLI11; "auto"
// and -1 stand for `auto_value`.
CLI::Validator human_int(int64_t auto_value) {
  return CLI::Validator(
      [auto_value](std::string& v) {
        const auto n = human_int_parse(v, auto_value);
        if (!n) return "'" + v + "' is not a count (digits, or as 32k, 1.5m, 32K, 1M; auto)";
        v = std::to_string(*n);
        return std::string();
      },
      "COUNT");
}

Command serve_command("serve", peer_args_rewrite, [](CLI::App& root) -> Command::Run {
  auto o = std::make_shared<ServeOptions>();
  auto* s = root.add_subcommand("serve",
                                "OpenAI-compatible HTTP server (/v1/completions, "
                                "/v1/chat/completions, /v1/models, /tokenize, /detokenize, "
                                "/props, /version, /health, /metrics)");
  s->add_option("-m,--model,model", o->model,
                "GGUF model FILE (also as the first argument). Without one: a random-weight demo "
                "model, said so in the log and /v1/models, written on first use under "
                "$XDG_CACHE_HOME/invar/models (else ~/.cache/invar/models)");
  s->add_option("--host", o->server.host, "address to bind (loopback unless told otherwise)")
      ->capture_default_str();
  s->add_option("--port", o->server.port, "port (0: any free port, printed on stderr)")
      ->capture_default_str();
  s->add_option("--api-key", o->server.api_key,
                "require 'Authorization: Bearer KEY' on /v1/* and /metrics (one tenant: every "
                "request shares one prefix cache)");
  s->add_option("--api-key-file", o->server.api_key_file,
                "FILE of API keys, one tenant per line (`NAME KEY` or `KEY`): each tenant's "
                "prefix, grammar and image caches are its own, so no tenant can hit, count or "
                "time another's (docs/security.md)");
  s->add_flag("--metrics-public", o->server.metrics_public, "serve /metrics without the API key");
  s->add_option("--max-connections", o->server.max_connections,
                "open connections before new ones get 503")
      ->capture_default_str();
  s->add_option("--client-max-connections", o->server.client_max_connections,
                "open connections from one address before its new ones get 429, so that one "
                "address cannot take every connection (0: three quarters of --max-connections)")
      ->capture_default_str();
  s->add_option("--max-body-bytes", o->server.max_body_bytes, "larger request bodies get 413")
      ->capture_default_str();
  s->add_option("--queue-limit", o->server.queue_limit,
                "requests in flight (running + waiting; a request's n choices are one) before 429")
      ->capture_default_str();
  s->add_option("--client-queue-limit", o->server.client_queue_limit,
                "requests in flight of one client (its API key, else its address) before its "
                "next ones get 429, so that one client cannot fill --queue-limit for everyone "
                "(0: three quarters of --queue-limit; with one --api-key all callers are one "
                "client, and no per-client cap applies unless set)")
      ->capture_default_str();
  s->add_option("--max-request-tokens", o->server.max_request_tokens,
                "work one request may ask for: n × (prompt + max_tokens) tokens, else 400 naming "
                "the fields (0: the context × running slots / 4)")
      ->capture_default_str();
  s->add_option("--prepare-threads", o->server.prepare_threads,
                "low-priority threads that parse, render and tokenise request bodies over 64 KiB "
                "and decode and encode images (smaller text bodies are prepared on the IO "
                "threads); 0: min(2, cores)")
      ->capture_default_str();
  s->add_option("--prepare-queue", o->server.prepare_queue,
                "large request bodies waiting for a preparation thread before 429")
      ->capture_default_str();
  s->add_option("--prepare-cpu-seconds", o->server.prepare_cpu_s,
                "CPU a request's preparation (parse, template, tokeniser, the vision tower on "
                "every thread it runs on) may take before 400")
      ->capture_default_str();
  s->add_option("--idle-trim-seconds", o->server.idle_trim_s,
                "after load, return freed heap memory to the system (malloc_trim) once the server "
                "has been idle this long (0: never)")
      ->capture_default_str();
  s->add_option("--grammar-cache-bytes", o->server.grammar_cache_bytes,
                "compiled grammars (response_format, guided_*, tool calls) kept for reuse; a "
                "larger one is compiled for its request and not kept")
      ->capture_default_str();
  s->add_option("--response-store-bytes", o->server.response_store_bytes,
                "finished Responses (POST /v1/responses with store, the default) kept in memory "
                "for GET /v1/responses/{id} and previous_response_id, least recently used "
                "dropped first; 0 keeps none")
      ->capture_default_str();
  s->add_option("--grammar-state-bytes", o->engine.grammar_state_bytes,
                "grammar matcher state of all constrained requests together, an equal share each "
                "of --max-num-seqs; a request whose grammar needs more gets 400 (0: no bound)")
      ->capture_default_str();
  s->add_option("--malloc-mmap-threshold", o->server.mmap_threshold,
                "allocations of at least this many bytes are mapped and unmapped when freed "
                "(request bodies, responses); 0: glibc's dynamic threshold")
      ->capture_default_str();
  s->add_option("--max-request-logprobs", o->server.max_request_logprobs,
                "logprob candidates one request may ask for: n × (max_tokens × top logprobs + "
                "prompt × prompt logprobs), else 400 (0: 4 × --max-request-tokens)")
      ->capture_default_str();
  s->add_option("--drain-timeout", o->drain_timeout_s,
                "seconds SIGINT/SIGTERM wait for in-flight requests before cancelling them")
      ->capture_default_str();
  s->add_flag("--allow-special-in-content", o->backend.allow_special_in_content,
              "chat: text in messages that spells a control token (<|im_start|>) becomes that "
              "token, as the raw template would make it. Off by default: any end user could "
              "forge a system turn. Completions prompts always parse special tokens");
  s->add_option("--chat-template", o->backend.chat_template_file,
                "chat: render with this Jinja FILE instead of the model's tokenizer.chat_template "
                "(a model without one answers chat requests with 400)");
  s->add_option("--tool-call-parser", o->tool_call_parser,
                "chat: how tool calls in the output are read: hermes (JSON in <tool_call>), "
                "qwen3_xml (<tool_call><function=NAME><parameter=P>), none (left as text). "
                "Default: qwen3_xml if the template writes <function=, else hermes if it "
                "mentions <tool_call>, else none");
  s->add_option("--reasoning-format", o->reasoning_format,
                "chat: auto: text inside <think>...</think> goes to reasoning_content; none: it "
                "stays in content")
      ->capture_default_str();
  s->add_option("--chat-template-content-format", o->content_format,
                "chat: how message content reaches the template, as in vLLM: string (text "
                "parts joined by newlines, null content as \"\"), openai (part arrays as sent, "
                "null content as []), auto (openai if the template loops over a message's "
                "content, else string)")
      ->capture_default_str();
  o->backend.sha256_cache_dir = sha256_cache_dir_default();
  s->add_option("--sha256-cache", o->backend.sha256_cache_dir,
                "DIR where the model file's SHA-256 (for system_fingerprint) is kept between "
                "starts, keyed by the file's device, inode, size, mtime and ctime, so that a start "
                "need not read the whole file to hash it; none: hash at every start")
      ->capture_default_str();
  s->add_flag("--huge-pages", o->backend.huge_pages,
              "weights in a private copy of 2 MiB pages instead of the file's mapping: fewer TLB "
              "misses, faster prefill, same results; costs the copy at start and the sharing of "
              "the page cache with other processes (docs/memory.md)");
  s->add_option("--mmproj", o->backend.mmproj,
                "FILE: the vision tower (llama.cpp's mmproj GGUF, projector qwen3vl_merger, as "
                "Qwen3.5 repositories ship beside the model): chat requests may then hold "
                "image_url parts (data: URLs; file:// under --allowed-local-media-path). The "
                "model must be qwen35/qwen35moe with the tower's projection width");
  s->add_option("--allowed-local-media-path", o->server.image_source.allowed_local_media_path,
                "DIR: image_url parts may name file:// paths that resolve (after symbolic links "
                "and ..) inside DIR; without it file:// URLs get 400. Remote http(s) URLs are "
                "never fetched");
  s->add_option("--max-images-per-request", o->server.max_images_per_request,
                "images one chat request may hold; more get 400")
      ->capture_default_str();
  s->add_option("--max-image-bytes", o->server.image_source.max_bytes,
                "encoded bytes of one image (after base64 decoding); larger get 400")
      ->capture_default_str();
  s->add_option("--image-cache-bytes", o->backend.image_cache_bytes,
                "budget of vision-tower outputs kept across requests, keyed by the decoded "
                "pixels' SHA-256 and size: a question about an image already seen skips the "
                "encode (0: off)")
      ->capture_default_str();
  s->add_option("--replay-outputs", o->replay_outputs,
                "tests only: answer from a JSON FILE {\"text in the prompt\": \"output\"} with the "
                "model's vocabulary and template, without its weights")
      ->group("");
  EngineConfig& e = o->engine;
  s->add_option("--block-size", e.block_size, "tokens per KV block / prefix-cache unit")
      ->capture_default_str();
  s->add_option("--checkpoint-every", e.checkpoint_every,
                "recurrent-state checkpoint every N blocks")
      ->capture_default_str();
  s->add_option("--cache-bytes", e.cache_bytes, "byte budget of cached KV blocks + checkpoints")
      ->capture_default_str();
  s->add_flag("--no-prefix-cache", o->no_prefix_cache, "turn prefix-cache lookups and inserts off");
  s->add_option("--cache-dir", e.tiers.cache_dir,
                "DIR: second cache tier on disk: full blocks and checkpoints persist across "
                "restarts and are shared by every process using DIR (docs/cache-tiers.md)");
  s->add_option("--cache-dir-bytes", e.tiers.cache_dir_bytes,
                "byte budget of --cache-dir for this model (least recently used records go)")
      ->capture_default_str();
  s->add_option("--cache-redis", e.tiers.redis_url,
                "redis[s]://[[USER]:PASSWORD@]HOST[:PORT][/DB]: third cache tier shared by a "
                "fleet (budget: the server's maxmemory with an LRU policy; rediss: TLS, the "
                "certificate checked). Needs --cache-tier-key");
  s->add_option("--cache-tier-key", e.tiers.key_file,
                "FILE of at least 32 secret bytes (e.g. `openssl rand -hex 32`): records of the "
                "disk and Redis tiers are sealed (AES-256-GCM) and named with keys derived from "
                "it, so whoever can write a tier cannot forge, plant or read one. Every replica "
                "sharing a tier holds the same file. Default with --cache-dir alone: DIR/tier.key, "
                "made on first use (docs/security.md)");
  s->add_option("--cache-redis-password-file", e.tiers.redis_password_file,
                "FILE whose first line is the Redis password (AUTH; with USER@ in the URL, an ACL "
                "user's), kept off the command line");
  s->add_option("--cache-redis-ca", e.tiers.redis_ca_file,
                "PEM FILE of the CAs a rediss:// server's certificate must chain to (default: the "
                "system's)");
  s->add_option("--cache-tier-timeout", e.tiers.read_timeout_s,
                "seconds a prefix lookup waits for the disk and Redis tiers before recomputing")
      ->capture_default_str();
  s->add_option("--cache-redis-timeout", e.tiers.redis_timeout_s,
                "seconds for a Redis connect or command before it counts as failed")
      ->capture_default_str();
  s->add_option("--cache-tier-queue-bytes", e.tiers.write_queue_bytes,
                "records waiting to be written to the tiers before new ones are dropped")
      ->capture_default_str();
  s->add_option("--cache-dir-commit-ms", e.tiers.commit_delay_ms,
                "milliseconds the disk writer waits after a record for more, to make them all "
                "durable with one sync (a group commit of up to " +
                    std::to_string(e.tiers.commit_records) +
                    " records; 0: no wait, only what is already queued)")
      ->capture_default_str();
  s->add_option("--cache-dir-write-delay-ms", e.tiers.disk_write_delay_ms,
                "tests only: pause in the middle of every record file write")
      ->group("");
  s->add_option("--start-after-requests", e.start_after_requests,
                "tests only: the engine's first step waits until this many requests arrived")
      ->group("");
  s->add_option("--max-batch-tokens", e.max_batch_tokens,
                "tokens per engine step (also vLLM's --max-num-batched-tokens; 8k, 8K as vLLM "
                "reads them)")
      ->transform(human_int(e.max_batch_tokens))
      ->capture_default_str();
  s->add_option("--threads", e.threads, "compute threads (0: all cores)")->capture_default_str();
  s->add_option("--fair-ratio", e.fair_ratio,
                "while requests compete, one computes at most N times the sequences per step of "
                "the smallest competing one (its n choices take turns; 0: no bound, water-filling "
                "only). Scheduling never changes a logit")
      ->capture_default_str();
  s->add_option("--seat-quantum", e.seat_quantum,
                "engine steps a request keeps its running slot before it yields it to a request "
                "that finds every slot taken (preempted, it resumes from the prefix cache with "
                "the same bits); bounds a newcomer's wait beside --max-num-seqs long requests "
                "(0: never)")
      ->capture_default_str();
  s->add_option("--client-max-running", e.client_max_running,
                "running slots one client (API key, else peer address) may hold at once, even "
                "when the others are free (0: no cap; --seat-quantum already bounds the wait "
                "of others)")
      ->capture_default_str();
  spec_flags_add(s, e);
  s->add_option("-c,--ctx,--ctx-size,--max-model-len", e.n_ctx,
                "context limit per request (0, auto: the model's; 32k = 32000, 32K = 32768, as "
                "vLLM reads them). Past the model's trained context: refused unless "
                "--allow-long-context")
      ->transform(human_int(0))
      ->capture_default_str();
  s->add_flag("--allow-long-context", o->allow_long_context,
              "serve a --ctx-size past the context the model was trained for, with a warning "
              "(as vLLM's VLLM_ALLOW_LONG_MAX_MODEL_LEN=1): positions past it may give noise");
  s->add_option("--max-num-seqs,--parallel", e.max_running,
                "requests computing at once (also -np); more wait in the queue (--queue-limit). "
                "Each holds its live recurrent state outside --cache-bytes")
      ->capture_default_str();
  s->add_option("--simd", o->simd, "off | avx2 | avx512 (default: the best the CPU has)");
  s->add_option("--activations", o->activations,
                "f32 | q8: numerics profile of the matrix products (default f32; q8: 8-bit "
                "activations and integer dot products for Q4_K/Q5_K/Q6_K/Q8_0 weights, "
                "llama.cpp's accuracy, its own bits and system_fingerprint; docs/numerics.md)");
  s->add_option("--served-model-name", o->server.served_model_names,
                "NAME...: the names /v1/models lists and requests' \"model\" must match (else "
                "404 model_not_found); responses carry the first. Default: the model's id, "
                "path or file name");
  s->add_option("--allowed-origins", o->server.allowed_origins,
                "ORIGIN...: CORS: answer preflight OPTIONS requests and send "
                "Access-Control-Allow-Origin to these origins ('*': any). Default: none");
  s->add_option("--log-format", o->log_format,
                "one line per request on stderr (id, endpoint, status, prompt/cached/generated "
                "tokens, TTFT, duration, seed): text | json | none")
      ->capture_default_str();
  s->add_option(kPeerNoteFlag, o->peer_notes,
                "what invar does with a vLLM or llama-server flag (written by peer_flags.cpp)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->group("");
  std::string peers;
  for (const PeerFlag& f : peer_flags())
    if (peers.find(" " + f.names[0] + ",") == std::string::npos) peers += " " + f.names[0] + ",";
  peers.pop_back();
  s->footer(
      "vLLM's and llama-server's flags are answered where the meaning is the same "
      "(renamed, accepted with a log line, or refused naming why; docs/serve.md):" +
      peers + "\n");
  s->set_version_flag("--version", version_text,
                      "print the version, numerics version, build type and ISA, and exit");
  return [o]() { return run_serve(*o); };
});

}  // namespace
}  // namespace invar::app
