// `invar run MODEL --prompt TEXT | --tokens IDS`: greedy generation from one prompt on the
// Engine — the server's code path: scheduler, prefix cache, sampler, stop handling — printing
// the text and the order digest of the per-token top-20 lists (docs/digest.md; DESIGN §5: text
// equality is never evidence, the digest is). Same model file + same build + same tokens →
// same digest, whatever --threads, --simd or --chunk say, and the same digest the probe
// computes from `invar serve`'s answer to the same chat request. With --mmproj and --image the
// prompt starts with the image (engine/seq_images.h), read through the vision tower.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "command.h"
#include "core/activations.h"
#include "core/error.h"
#include "core/simd.h"
#include "engine/drafter_make.h"
#include "engine/engine.h"
#include "model/model.h"
#include "probe/digest.h"
#include "run_image.h"
#include "server/backend.h"
#include "spec_flags.h"
#include "tokenizer/end_of_sequence.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

constexpr int kDigestTop = 20;

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string tokens;
  bool chat = false;
  std::string chat_template;  // --chat-template: instead of the model's
  int64_t n_predict = 32;
  int top_logprobs = 0;
  int prompt_logprobs = 0;
  int threads = 1;
  std::string simd;
  std::string activations = "f32";  // numerics profile of the matrix products (core/activations.h)
  bool json = false;
  int64_t chunk = 0;
  bool ignore_eos = false;
  bool huge_pages = false;     // weights copied into 2 MiB pages (Model::load)
  std::string mmproj;          // vision tower (with --image)
  std::string image;           // PNG or JPEG through the vision tower
  std::string embeddings_out;  // --image: the embeddings as raw float32
  EngineConfig engine;         // --spec flags
};

std::vector<int32_t> run_ids_parse(const std::string& s) {
  std::vector<int32_t> ids;
  std::string cur;
  auto flush = [&] {
    if (cur.empty()) return;
    try {
      size_t used = 0;
      long long v = std::stoll(cur, &used);
      if (used != cur.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(cur);
      ids.push_back(int32_t(v));
    } catch (const std::exception&) {
      throw Error("--tokens: '" + cur + "' is not a token id");
    }
    cur.clear();
  };
  for (char ch : s) {
    if (ch == ',' || ch == ' ' || ch == '\t' || ch == '\n')
      flush();
    else
      cur += ch;
  }
  flush();
  return ids;
}

std::string fmt_float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(f));
  return buf;
}

std::string json_str(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "[{id, logprob}, ...]" of the first n candidates, the token itself first when given.
std::string candidates_json(const RequestEvent* self, const std::vector<TokenLogprob>& c,
                            size_t n) {
  std::string s = "[";
  auto one = [&](int32_t id, float lp) {
    if (s.size() > 1) s += ",";
    s += "{\"id\":" + std::to_string(id) + ",\"logprob\":" + fmt_float(lp) + "}";
  };
  if (self) one(self->token, self->logprob);
  for (size_t i = 0; i < n && i < c.size(); ++i) one(c[i].id, c[i].logprob);
  return s + "]";
}

// What the engine reported, collected on its thread.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<RequestEvent> prompt_lp, tokens;  // tokens: the completion's (no stop token)
  std::string text;
  RequestEvent finished;
  bool done = false;
  std::chrono::steady_clock::time_point first_token;
};

probe::Completion as_completion(const Collected& c) {
  probe::Completion out;
  out.text = c.text;
  for (const RequestEvent& ev : c.tokens) {
    probe::TokenRecord r;
    r.chosen.id = ev.token;
    r.chosen.logprob = double(ev.logprob);
    for (const TokenLogprob& t : ev.top) r.top.push_back({"", t.id, double(t.logprob)});
    out.tokens.push_back(std::move(r));
  }
  return out;
}

// --prompt as one user turn through the chat template, exactly as `invar serve` renders a chat
// request with that one message (its role-injection guard included).
// With --image the turn's content is an image part then the text part (an OpenAI request's
// image_url part as the template sees it), which Qwen3.5's template renders as
// <|vision_start|><|image_pad|><|vision_end|>.
std::vector<int32_t> chat_prompt_tokens(const Tokenizer& tok, const RunOptions& o) {
  server::BackendOptions bo;
  bo.chat_template_file = o.chat_template;
  const server::VocabChat chat(tok, bo);
  if (!chat.prompt())
    throw Error("--chat: the model carries no chat template; pass --chat-template FILE");
  server::ChatInput in;
  nlohmann::ordered_json content = o.prompt;
  if (!o.image.empty())
    content = nlohmann::ordered_json::array(
        {{{"type", "image"}}, {{"type", "text"}, {"text", o.prompt}}});
  in.request = {{"messages", {{{"role", "user"}, {"content", content}}}}};
  return chat.encode(in).tokens;
}

int run(const RunOptions& o) {
  if (!o.image.empty() && o.prompt.empty() && o.tokens.empty())
    return run_image(o.mmproj, o.image, o.threads, o.json, o.embeddings_out);
  if (o.model.empty()) throw Error("a model file is required");
  if (o.prompt.empty() == o.tokens.empty())
    throw Error("give exactly one of --prompt and --tokens");
  if (o.chat && !o.tokens.empty()) throw Error("--chat applies to --prompt, not --tokens");
  if (o.top_logprobs < 0 || o.top_logprobs > kDigestTop)
    throw Error("--top-logprobs must be in 0..20");
  if (o.prompt_logprobs < 0 || o.prompt_logprobs > kDigestTop)
    throw Error("--prompt-logprobs must be in 0..20");
  if (o.threads < 1) throw Error("--threads must be >= 1");
  if (o.n_predict < 0) throw Error("-n must be >= 0");
  if (o.chunk < 0) throw Error("--chunk must be >= 0");
  if (!o.mmproj.empty() && o.image.empty()) throw Error("--mmproj needs --image");
  drafter_config_check(o.engine.spec, o.engine.draft);
  if (!o.simd.empty()) {
    auto lvl = simd_parse(o.simd);
    if (!lvl) throw Error("--simd: '" + o.simd + "' is not one of off, avx2, avx512");
    simd_set(*lvl);
  }
  const auto profile = activations_parse(o.activations);
  if (!profile) throw Error("--activations: '" + o.activations + "' is not one of f32, q8");
  activations_set(*profile);

  auto model = Model::load(o.model, /*populate_now=*/true, o.huge_pages);
  Tokenizer tok(vocab_from_gguf(model->gguf()));
  for (const std::string& w : tok.vocab().warnings)
    std::fprintf(stderr, "invar run: warning: %s\n", w.c_str());
  std::vector<int32_t> prompt;
  if (!o.tokens.empty())
    prompt = run_ids_parse(o.tokens);
  else if (o.chat)
    prompt = chat_prompt_tokens(tok, o);
  else if (!o.image.empty())  // the image first, then the text (as the chat template puts it)
    prompt = tok.encode("<|vision_start|><|image_pad|><|vision_end|>" + o.prompt, true);
  else
    prompt = tok.encode(o.prompt, false);
  if (prompt.empty()) throw Error("the prompt has no tokens");
  std::shared_ptr<const SeqImages> images;
  if (!o.image.empty()) {
    ImagePrompt ip = image_prompt(o.mmproj, o.image, *model, tok, std::move(prompt), o.threads);
    prompt = std::move(ip.tokens);
    images = std::move(ip.images);
    const SeqImage& im = images->images.front();
    std::fprintf(stderr, "image %s: %lld x %lld merged tokens at %lld, encoded in %.1f ms\n",
                 o.image.c_str(), static_cast<long long>(im.ny), static_cast<long long>(im.nx),
                 static_cast<long long>(im.start), ip.encode_ms);
  }
  const int64_t n_prompt = int64_t(prompt.size());

  EngineConfig cfg = o.engine;
  cfg.threads = o.threads;
  cfg.max_batch_tokens = o.chunk > 0 ? o.chunk : n_prompt;  // prefill chunk (0: whole prompt)
  if (cfg.spec != "none")                                   // room for a verification chunk
    cfg.max_batch_tokens = std::max(cfg.max_batch_tokens, cfg.draft.max_k + 1);
  cfg.max_running = 1;
  cfg.prefix_cache = false;
  Engine engine(*model, &tok, cfg);

  GenerationRequest req;
  req.prompt = prompt;
  req.images = images;
  req.max_tokens = o.n_predict;  // sampling: greedy (argmax, ties to the smaller id)
  if (!o.ignore_eos) req.stop_tokens = end_of_sequence_ids(tok);
  req.top_logprobs = std::min<int64_t>(kDigestTop, model->hparams().n_vocab);
  if (o.prompt_logprobs > 0) req.prompt_logprobs = o.prompt_logprobs;

  Collected got;
  const bool echo = !o.json;
  const auto t0 = std::chrono::steady_clock::now();
  engine.submit(std::move(req), [&got, echo](RequestEvent&& ev) {
    std::lock_guard lk(got.mu);
    if (ev.kind == EventKind::prompt_logprobs) return got.prompt_lp.push_back(std::move(ev));
    if (echo) std::fputs(ev.text.c_str(), stdout), std::fflush(stdout);
    got.text += ev.text;
    if (ev.kind == EventKind::token) {
      if (got.tokens.empty()) got.first_token = std::chrono::steady_clock::now();
      if (!ev.stop_token) got.tokens.push_back(std::move(ev));
      return;
    }
    got.finished = std::move(ev);
    got.done = true;
    got.cv.notify_all();
  });
  {
    std::unique_lock lk(got.mu);
    got.cv.wait(lk, [&] { return got.done; });
  }
  const auto t2 = std::chrono::steady_clock::now();
  if (got.finished.finish == FinishReason::error) throw Error(got.finished.error);
  const std::string digest = probe::completion_digests(as_completion(got)).order;

  if (o.json) {
    std::string s = "{\"prompt_tokens\":[";
    for (size_t i = 0; i < prompt.size(); ++i) s += (i ? "," : "") + std::to_string(prompt[i]);
    s += "],\"prompt_logprobs\":[";
    for (size_t i = 0; i < got.prompt_lp.size(); ++i) {
      const RequestEvent& ev = got.prompt_lp[i];
      s += (i ? "," : "") + candidates_json(&ev, ev.top, ev.top.size());
    }
    s += "],\"tokens\":[";
    for (size_t i = 0; i < got.tokens.size(); ++i) {
      const RequestEvent& ev = got.tokens[i];
      s += (i ? "," : "");
      s += "{\"id\":" + std::to_string(ev.token) +
           ",\"text\":" + json_str(tok.token_bytes(ev.token)) +
           ",\"logprob\":" + fmt_float(ev.logprob) +
           ",\"top_logprobs\":" + candidates_json(nullptr, ev.top, size_t(o.top_logprobs)) + "}";
    }
    s += "],\"digest\":\"" + digest + "\"}\n";
    std::fputs(s.c_str(), stdout);
  } else {
    std::fputs("\n", stdout);
    for (size_t i = 0; o.top_logprobs > 0 && i < got.tokens.size(); ++i) {
      const RequestEvent& ev = got.tokens[i];
      std::printf("[%zu] %d %s:", i, ev.token, fmt_float(ev.logprob).c_str());
      for (int j = 0; j < o.top_logprobs && j < int(ev.top.size()); ++j)
        std::printf(" %d=%s", ev.top[size_t(j)].id, fmt_float(ev.top[size_t(j)].logprob).c_str());
      std::printf("\n");
    }
    std::printf("digest %s\n", digest.c_str());
  }
  const auto t1 = got.tokens.empty() ? t2 : got.first_token;
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t2 - t1).count();
  const size_t n_gen = size_t(got.finished.usage.completion_tokens);
  std::fflush(stdout);  // the text first, then the timing line on stderr
  std::fprintf(stderr,
               "prompt %lld tokens %.3f s (%.1f tok/s), generated %zu tokens %.3f s "
               "(%.1f tok/s), threads %d, simd %s, activations %s\n",
               (long long)n_prompt, pre_s, double(n_prompt) / pre_s, n_gen, dec_s,
               n_gen > 1 ? double(n_gen - 1) / dec_s : 0.0, o.threads,
               std::string(simd_name(simd_active())).c_str(),
               std::string(activations_name(activations_active())).c_str());
  if (got.finished.usage.speculative)
    std::fprintf(stderr, "spec %s: %lld drafted, %lld accepted\n", o.engine.spec.c_str(),
                 static_cast<long long>(got.finished.usage.draft_tokens),
                 static_cast<long long>(got.finished.usage.accepted_draft_tokens));
  return 0;
}

Command run_command("run", [](CLI::App& root) -> Command::Run {
  auto o = std::make_shared<RunOptions>();
  auto* c = root.add_subcommand(
      "run",
      "Greedy generation from one prompt on the engine; prints the text and the digest "
      "of the per-token top-20 logprob lists (docs/digest.md)");
  c->add_option("model", o->model, "GGUF model file");
  c->add_option("--mmproj", o->mmproj,
                "vision tower: an mmproj GGUF in llama.cpp's layout (qwen3vl_merger)");
  c->add_option("--image", o->image,
                "a PNG or JPEG through --mmproj: with --prompt or --tokens (one <|image_pad|> "
                "where it goes) the model reads it before the text; alone, print its token "
                "count, encode time and the embeddings' SHA-256");
  c->add_option("--embeddings-out", o->embeddings_out,
                "--image: also write the embeddings to FILE, [tokens][width] float32");
  c->add_option("--prompt", o->prompt, "prompt text");
  c->add_option("--tokens", o->tokens, "prompt token ids, comma or space separated");
  c->add_flag("--chat", o->chat,
              "render --prompt as one user turn with the model's chat template (as invar serve "
              "renders it) + the generation prompt");
  c->add_option("--chat-template", o->chat_template, "--chat: a Jinja FILE instead of the model's");
  c->add_option("-n", o->n_predict, "tokens to generate (default 32)");
  c->add_option("--top-logprobs", o->top_logprobs, "print the top K (0..20) of each step");
  c->add_option("--prompt-logprobs", o->prompt_logprobs,
                "for each prompt position >= 1: the prompt token's logprob, then the top K");
  c->add_option("--threads", o->threads, "threads (results do not depend on it)");
  c->add_option("--simd", o->simd, "off|avx2|avx512 (default: the best the CPU has)");
  c->add_option("--activations", o->activations,
                "f32|q8: numerics profile of the matrix products (default f32; q8: 8-bit "
                "activations and integer dot products for Q4_K/Q5_K/Q6_K/Q8_0 weights, "
                "llama.cpp's accuracy, other bits; docs/numerics.md)");
  c->add_flag("--json", o->json, "print one JSON object (logprobs as %.9g)");
  c->add_option("--chunk", o->chunk, "prefill chunk size in tokens (0: whole prompt)");
  c->add_flag("--ignore-eos", o->ignore_eos, "do not stop at end-of-sequence tokens");
  c->add_flag("--huge-pages", o->huge_pages,
              "weights in a private copy of 2 MiB pages instead of the file's mapping (fewer TLB "
              "misses; same results)");
  spec_flags_add(c, o->engine);
  return [o]() { return run(*o); };
});

}  // namespace
}  // namespace invar::app
