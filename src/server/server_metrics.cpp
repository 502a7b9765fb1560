#include "server/server_metrics.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"

namespace invar::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void metric(std::string& out, const char* name, const char* type, const char* help, double v) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
         name + " " + num(v) + "\n";
}

// One family with a value per lower cache tier (label tier="disk" | "redis").
void tier_metric(std::string& out, const char* name, const char* type, const char* help,
                 const TiersReport& r, int64_t TierReport::*field) {
  out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  for (const TierReport& t : r.tiers)
    out += std::string(name) + "{tier=\"" + t.tier + "\"} " + num(double(t.*field)) + "\n";
}

void tier_metrics(std::string& out, const TiersReport& r) {
  if (r.tiers.empty()) return;
  struct Family {
    const char* name;
    const char* type;
    const char* help;
    int64_t TierReport::*field;
  };
  static const Family families[] = {
      {"invar_cache_tier_hits_total", "counter", "blocks read back from the tier",
       &TierReport::hits},
      {"invar_cache_tier_misses_total", "counter", "block lookups the tier missed",
       &TierReport::misses},
      {"invar_cache_tier_writes_total", "counter", "blocks stored in the tier",
       &TierReport::writes},
      {"invar_cache_tier_write_drops_total", "counter",
       "blocks not stored because the write queue was full", &TierReport::write_drops},
      {"invar_cache_tier_write_failures_total", "counter",
       "blocks not stored because of an I/O or connection error", &TierReport::write_failures},
      {"invar_cache_tier_commits_total", "counter",
       "group commits: batches made durable together (writes / commits = records per commit)",
       &TierReport::commits},
      {"invar_cache_tier_corrupt_total", "counter",
       "truncated, corrupt, foreign or forged records (not sealed with the deployment's key) "
       "skipped and removed",
       &TierReport::corrupt},
      {"invar_cache_tier_errors_total", "counter", "reads that failed (I/O, connection, timeout)",
       &TierReport::errors},
      {"invar_cache_tier_evictions_total", "counter", "records removed to keep the byte budget",
       &TierReport::evictions},
      {"invar_cache_tier_bytes", "gauge",
       "bytes stored as far as this process knows (-1: kept by the tier itself)",
       &TierReport::bytes},
  };
  for (const Family& f : families) tier_metric(out, f.name, f.type, f.help, r, f.field);
  metric(out, "invar_cache_tier_read_timeouts_total", "counter",
         "tier reads cut short by --cache-tier-timeout (the rest is recomputed)",
         double(r.read_timeouts));
  metric(out, "invar_cache_tier_mismatches_total", "counter",
         "records under a requested key whose chain differed (not used)", double(r.mismatches));
  metric(out, "invar_cache_tier_queue_bytes", "gauge", "records waiting to be written",
         double(r.queue_bytes));
}

}  // namespace

LatencyHistogram::LatencyHistogram(const std::vector<double>& other)
    : bounds_(kBounds.begin(), kBounds.end()) {
  bounds_.insert(bounds_.end(), other.begin(), other.end());
  std::sort(bounds_.begin(), bounds_.end());
  bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
  counts_.assign(bounds_.size() + 1, 0);
}

void LatencyHistogram::observe(double s) {
  // The first bound >= s: Prometheus buckets are upper-inclusive.
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), s) - bounds_.begin());
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;
  sum_ += s;
  count_++;
}

std::string LatencyHistogram::exposition(const std::string& name, const std::string& help) const {
  return exposition(name, help, std::vector<double>(kBounds.begin(), kBounds.end()), "");
}

std::string LatencyHistogram::exposition(const std::string& name, const std::string& help,
                                         const std::vector<double>& bounds,
                                         const std::string& labels) const {
  const bool invar_layout = labels.empty();
  const std::string pre = labels.empty() ? "" : labels + ",";
  const std::string tail = labels.empty() ? "" : "{" + labels + "}";
  std::lock_guard<std::mutex> lock(mu_);
  std::string out = "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  size_t i = 0;
  for (double b : bounds) {
    // Every bound of a layout is one of bounds_, so the cumulative count at it is exact.
    while (i < bounds_.size() && bounds_[i] <= b) cum += counts_[i++];
    INVAR_CHECK(i > 0 && bounds_[i - 1] == b, "histogram bound " + num(b) + " was not counted");
    // Bounds as written (0.0025, not 0.0025000000000000001); vLLM's clients also write 1.0.
    char le[40];
    std::snprintf(le, sizeof le, "%g", b);
    std::string text = le;
    if (!invar_layout && text.find_first_of(".e") == std::string::npos) text += ".0";
    out += name + "_bucket{" + pre + "le=\"" + text + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{" + pre + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum" + tail + " " + num(sum_) + "\n";
  out += name + "_count" + tail + " " + std::to_string(count_) + "\n";
  return out;
}

void ServerMetrics::count_response(const std::string& endpoint, int status) {
  responses_total.fetch_add(1);
  std::lock_guard<std::mutex> lock(mu_);
  responses_[{endpoint, status}]++;
}

namespace {

// Speculative decoding: counters, and the drafts kept per verification as a histogram with
// one bucket per count (le = 0 .. k).
std::string spec_exposition(const EngineMetrics& e) {
  std::string out;
  metric(out, "invar_spec_draft_tokens_total", "counter", "draft tokens verified by the model",
         double(e.spec_drafted_total));
  metric(out, "invar_spec_accepted_tokens_total", "counter",
         "draft tokens that became part of a completion", double(e.spec_accepted_total));
  out +=
      "# HELP invar_spec_acceptance_length draft tokens kept per verification step\n"
      "# TYPE invar_spec_acceptance_length histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < e.spec_accepted_hist.size(); ++i) {
    cum += e.spec_accepted_hist[i];
    out += "invar_spec_acceptance_length_bucket{le=\"" + std::to_string(i) + "\"} " +
           std::to_string(cum) + "\n";
  }
  out += "invar_spec_acceptance_length_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
  out += "invar_spec_acceptance_length_sum " + std::to_string(e.spec_accepted_total) + "\n";
  out += "invar_spec_acceptance_length_count " + std::to_string(e.spec_verifications_total) + "\n";
  return out;
}

}  // namespace

std::string ServerMetrics::exposition(const EngineMetrics* e, const std::string& state) const {
  std::string out;
  out +=
      "# HELP invar_server_state 1 for the current state (loading, ready, draining)\n"
      "# TYPE invar_server_state gauge\n";
  for (const char* s : {"loading", "ready", "draining"})
    out +=
        std::string("invar_server_state{state=\"") + s + "\"} " + (state == s ? "1" : "0") + "\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    out +=
        "# HELP invar_http_responses_total HTTP responses by endpoint and status\n"
        "# TYPE invar_http_responses_total counter\n";
    for (auto& [k, v] : responses_)
      out += "invar_http_responses_total{endpoint=\"" + k.first + "\",status=\"" +
             std::to_string(k.second) + "\"} " + std::to_string(v) + "\n";
  }
  metric(out, "invar_server_inflight_requests", "gauge", "requests admitted and not yet answered",
         double(inflight.load()));
  out +=
      "# HELP invar_client_limit_refusals_total requests and connections refused (429) because "
      "their client held its share: --client-queue-limit, --client-max-connections\n"
      "# TYPE invar_client_limit_refusals_total counter\n"
      "invar_client_limit_refusals_total{limit=\"queue\"} " +
      std::to_string(client_queue_refusals.load()) +
      "\n"
      "invar_client_limit_refusals_total{limit=\"connections\"} " +
      std::to_string(client_connection_refusals.load()) + "\n";
  metric(out, "invar_requests_cancelled_total", "counter",
         "requests cancelled because the client disconnected", double(cancelled_total.load()));
  if (e) {
    metric(out, "invar_requests_total", "counter", "requests submitted to the engine",
           double(e->requests_total));
    metric(out, "invar_requests_running", "gauge", "requests computing",
           double(e->requests_running));
    metric(out, "invar_queue_depth", "gauge", "requests waiting for the engine",
           double(e->requests_waiting));
    metric(out, "invar_prompt_tokens_total", "counter", "prompt tokens submitted",
           double(e->prompt_tokens_total));
    metric(out, "invar_cached_tokens_total", "counter",
           "prompt tokens served from the prefix cache", double(e->cached_tokens_total));
    metric(out, "invar_generated_tokens_total", "counter", "tokens generated",
           double(e->generated_tokens_total));
    metric(out, "invar_cache_lookups_total", "counter", "prefix-cache lookups",
           double(e->cache_lookups));
    metric(out, "invar_cache_hits_total", "counter", "prefix-cache lookups that hit",
           double(e->cache_hits));
    double rate =
        e->prompt_tokens_total ? double(e->cached_tokens_total) / e->prompt_tokens_total : 0;
    metric(out, "invar_cache_hit_rate", "gauge", "cached prompt tokens / prompt tokens", rate);
    metric(out, "invar_cache_resident_bytes", "gauge",
           "bytes of KV blocks, state checkpoints and their bookkeeping (within --cache-bytes)",
           double(e->resident_bytes));
    metric(out, "invar_cache_resident_blocks", "gauge", "KV blocks resident",
           double(e->resident_blocks));
    metric(out, "invar_cache_resident_checkpoints", "gauge", "state checkpoints resident",
           double(e->resident_checkpoints));
    metric(out, "invar_cache_referenced_blocks", "gauge", "blocks held by running requests",
           double(e->referenced_blocks));
    metric(out, "invar_cache_evictions_total", "counter", "blocks evicted", double(e->evictions));
    metric(out, "invar_cache_table_bytes", "gauge",
           "bytes of the cache's per-id tables (they shrink when the blocks or checkpoints in "
           "use fall)",
           double(e->cache_table_bytes));
    metric(out, "invar_preemptions_total", "counter", "requests preempted", double(e->preemptions));
    metric(out, "invar_seat_rotations_total", "counter",
           "preemptions that gave a waiting request the seat of one that held it --seat-quantum "
           "steps",
           double(e->seat_rotations));
    metric(out, "invar_engine_tokens_per_second", "gauge", "recent engine throughput",
           e->tokens_per_s);
    if (!e->spec_accepted_hist.empty()) out += spec_exposition(*e);
    tier_metrics(out, e->tiers);
  }
  out += ttft.exposition("invar_time_to_first_token_seconds", "submit to first generated token");
  out += inter_token.exposition("invar_inter_token_latency_seconds",
                                "time between consecutive generated tokens of a request");
  out += request_duration.exposition("invar_request_duration_seconds",
                                     "admission to the last generated token");
  return out;
}

std::string image_metrics_exposition(const ImageStats& s) {
  std::string out;
  metric(out, "invar_image_encodes_total", "counter",
         "images run through the vision tower (--mmproj)", double(s.encodes));
  metric(out, "invar_image_encode_cache_hits_total", "counter",
         "images whose tower output came from the encoder cache (--image-cache-bytes)",
         double(s.cache_hits));
  metric(out, "invar_image_encode_seconds_total", "counter",
         "seconds the vision tower spent encoding", s.encode_seconds);
  metric(out, "invar_image_encodes_started_total", "counter",
         "images whose encode began the vision tower (those stopped in it included)",
         double(s.started));
  metric(out, "invar_image_encodes_cancelled_total", "counter",
         "encodes stopped in the vision tower because the client was gone", double(s.cancelled));
  metric(out, "invar_image_encodes_over_budget_total", "counter",
         "encodes stopped in the vision tower over the request's CPU budget "
         "(--prepare-cpu-seconds)",
         double(s.over_budget));
  metric(out, "invar_image_encode_cache_bytes", "gauge", "bytes of tower output cached",
         double(s.cache_bytes));
  metric(out, "invar_image_encode_cache_max_bytes", "gauge",
         "the encoder cache's budget (--image-cache-bytes)", double(s.cache_max_bytes));
  return out;
}

std::string grammar_metrics_exposition(const grammar::CacheStats& s, size_t budget) {
  std::string out;
  metric(out, "invar_grammar_compiles_total", "counter",
         "constraints compiled (compile cache misses, errors included)", double(s.misses));
  metric(out, "invar_grammar_compile_cache_hits_total", "counter",
         "constraints whose compiled grammar came from the cache", double(s.hits));
  metric(out, "invar_grammar_compiles_running", "gauge", "constraints being compiled now",
         double(s.running));
  metric(out, "invar_grammar_cache_bytes", "gauge", "bytes of compiled grammars cached",
         double(s.bytes));
  metric(out, "invar_grammar_cache_max_bytes", "gauge",
         "the compile cache's budget (--grammar-cache-bytes)", double(budget));
  metric(out, "invar_grammar_cache_evictions_total", "counter",
         "compiled grammars dropped from the cache for its entry count or byte budget",
         double(s.evictions));
  return out;
}

}  // namespace invar::server
