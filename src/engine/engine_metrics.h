// What the engine reports of itself: request, token and cache counters, for /metrics and the
// request queue that publishes them to callers.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/tier_config.h"

namespace invar {

struct EngineMetrics {
  uint64_t requests_total = 0, requests_running = 0, requests_waiting = 0;
  uint64_t groups_waiting = 0;  // submit_group units (a request's n choices) with one waiting
  uint64_t prompt_tokens_total = 0, cached_tokens_total = 0, generated_tokens_total = 0;
  uint64_t cache_lookups = 0, cache_hits = 0;
  uint64_t resident_blocks = 0, resident_checkpoints = 0, resident_bytes = 0;
  uint64_t referenced_blocks = 0;  // blocks held by running requests (0 when idle)
  uint64_t cache_table_bytes = 0;  // the cache's per-id tables (CacheStats::bytes_tables)
  uint64_t evictions = 0, preemptions = 0;
  uint64_t seat_rotations =
      0;  // preemptions that made a seat for a waiting request after a quantum
  double tokens_per_s = 0;
  // Speculative decoding (all 0 with --spec none): drafts verified, drafts kept, verification
  // chunks run, and spec_accepted_hist[i] = verification chunks that kept i drafts (i ≤ k).
  uint64_t spec_drafted_total = 0, spec_accepted_total = 0, spec_verifications_total = 0;
  std::vector<uint64_t> spec_accepted_hist;
  // Grammar masks computed while the forward pass ran (EngineConfig::mask_overlap).
  uint64_t grammar_masks_prefetched = 0;
  TiersReport tiers;  // lower cache tiers (empty without --cache-dir / --cache-redis)
};

}  // namespace invar
