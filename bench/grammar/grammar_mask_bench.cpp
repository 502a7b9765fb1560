// grammar_mask_bench [tokenizer.json|model.gguf] [walks]: per-token mask time (median, p99,
// max) of Matcher::fill_mask on a real vocabulary, for JSON Schema, json_object, regex and GBNF
// grammars, along seeded random walks (a uniformly random allowed token per step, as sampling
// at temperature 1 from flat logits would pick). A first visit to a state walks the vocabulary
// trie; later visits hit the matcher's mask cache; both are in the figures.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "grammar/compile.h"
#include "grammar/matcher.h"
#include "tokenizer/tokenizer.h"

using namespace invar;
using namespace invar::grammar;

namespace {

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

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : std::string(INVAR_SOURCE_DIR) + "/data/qwen3/tokenizer.json";
  const int walks = argc > 2 ? std::atoi(argv[2]) : 8;
  auto tok = Tokenizer::from_file(path);
  const auto& tv = tok->vocab();
  std::vector<std::string> bytes(static_cast<size_t>(tok->n_vocab()));
  std::vector<int32_t> eos;
  for (int64_t id = 0; id < tok->n_vocab(); ++id) {
    const bool control = static_cast<size_t>(id) < tv.token_types.size() && tv.token_types[id] == 3;
    if (!control) bytes[id] = tok->token_bytes(static_cast<int32_t>(id));
  }
  for (const char* s : {"<|im_end|>", "<|endoftext|>"}) {
    if (const int32_t id = tok->token_id(s); id >= 0) {
      eos.push_back(id);
      bytes[id].clear();
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  auto vocab = std::make_shared<const Vocabulary>(std::move(bytes), std::move(eos));
  const double trie_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("vocabulary %s: %zu ids, %zu trie nodes, built in %.1f ms\n", path.c_str(),
              vocab->size(), vocab->nodes().size(), trie_ms);
  const std::vector<std::pair<std::string, std::pair<Kind, std::string>>> cases = {
      {"json_schema invoice", {Kind::json_schema, kInvoice}},
      {"json_object", {Kind::json_object, ""}},
      {"regex email", {Kind::regex, "[a-z0-9._]{1,20}@[a-z]{2,10}\\.(com|org|net)"}},
      {"gbnf arithmetic",
       {Kind::gbnf,
        "root ::= expr\nexpr ::= term ([-+*/] term)*\nterm ::= [0-9]{1,6} | \"(\" expr \")\""}},
  };
  std::printf("%-22s %8s %10s %10s %10s %10s %8s\n", "grammar", "tokens", "compile_ms", "median_us",
              "p99_us", "max_us", "allowed");
  for (const auto& [name, c] : cases) {
    t0 = std::chrono::steady_clock::now();
    auto g = compile(c.first, c.second);
    const double compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::vector<double> us;
    double allowed = 0;
    std::vector<uint64_t> words(vocab->mask_words());
    for (int w = 0; w < walks; ++w) {
      std::mt19937_64 rng(w + 1);
      Matcher m(g, vocab);
      for (int step = 0; step < 200; ++step) {
        const auto a = std::chrono::steady_clock::now();
        m.fill_mask(words);
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a)
                         .count());
        std::vector<int32_t> ids;
        for (size_t i = 0; i < vocab->size(); ++i) {
          if ((words[i >> 6] >> (i & 63)) & 1) ids.push_back(static_cast<int32_t>(i));
        }
        allowed += static_cast<double>(ids.size());
        if (ids.empty()) break;
        const int32_t id = ids[std::uniform_int_distribution<size_t>(0, ids.size() - 1)(rng)];
        m.accept_token(id);
        if (m.is_terminated()) break;
      }
    }
    std::printf("%-22s %8zu %10.2f %10.1f %10.1f %10.1f %8.0f\n", name.c_str(), us.size(),
                compile_ms, percentile(us, 0.5), percentile(us, 0.99), percentile(us, 1.0),
                allowed / static_cast<double>(us.size()));
  }
  return 0;
}
