// What the HTTP layer needs from a loaded model: tokenisation, chat rendering and the engine's
// request interface. The server never sees a tensor; engine_backend.cpp implements this over
// Model + Tokenizer + Engine, and the server's tests implement it with a scripted fake.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "server/chat_prompt.h"
#include "tokenizer/tokenizer.h"
#include "vision/encode_bounds.h"

namespace invar::server {

// The images of a chat request, decoded and encoded by the vision tower (--mmproj), in the
// order sent: each SeqImage has ny, nx, rows and pixels_sha256; job_prompt_make places them.
struct PromptImages {
  int32_t pad_id = -1;  // <|image_pad|>: the token the chat template renders per image
  std::vector<SeqImage> images;
  double pool_cpu_s = 0;  // CPU the tower took on threads other than the caller's
};

struct ImageStats {
  int64_t encodes = 0, cache_hits = 0;  // images run through the tower / taken from its cache
  double encode_seconds = 0;
  int64_t cache_bytes = 0, cache_max_bytes = 0;
  // Encodes that began the tower, and those stopped in it: the client gone, the request's
  // CPU budget (--prepare-cpu-seconds) spent.
  int64_t started = 0, cancelled = 0, over_budget = 0;
};

// A backend by role, so that each front end sees what it uses: identity, vocabulary and chat
// template, generation, vision. Backend is all four.
class BackendIdentity {
 public:
  virtual ~BackendIdentity() = default;
  virtual std::string model_id() const = 0;            // the name /v1/models lists
  virtual std::string system_fingerprint() const = 0;  // DESIGN.md §1
};

class BackendVocabulary {
 public:
  virtual ~BackendVocabulary() = default;
  virtual int64_t n_vocab() const = 0;
  // Special-token text (e.g. "<|im_start|>") becomes its id, as vLLM and llama.cpp do. Throws
  // invar::Error for text the vocabulary cannot encode.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // As encode, but special-token text stays plain text (llama-server's parse_special: false).
  virtual std::vector<int32_t> encode_plain(std::string_view text) const = 0;
  // The chat template (chat_prompt.h), or null when the model carries none and none was given.
  virtual const ChatPrompt* chat_template() const = 0;
  // The prompt tokens of a chat. Control-token spellings inside client strings stay plain text
  // (tokenizer/control_text_guard.h) unless the server trusts its clients
  // (--allow-special-in-content); the template's own control tokens are always control tokens.
  // Throws invar::Error for what the template refuses or the vocabulary cannot encode.
  virtual ChatTokens chat_encode(const ChatInput& in) const = 0;
  virtual std::string token_bytes(int32_t id) const = 0;         // raw bytes (may be partial UTF-8)
  virtual size_t max_token_bytes() const = 0;                    // the longest token's bytes
  virtual std::vector<int32_t> end_of_sequence_ids() const = 0;  // ids that end a completion
};

class BackendGeneration {
 public:
  virtual ~BackendGeneration() = default;
  virtual int64_t n_ctx() const = 0;  // prompt + completion limit
  // What the engine checks every request against (engine/request_check.h): a front end runs
  // the same check before it queues a request, to word its faults in its own dialect.
  virtual RequestLimits request_limits() const = 0;
  // Engine calls (see engine/engine.h), with the engine's event contract: the engine decides
  // stops and hands over the text. submit throws EngineError naming the problem.
  virtual RequestId submit(GenerationRequest req, EventSink sink) = 0;
  // The n choices of one request, all or none, as Engine::submit_group: one place in the queue
  // and one party to fairness. This default (for test backends) submits them one by one and
  // cancels those already submitted when one is refused.
  virtual std::vector<RequestId> submit_group(std::vector<GenerationRequest> reqs,
                                              std::vector<EventSink> sinks);
  // Requests the engine computes at once (EngineConfig::max_running): with n_ctx, it sizes the
  // default per-request budget (invar serve --max-request-tokens).
  virtual int64_t max_running() const = 0;
  virtual void cancel(RequestId id) = 0;
  virtual EngineMetrics metrics() const = 0;
  virtual void drain(double timeout_s) = 0;
};

// Images: a backend with a vision tower (invar serve --mmproj) encodes them. images_encode
// takes the encoded files (PNG, JPEG or WebP bytes) and throws invar::Error naming what is
// wrong with the first bad one, EncodeStopped when `bounds` stop the tower; it runs on a
// preparation thread, never an IO thread, and may take seconds. image_tokens is the rows an
// image will take in the prompt, from its header alone (microseconds): the context is checked
// before anything is decoded or encoded. Throws invar::Error as images_encode does. These
// defaults: no tower.
class BackendVision {
 public:
  virtual ~BackendVision() = default;
  virtual bool vision() const { return false; }
  virtual int32_t image_pad_id() const { return -1; }  // the pad PromptImages::pad_id will be
  virtual PromptImages images_encode(std::span<const std::string> files,
                                     const EncodeBounds& bounds) const;
  virtual int64_t image_tokens(const std::string& file) const;
  virtual ImageStats image_stats() const { return {}; }
};

class Backend : public BackendIdentity,
                public BackendVocabulary,
                public BackendGeneration,
                public BackendVision {
 public:
  // This default (for test backends): n_vocab, n_ctx and a tokenizer, no cache bound, no images.
  RequestLimits request_limits() const override;
};

struct BackendOptions {
  bool allow_special_in_content = false;  // --allow-special-in-content: trusted clients only
  std::string chat_template_file;         // --chat-template: replaces the model's template
  std::optional<chat::ToolCallSyntax> tool_call_syntax;  // --tool-call-parser
  bool reasoning = true;                                 // --reasoning-format none: false
  // --chat-template-content-format string|openai (nullopt: auto, detected from the template).
  std::optional<chat::ContentFormat> content_format;
  // --sha256-cache: where the model file's SHA-256 is kept between starts ("": hashed at every
  // start; model/sha256_cache.h).
  std::string sha256_cache_dir;
  // --huge-pages: the weights are a private copy in 2 MiB pages, made at start (Model::load).
  bool huge_pages = false;
  // --mmproj: the vision tower ("": none; image parts get 400) and --image-cache-bytes, the
  // budget of its outputs kept across requests (0: every image is encoded).
  std::string mmproj;
  int64_t image_cache_bytes = int64_t(256) << 20;
};

// Tests: the model's vocabulary and chat template without weights, answering each request with
// the output in OUTPUTS ({"text the prompt contains": "output"}) one token per step
// (replay_backend.cpp). Throws invar::Error.
std::unique_ptr<Backend> replay_backend_load(const std::string& model_path,
                                             const std::string& outputs_path, BackendOptions opts);

// The chat template of a vocabulary under `opts` (null when there is none), logged on stderr
// with its origin and digest. Throws invar::Error for a file that cannot be read or compiled.
std::unique_ptr<ChatPrompt> chat_template_load(const Vocab& vocab, const Tokenizer& tok,
                                               const BackendOptions& opts);

// The chat side of a backend over a real vocabulary: the template chat_template_load gives and
// the role-injection guard (off with --allow-special-in-content).
class VocabChat {
 public:
  VocabChat(const Tokenizer& tok, const BackendOptions& opts);
  ~VocabChat();
  const ChatPrompt* prompt() const { return prompt_.get(); }
  ChatTokens encode(const ChatInput& in) const;  // Backend::chat_encode

 private:
  const Tokenizer& tok_;
  std::unique_ptr<ControlTextGuard> guard_;  // null: trusted clients
  std::unique_ptr<ChatPrompt> prompt_;
};

// Loads the GGUF model, its vocabulary and starts an engine. Throws invar::Error.
std::unique_ptr<Backend> engine_backend_load(const std::string& model_path, EngineConfig cfg,
                                             BackendOptions opts = {});

}  // namespace invar::server
