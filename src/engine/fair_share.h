// How the scheduler divides the engine among requests and clients (STYLE 7: bookkeeping, no
// model). Two divisions, both pure:
//
// - Sequences per step (fair_shares): the step's seats (max_running) are divided across the
//   clients that have work, then each client's part across its requests (a request's n choices
//   are one), by water-filling under one more bound: no party gets more than `ratio` times the
//   smallest competing demand. A step's time grows with the sequences in it (on a CPU almost
//   linearly: a 32-sequence decode step of the tiny model costs 50 single ones), so a small
//   request next to a large one waits, per token, for the large one's part of the step: the
//   ratio bounds that part. A request alone, or next to equally large ones, fills the step.
// - Prefill tokens (fair_split): the step's token budget after decoding, max-min fair
//   (water-filling) across clients and then requests: long prompts share the budget with short
//   ones instead of taking it in arrival order.
//
// Scheduling decides only when a position is computed, never how: the logits are the same
// bits whatever these divisions give (DESIGN.md C2, C3).
#pragma once

#include <cstdint>
#include <span>

namespace invar {

// A request's claim on the next step.
struct FairUnit {
  uint64_t client = 0;  // which client it comes from
  int64_t demand = 0;   // sequences that could compute now (running or admissible)
  int64_t share = 0;    // out: sequences it may compute in the step (0 when demand is 0)
};

// Divides `seats` across the clients with demand, then each client's part across its units
// with demand: water-filling with the level capped at ratio × the smallest demand (ratio 0: no
// cap), and at least 1 each. Units with demand 0 get 0. `units` must be grouped by client (the
// units of one client adjacent).
void fair_shares(std::span<FairUnit> units, int64_t seats, int64_t ratio);

// The water level of `demand` in `capacity`: the largest L with Σ min(demand[i], L) ≤
// capacity (the largest demand when all fit), then capped at ratio × the smallest demand
// (ratio 0: no cap). Demands must be ≥ 1.
int64_t fair_level(std::span<const int64_t> demand, int64_t capacity, int64_t ratio);

// Max-min fair division (water-filling): out[i] ≤ demand[i], Σ out = min(capacity, Σ demand),
// and out[i] < demand[i] only where out[i] ≥ every other out[j] − 1. Leftover units of an
// uneven split go to the earliest parties.
void fair_split(std::span<const int64_t> demand, int64_t capacity, std::span<int64_t> out);

}  // namespace invar
