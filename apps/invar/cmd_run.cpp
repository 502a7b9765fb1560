// `invar run MODEL --prompt TEXT | --tokens IDS`: greedy generation from one prompt, printing
// the text and a SHA-256 digest of the per-token top-20 lists (DESIGN §5: text equality is
// never evidence; the digest is). Same model file + same build + same tokens → same digest,
// whatever --threads, --simd or --chunk say.
//
// Digest: SHA-256 over every generated token, in order, of
//   id (int32 LE), then 20 × (candidate id (int32 LE), its logprob (float32 bits LE)),
// candidates ordered by logprob descending, then id ascending (rule N6).
#include <openssl/evp.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "command.h"
#include "core/error.h"
#include "core/simd.h"
#include "core/thread_pool.h"
#include "kernels/select.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

constexpr int kDigestTop = 20;
constexpr int64_t kBlockSize = 16;

struct RunOptions {
  std::string model;
  std::string prompt;
  std::string tokens;
  bool chat = false;
  int64_t n_predict = 32;
  int top_logprobs = 0;
  int prompt_logprobs = 0;
  int threads = 1;
  std::string simd;
  bool json = false;
  int64_t chunk = 0;
  bool ignore_eos = false;
};

struct Candidate {
  int32_t id;
  float logprob;
};

struct Step {
  int32_t id;
  float logprob;
  std::vector<Candidate> top;  // [kDigestTop]
};

std::vector<int32_t> parse_ids(const std::string& s) {
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

// The top-k candidates of one distribution (k ≤ V) from its log-softmax.
std::vector<Candidate> top_candidates(const float* logprobs, int64_t v, int64_t k,
                                      std::vector<int32_t>& ids, std::vector<float>& vals) {
  ids.resize(size_t(k));
  vals.resize(size_t(k));
  top_k(logprobs, v, k, ids.data(), vals.data());
  std::vector<Candidate> out(static_cast<size_t>(k));
  for (int64_t i = 0; i < k; ++i) out[size_t(i)] = {ids[size_t(i)], vals[size_t(i)]};
  return out;
}

std::string fmt_float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", double(f));
  return buf;
}

std::string json_str(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string candidates_json(const std::vector<Candidate>& c, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n && i < c.size(); ++i) {
    if (i) s += ",";
    s += "{\"id\":" + std::to_string(c[i].id) + ",\"logprob\":" + fmt_float(c[i].logprob) + "}";
  }
  return s + "]";
}

std::string digest_hex(const std::vector<Step>& steps) {
  std::vector<uint8_t> bytes;
  auto put = [&](const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
  };
  for (const Step& st : steps) {
    put(&st.id, 4);
    for (const Candidate& c : st.top) {
      put(&c.id, 4);
      put(&c.logprob, 4);
    }
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

int run(const RunOptions& o) {
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
  if (!o.simd.empty()) {
    auto lvl = simd_parse(o.simd);
    if (!lvl) throw Error("--simd: '" + o.simd + "' is not one of off, avx2, avx512");
    simd_set(*lvl);
  }

  auto model = Model::load(o.model);
  const Hparams& hp = model->hparams();
  const int64_t V = hp.n_vocab;
  Tokenizer tok(vocab_from_gguf(model->gguf()));

  std::vector<int32_t> prompt;
  if (!o.tokens.empty()) {
    prompt = parse_ids(o.tokens);
  } else if (o.chat) {
    prompt = tok.encode(chat_render({{"user", o.prompt}}, true), true);
  } else {
    prompt = tok.encode(o.prompt, false);
  }
  if (prompt.empty()) throw Error("the prompt has no tokens");
  for (int32_t id : prompt)
    if (id < 0 || id >= V)
      throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                  std::to_string(V - 1) + ")");
  const int64_t n_prompt = int64_t(prompt.size());
  const int64_t n_total = n_prompt + o.n_predict;
  if (n_total > hp.n_ctx_train)
    throw Error("prompt + -n = " + std::to_string(n_total) + " tokens exceeds the context of " +
                std::to_string(hp.n_ctx_train));

  ThreadPool pool(o.threads);
  std::vector<float> state(size_t(model->state_floats()), 0.0f);
  const int64_t n_blocks = (n_total + kBlockSize - 1) / kBlockSize;
  std::vector<float> kv(size_t(n_blocks * model->kv_block_floats(kBlockSize)));
  std::vector<float*> blocks(static_cast<size_t>(n_blocks));
  for (int64_t b = 0; b < n_blocks; ++b)
    blocks[size_t(b)] = kv.data() + b * model->kv_block_floats(kBlockSize);

  // Prefill: chunks of --chunk tokens (0: the whole prompt in one call).
  const bool want_prompt_lp = o.prompt_logprobs > 0;
  std::vector<float> prompt_logits(want_prompt_lp ? size_t(n_prompt * V) : 0);
  std::vector<float> logits(static_cast<size_t>(V)), logprobs(static_cast<size_t>(V));
  const int64_t chunk = o.chunk > 0 ? o.chunk : n_prompt;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t p = 0; p < n_prompt; p += chunk) {
    SeqChunk c;
    c.tokens = prompt.data() + p;
    c.n_tokens = std::min(chunk, n_prompt - p);
    c.pos0 = p;
    c.state = state.data();
    c.kv_blocks = blocks.data();
    c.block_size = kBlockSize;
    c.all_logits = want_prompt_lp;
    c.logits = want_prompt_lp ? prompt_logits.data() + p * V : logits.data();
    model->forward({&c, 1}, pool);
  }
  if (want_prompt_lp)
    std::memcpy(logits.data(), prompt_logits.data() + (n_prompt - 1) * V, size_t(V) * 4);
  auto t1 = std::chrono::steady_clock::now();

  std::vector<int32_t> ids_buf;
  std::vector<float> vals_buf;
  std::vector<std::vector<Candidate>> prompt_lp;  // per position ≥ 1: the token, then top K
  for (int64_t p = 1; want_prompt_lp && p < n_prompt; ++p) {
    log_softmax(prompt_logits.data() + (p - 1) * V, V, logprobs.data());
    std::vector<Candidate> row{{prompt[size_t(p)], logprobs[size_t(prompt[size_t(p)])]}};
    for (const Candidate& c : top_candidates(logprobs.data(), V, o.prompt_logprobs, ids_buf,
                                             vals_buf))
      row.push_back(c);
    prompt_lp.push_back(std::move(row));
  }

  // Greedy decode: the argmax (ties → smaller id) of each step's distribution.
  const int32_t eos = tok.vocab().eos_id;
  const int64_t k_top = std::min<int64_t>(kDigestTop, V);
  std::vector<Step> steps;
  std::string text;
  StreamDecoder dec(tok);
  int64_t pos = n_prompt;
  for (int64_t i = 0; i < o.n_predict; ++i) {
    log_softmax(logits.data(), V, logprobs.data());
    Step st;
    st.top = top_candidates(logprobs.data(), V, k_top, ids_buf, vals_buf);
    int32_t best;
    float best_v;
    top_k(logits.data(), V, 1, &best, &best_v);
    st.id = best;
    st.logprob = logprobs[size_t(best)];
    steps.push_back(st);
    std::string piece = dec.push(best);
    text += piece;
    if (!o.json) {
      std::fputs(piece.c_str(), stdout);
      std::fflush(stdout);
    }
    if ((best == eos && !o.ignore_eos) || i + 1 == o.n_predict) break;
    SeqChunk c;
    c.tokens = &steps.back().id;
    c.n_tokens = 1;
    c.pos0 = pos++;
    c.state = state.data();
    c.kv_blocks = blocks.data();
    c.block_size = kBlockSize;
    c.logits = logits.data();
    model->forward({&c, 1}, pool);
  }
  std::string tail = dec.flush();
  text += tail;
  auto t2 = std::chrono::steady_clock::now();
  const std::string digest = digest_hex(steps);

  if (o.json) {
    std::string s = "{\"prompt_tokens\":[";
    for (size_t i = 0; i < prompt.size(); ++i) s += (i ? "," : "") + std::to_string(prompt[i]);
    s += "],\"prompt_logprobs\":[";
    for (size_t i = 0; i < prompt_lp.size(); ++i)
      s += (i ? "," : "") + candidates_json(prompt_lp[i], prompt_lp[i].size());
    s += "],\"tokens\":[";
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& st = steps[i];
      s += (i ? "," : "");
      s += "{\"id\":" + std::to_string(st.id) + ",\"text\":" + json_str(tok.token_bytes(st.id)) +
           ",\"logprob\":" + fmt_float(st.logprob) +
           ",\"top_logprobs\":" + candidates_json(st.top, size_t(o.top_logprobs)) + "}";
    }
    s += "],\"digest\":\"" + digest + "\"}\n";
    std::fputs(s.c_str(), stdout);
  } else {
    std::fputs(tail.c_str(), stdout);
    std::fputs("\n", stdout);
    for (size_t i = 0; o.top_logprobs > 0 && i < steps.size(); ++i) {
      std::printf("[%zu] %d %s:", i, steps[i].id, fmt_float(steps[i].logprob).c_str());
      for (int j = 0; j < o.top_logprobs && j < int(steps[i].top.size()); ++j)
        std::printf(" %d=%s", steps[i].top[size_t(j)].id,
                    fmt_float(steps[i].top[size_t(j)].logprob).c_str());
      std::printf("\n");
    }
    std::printf("digest %s\n", digest.c_str());
  }
  const double pre_s = std::chrono::duration<double>(t1 - t0).count();
  const double dec_s = std::chrono::duration<double>(t2 - t1).count();
  std::fflush(stdout);  // the text first, then the timing line on stderr
  std::fprintf(stderr, "prompt %lld tokens %.3f s (%.1f tok/s), generated %zu tokens %.3f s "
               "(%.1f tok/s), threads %d, simd %s\n",
               (long long)n_prompt, pre_s, double(n_prompt) / pre_s, steps.size(), dec_s,
               steps.size() > 1 ? double(steps.size() - 1) / dec_s : 0.0, o.threads,
               std::string(simd_name(simd_active())).c_str());
  return 0;
}

Command run_command("run", [](CLI::App& root) -> Command::Run {
  auto o = std::make_shared<RunOptions>();
  auto* c = root.add_subcommand(
      "run", "Greedy generation from one prompt; prints the text and a SHA-256 digest of the "
             "per-token top-20 logprob lists");
  c->add_option("model", o->model, "GGUF model file")->required();
  c->add_option("--prompt", o->prompt, "prompt text");
  c->add_option("--tokens", o->tokens, "prompt token ids, comma or space separated");
  c->add_flag("--chat", o->chat, "wrap --prompt as one ChatML user turn + assistant prompt");
  c->add_option("-n", o->n_predict, "tokens to generate (default 32)");
  c->add_option("--top-logprobs", o->top_logprobs, "print the top K (0..20) of each step");
  c->add_option("--prompt-logprobs", o->prompt_logprobs,
                "for each prompt position >= 1: the prompt token's logprob, then the top K");
  c->add_option("--threads", o->threads, "threads (results do not depend on it)");
  c->add_option("--simd", o->simd, "off|avx2|avx512 (default: the best the CPU has)");
  c->add_flag("--json", o->json, "print one JSON object (logprobs as %.9g)");
  c->add_option("--chunk", o->chunk, "prefill chunk size in tokens (0: whole prompt)");
  c->add_flag("--ignore-eos", o->ignore_eos, "do not stop at the end-of-text token");
  return [o]() { return run(*o); };
});

}  // namespace
}  // namespace invar::app
