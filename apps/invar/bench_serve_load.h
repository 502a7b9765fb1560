// The load of `invar bench serve`: a workload of documents and questions (each request a
// document as the shared prefix and a short question of its own), sent as streaming (SSE)
// requests to an OpenAI-compatible server closed-loop (N clients, each sending its next request
// when the last one ends) or open-loop (one request every 1/rate s, whatever is in flight), and
// what one round measured. The same code drives invar and llama-server; only what each reports
// about its prompt cache is read from different fields.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace invar::app {

// Deterministic English-like prose (sections, sentences of common words and numbers) from
// `seed`, `words` words long.
std::string document_prose(uint64_t seed, int words);

// The number of tokens the server on 127.0.0.1:port reads for `text` (POST /tokenize in
// llama-server's shape, which invar answers too). Throws Error when it does not answer.
int64_t tokens_count(int port, const std::string& text);

// A document for the server's tokenizer of [min_tokens, max_tokens) tokens: prose grown or cut
// a few times until /tokenize counts inside the range.
std::string document_sized(int port, uint64_t seed, int64_t min_tokens, int64_t max_tokens);

struct LoadRequest {
  std::string path;  // /v1/completions or /v1/chat/completions
  std::string body;  // JSON, stream true
};

struct WorkloadSpec {
  int top_logprobs = 5;     // asked of every request (0: none), so runs can be compared bit-wise
  bool chat = false;        // /v1/chat/completions (document then question in one user message)
  int questions = 4;        // requests per document
  int64_t max_tokens = 32;  // generated per request, end-of-sequence ignored
  std::string sampling = "mixed";  // greedy | seeded | mixed (alternate by question)
};

// documents.size() × spec.questions requests, ordered document-minor (request i asks
// question i / D of document i % D), so every document's first question comes before any
// repeat of it.
std::vector<LoadRequest> workload_build(const std::vector<std::string>& documents,
                                        const WorkloadSpec& spec);

// What one streamed request saw. Times are from sending the request.
struct RequestResult {
  bool ok = false;
  std::string error;           // set when !ok
  double ttft_s = -1;          // first chunk with generated text
  std::vector<double> gaps_s;  // between consecutive chunks with generated text
  int64_t generated = 0;       // usage.completion_tokens (else timings.predicted_n, else chunks)
  int64_t prompt = 0;          // prompt tokens in all
  int64_t cached = 0;          // of those, served from the prefix cache
  // The generated text, then one line per generated token with its logprob and top logprobs as
  // the server sent them (whatever the chunking): what the under-load = solo check compares.
  std::string output;
};

// Reads one request's SSE stream as it arrives: each complete `data:` event's JSON.
struct SseRead {
  RequestResult* result = nullptr;
  double (*clock)() = nullptr;  // seconds, the same clock the request's start was taken on
  double start = 0;
  std::string pending;  // bytes after the last complete event
  bool done = false;    // `data: [DONE]` seen
  double last_text = -1;
  int64_t text_chunks = 0, predicted_n = -1, prompt_n = -1, cache_n = -1;
  bool usage_seen = false;
  std::string generated_text, logprob_lines;  // become result->output at finish()
  void feed(const char* data, size_t len);
  // The counts once the stream has ended: usage when it was sent, else llama-server's timings
  // (prompt_n computed + cache_n cached), else the chunks with text.
  void finish();
};

struct RoundResult {
  double wall_s = 0;
  std::vector<RequestResult> requests;
};

// `concurrency` clients on 127.0.0.1:port, each taking the next unsent request until none is
// left.
RoundResult load_closed_run(int port, const std::vector<LoadRequest>& requests, int concurrency);

// Request i sent at i / rate s from the start, each on its own connection.
RoundResult load_open_run(int port, const std::vector<LoadRequest>& requests, double rate);

// One round in figures: tokens/s over the round's wall time, latency quantiles over its
// requests.
struct RoundSummary {
  double generated_tps = 0, computed_tps = 0, cached_tps = 0;  // per second of wall time
  double ttft_p50_s = 0, ttft_p99_s = 0, itl_p50_s = 0, itl_p99_s = 0;
  int64_t generated = 0, computed = 0, cached = 0, errors = 0;
  std::string first_error;
};

RoundSummary round_summarize(const RoundResult& r);

// The median of each figure over the rounds (errors and tokens summed).
RoundSummary rounds_median(const std::vector<RoundSummary>& rounds);

}  // namespace invar::app
