// `invar bench grammar [--model F]`: what structured output costs.
//   1. Per-token mask time (median, p99, max) of Matcher::fill_mask along seeded random walks (a
//      uniformly random allowed token per step, as sampling from flat logits would pick) for a
//      JSON Schema, json_object, a regex and a GBNF grammar, on the Qwen3 vocabulary (151,669
//      ids) and on it extended to Qwen3.5's size (248,320 ids) with tokens made of two existing
//      ones: the trie grows the way a larger BPE vocabulary's does (longer, rarer merges).
//   2. With --model: engine decode tokens/s of one greedy request, unconstrained and under a
//      JSON Schema, rounds interleaved (A B A B ...), medians, and their ratio; each schema with
//      the masks computed while the forward pass runs (the engine's default) and after it.
//   3. With --peer llama-server=PATH as well: llama.cpp's grammar sampler on the same file,
//      prompt, schemas and threads, its rounds between invar's (bench_grammar_peer.h).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "bench_clock.h"
#include "bench_grammar_peer.h"
#include "bench_registry.h"
#include "core/error.h"
#include "engine/constraint.h"
#include "engine/engine.h"
#include "grammar/compile.h"
#include "grammar/matcher.h"
#include "model/model.h"
#include "tokenizer/end_of_sequence.h"
#include "tokenizer/tokenizer.h"

namespace invar::app {
namespace {

using Clock = std::chrono::steady_clock;

struct GrammarBenchArgs {
  std::string tokenizer = std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json";
  int64_t extend_to = 248320;  // Qwen3.5's vocabulary size; 0: the tokenizer's only
  int walks = 8, steps = 200;
  std::string model;  // decode comparison when given
  std::string peer;   // "llama-server=PATH": llama.cpp's grammar sampler beside invar's
  int64_t decode = 48;
  int rounds = 8;
  int threads = 0;
};

const char* kInvoice = R"({"type":"object","properties":{
  "invoice_number":{"type":"string","pattern":"^INV-\\d{6}$"},"issue_date":{"type":"string","format":"date"},
  "currency":{"enum":["EUR","USD","JPY"]},
  "seller":{"type":"object","properties":{"name":{"type":"string","maxLength":40},"vat":{"type":["string","null"]}},
            "required":["name"],"additionalProperties":false},
  "lines":{"type":"array","minItems":1,"items":{"type":"object","properties":{
     "sku":{"type":"string"},"quantity":{"type":"integer","minimum":1,"maximum":1000},
     "unit_price":{"type":"number","minimum":0}},"required":["sku","quantity","unit_price"],"additionalProperties":false}},
  "notes":{"type":"string"}},
  "required":["invoice_number","issue_date","currency","seller","lines"],"additionalProperties":false})";

// The invoice without its `pattern`: llama.cpp's json-schema-to-grammar fails on the invoice's
// "^INV-\\d{6}$" ("failed to parse grammar"), so both sides also run this one.
std::string invoice_without_pattern() {
  auto j = nlohmann::ordered_json::parse(kInvoice);
  j["properties"]["invoice_number"].erase("pattern");
  return j.dump();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The tokenizer's vocabulary as the engine gives it to the grammar, optionally extended to
// `extend_to` ids by seeded concatenations of two normal tokens.
std::shared_ptr<const grammar::Vocabulary> vocab_make(const Tokenizer& tok, int64_t extend_to) {
  auto base = grammar_vocabulary(tok, end_of_sequence_ids(tok));
  if (extend_to <= static_cast<int64_t>(base->size())) return base;
  std::vector<std::string> bytes;
  for (size_t id = 0; id < base->size(); ++id) bytes.push_back(base->token(int32_t(id)));
  std::vector<size_t> normal;
  for (size_t id = 0; id < bytes.size(); ++id)
    if (!bytes[id].empty()) normal.push_back(id);
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<size_t> pick(0, normal.size() - 1);
  while (static_cast<int64_t>(bytes.size()) < extend_to)
    bytes.push_back(bytes[normal[pick(rng)]] + bytes[normal[pick(rng)]]);
  return std::make_shared<const grammar::Vocabulary>(std::move(bytes), base->eos_ids());
}

void mask_table(const grammar::Vocabulary& vocab, const std::string& label,
                const GrammarBenchArgs& a) {
  using grammar::Kind;
  const std::vector<std::pair<std::string, std::pair<Kind, std::string>>> cases = {
      {"json_schema invoice", {Kind::json_schema, kInvoice}},
      {"json_object", {Kind::json_object, ""}},
      {"regex email", {Kind::regex, "[a-z0-9._]{1,20}@[a-z]{2,10}\\.(com|org|net)"}},
      {"gbnf arithmetic",
       {Kind::gbnf,
        "root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]{1,6} | \"(\" expr \")\""}},
  };
  std::printf(
      "\n## Mask time per token: %s, %zu ids, %zu trie nodes; %d walks of up to %d "
      "tokens\n\n",
      label.c_str(), vocab.size(), vocab.nodes().size(), a.walks, a.steps);
  std::printf("| grammar | tokens | compile ms | median µs | p99 µs | max µs | allowed |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  auto shared = std::shared_ptr<const grammar::Vocabulary>(std::shared_ptr<void>(), &vocab);
  for (const auto& [name, c] : cases) {
    auto t0 = Clock::now();
    auto g = grammar::compile(c.first, c.second);
    const double compile_ms = seconds_since(t0) * 1e3;
    std::vector<double> us;
    double allowed = 0;
    std::vector<uint64_t> words(vocab.mask_words());
    std::vector<int32_t> ids;
    for (int w = 0; w < a.walks; ++w) {
      std::mt19937_64 rng(static_cast<uint64_t>(w) + 1);
      grammar::Matcher m(g, shared);
      for (int step = 0; step < a.steps; ++step) {
        const auto s0 = Clock::now();
        m.fill_mask(words);
        us.push_back(seconds_since(s0) * 1e6);
        ids.clear();
        for (size_t i = 0; i < vocab.size(); ++i)
          if ((words[i >> 6] >> (i & 63)) & 1) ids.push_back(static_cast<int32_t>(i));
        allowed += static_cast<double>(ids.size());
        if (ids.empty()) break;
        m.accept_token(ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)]);
        if (m.is_terminated()) break;
      }
    }
    std::printf("| %s | %zu | %.2f | %.1f | %.1f | %.1f | %.0f |\n", name.c_str(), us.size(),
                compile_ms, percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0),
                allowed / static_cast<double>(us.size()));
  }
}

struct GrammarRun {
  double tok_s = 0;
  int64_t tokens = 0;
};

// One greedy request: decode tokens/s from its first token to its last.
GrammarRun decode_once(Engine& e, const std::vector<int32_t>& prompt, int64_t n,
                       std::shared_ptr<const grammar::Grammar> g) {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  GrammarRun d;
  std::string error;
  Clock::time_point first, last;
  GenerationRequest r;
  r.prompt = prompt;
  r.max_tokens = n;
  r.grammar = std::move(g);
  e.submit(r, [&](RequestEvent&& ev) {
    std::lock_guard lk(mu);
    if (ev.kind == EventKind::token) {
      last = Clock::now();
      if (d.tokens++ == 0) first = last;
    }
    if (ev.kind == EventKind::finished) {
      error = ev.error;
      done = true;
      cv.notify_all();
    }
  });
  std::unique_lock lk(mu);
  cv.wait(lk, [&] { return done; });
  if (!error.empty()) throw Error("bench grammar: request failed: " + error);
  const double s = std::chrono::duration<double>(last - first).count();
  d.tok_s = d.tokens > 1 && s > 0 ? static_cast<double>(d.tokens - 1) / s : 0;
  return d;
}

void decode_table(const GrammarBenchArgs& a) {
  const auto model = Model::load(a.model);
  const auto tok = Tokenizer::from_file(a.model);
  EngineConfig cfg;
  cfg.threads = a.threads;
  cfg.prefix_cache = false;  // every round prefills and decodes the same work
  Engine overlapped(*model, tok.get(), cfg);
  cfg.mask_overlap = false;
  Engine serial(*model, tok.get(), cfg);
  const std::string prompt_text =
      "Extract the invoice fields as JSON. Invoice INV-004211, 2026-11-30, "
      "ACME GmbH, 3 x widget at 12.50 EUR.";
  const std::vector<int32_t> prompt = tok->encode(prompt_text, false);
  const std::string kLongString = R"({"type":"string","minLength":2000})";
  // The invoice schema (a realistic extraction), and a long free string whose every character
  // is a new grammar state (minLength counts them): a new state costs a vocabulary-trie walk,
  // the mask's worst case. Each constrained run twice: masks computed while the forward pass
  // runs (the default) and after it.
  const auto invoice = grammar::compile_cached(grammar::Kind::json_schema, kInvoice);
  const auto long_string = grammar::compile_cached(grammar::Kind::json_schema, kLongString);
  const std::string kPlainInvoice = invoice_without_pattern();
  const auto plain_invoice = grammar::compile_cached(grammar::Kind::json_schema, kPlainInvoice);
  struct Run {
    std::string name;
    Engine* engine;
    std::shared_ptr<const grammar::Grammar> g;
  };
  const std::vector<Run> runs = {
      {"unconstrained", &overlapped, nullptr},
      {"JSON Schema invoice", &overlapped, invoice},
      {"JSON Schema invoice, masks after the forward", &serial, invoice},
      {"string, minLength 2000", &overlapped, long_string},
      {"string, minLength 2000, masks after the forward", &serial, long_string},
      {"JSON Schema invoice without its pattern", &overlapped, plain_invoice},
  };
  std::vector<std::vector<double>> tok_s(runs.size()), ratio(runs.size());
  std::vector<int64_t> tokens(runs.size());
  // llama.cpp on the same schemas: none, the invoice, the long string.
  std::unique_ptr<GrammarPeer> peer;
  if (!a.peer.empty()) {
    const std::string prefix = "llama-server=";
    if (a.peer.rfind(prefix, 0) != 0)
      throw Error("bench grammar: --peer takes llama-server=PATH, not '" + a.peer + "'");
    peer = std::make_unique<GrammarPeer>(a.peer.substr(prefix.size()), a.model,
                                         overlapped.config().threads);
  }
  const std::vector<std::pair<std::string, std::string>> peer_runs = {
      {"unconstrained", ""},
      {"JSON Schema invoice", kInvoice},
      {"string, minLength 2000", kLongString},
      {"JSON Schema invoice without its pattern", kPlainInvoice}};
  std::vector<std::string> peer_error(peer_runs.size());  // a refusal, kept per schema
  std::vector<std::vector<double>> peer_tok_s(peer_runs.size()), peer_ratio(peer_runs.size());
  std::vector<int64_t> peer_tokens(peer_runs.size());
  for (int r = 0; r < a.rounds; ++r) {
    for (size_t i = 0; i < runs.size(); ++i) {
      const GrammarRun d = decode_once(*runs[i].engine, prompt, a.decode, runs[i].g);
      tok_s[i].push_back(d.tok_s);
      tokens[i] = d.tokens;
      ratio[i].push_back(d.tok_s / tok_s[0].back());
    }
    for (size_t i = 0; peer && i < peer_runs.size(); ++i) {
      if (!peer_error[i].empty()) continue;
      try {
        const GrammarPeer::Decoded d = peer->decode(prompt_text, a.decode, peer_runs[i].second);
        peer_tok_s[i].push_back(d.tok_s);
        peer_tokens[i] = d.tokens;
        peer_ratio[i].push_back(peer_tok_s[0].empty() ? 0 : d.tok_s / peer_tok_s[0].back());
      } catch (const Error& e) {
        peer_error[i] = e.what();
      }
    }
  }
  std::printf(
      "\n## Engine decode, one greedy request: %s, prompt %zu tokens, up to %lld tokens, "
      "%d threads, %d rounds interleaved\n\n",
      a.model.c_str(), prompt.size(), static_cast<long long>(a.decode), overlapped.config().threads,
      a.rounds);
  std::printf(
      "| run | tokens | median tok/s | best tok/s | ÷ unconstrained, pair by pair: median "
      "(min) |\n|---|---|---|---|---|\n");
  for (size_t i = 0; i < runs.size(); ++i)
    std::printf("| %s | %lld | %.2f | %.2f | %.3f (%.3f) |\n", runs[i].name.c_str(),
                static_cast<long long>(tokens[i]), percentile(tok_s[i], 0.5),
                *std::max_element(tok_s[i].begin(), tok_s[i].end()), percentile(ratio[i], 0.5),
                *std::min_element(ratio[i].begin(), ratio[i].end()));
  if (!peer) return;
  // The grammar's cost per token on each side: 1/constrained − 1/unconstrained, medians.
  std::printf(
      "\n## Side by side, the same rounds: invar (masks while the forward runs) and llama.cpp "
      "(%s, one slot, predicted_per_second)\n\n| run | invar tok/s | invar ÷ unconstrained | "
      "llama.cpp tokens | llama.cpp tok/s | llama.cpp ÷ unconstrained | invar ÷ llama.cpp |\n"
      "|---|---|---|---|---|---|---|\n",
      a.peer.c_str());
  const size_t invar_of[] = {0, 1, 3, 5};  // runs[] entries matching peer_runs[]
  for (size_t i = 0; i < peer_runs.size(); ++i) {
    const size_t k = invar_of[i];
    if (peer_tok_s[i].empty()) {
      std::printf("| %s | %.2f | %.3f | llama-server refused: %s | | | |\n",
                  peer_runs[i].first.c_str(), percentile(tok_s[k], 0.5), percentile(ratio[k], 0.5),
                  peer_error[i].c_str());
      continue;
    }
    std::printf("| %s | %.2f | %.3f | %lld | %.2f | %.3f | %.2f |\n", peer_runs[i].first.c_str(),
                percentile(tok_s[k], 0.5), percentile(ratio[k], 0.5),
                static_cast<long long>(peer_tokens[i]), percentile(peer_tok_s[i], 0.5),
                percentile(peer_ratio[i], 0.5),
                percentile(tok_s[k], 0.5) / percentile(peer_tok_s[i], 0.5));
  }
}

int run_bench(const GrammarBenchArgs& a) {
  if (!a.peer.empty() && a.model.empty())
    throw Error("bench grammar: --peer compares decode on a model: give --model too");
  const auto tok = Tokenizer::from_file(a.tokenizer);
  auto t0 = Clock::now();
  const auto base = vocab_make(*tok, 0);
  std::printf("vocabulary %s: built in %.0f ms (once per engine)\n", a.tokenizer.c_str(),
              seconds_since(t0) * 1e3);
  mask_table(*base, "tokenizer vocabulary", a);
  if (a.extend_to > static_cast<int64_t>(base->size()))
    mask_table(*vocab_make(*tok, a.extend_to), "extended with two-token concatenations", a);
  if (!a.model.empty()) decode_table(a);
  return 0;
}

BenchKind grammar_bench("grammar", [](CLI::App& bench) -> Command::Run {
  auto a = std::make_shared<GrammarBenchArgs>();
  auto* s = bench.add_subcommand(
      "grammar",
      "Structured output's cost: per-token mask time (median, p99) for JSON Schema,\n"
      "json_object, regex and GBNF on the Qwen3 vocabulary and on it extended to 248k ids;\n"
      "with --model, engine decode tok/s unconstrained vs under a JSON Schema, interleaved");
  s->add_option("--tokenizer", a->tokenizer, "tokenizer.json or MODEL.gguf")->capture_default_str();
  s->add_option("--extend-to", a->extend_to,
                "also measure the vocabulary extended to this many ids (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  s->add_option("--walks", a->walks, "random walks per grammar")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--steps", a->steps, "tokens per walk, at most")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--model", a->model, "GGUF model: also compare engine decode tok/s");
  s->add_option("--peer", a->peer,
                "llama-server=PATH: llama.cpp's grammar sampler on the same file, prompt, schemas "
                "and threads, rounds interleaved with invar's (needs --model)");
  s->add_option("--decode", a->decode, "tokens per decode run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{2}, int64_t{100000}));
  s->add_option("--rounds", a->rounds, "interleaved rounds (medians)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  s->add_option("--threads", a->threads, "engine threads (0: all cores)")->capture_default_str();
  return [a]() -> int { return run_bench(*a); };
});

}  // namespace
}  // namespace invar::app
