#include "engine/fair_share.h"

#include <algorithm>

#include "core/error.h"

namespace invar {

namespace {

// fair_level over the parties for_each(f) visits, calling f(demand) for each (demand ≥ 1).
template <class ForEach>
int64_t level_of(const ForEach& for_each, int64_t capacity, int64_t ratio) {
  int64_t hi = 0, smallest = 0;
  bool any = false;
  for_each([&](int64_t d) {
    INVAR_CHECK(d >= 1);
    hi = std::max(hi, d);
    smallest = any ? std::min(smallest, d) : d;
    any = true;
  });
  if (!any) return 0;
  // Σ min(d, L) grows with L: the largest L that fits, by bisection.
  auto fits = [&](int64_t level) {
    int64_t sum = 0;
    for_each([&](int64_t d) { sum += std::min(d, level); });
    return sum <= capacity;
  };
  int64_t lo = 0;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (fits(mid))
      lo = mid;
    else
      hi = mid - 1;
  }
  return ratio > 0 ? std::min(lo, ratio * smallest) : lo;
}

// Calls f(lo, hi) for each run [lo, hi) of units of one client.
template <class F>
void client_runs(std::span<const FairUnit> units, const F& f) {
  for (size_t lo = 0, hi = 0; lo < units.size(); lo = hi) {
    for (hi = lo; hi < units.size() && units[hi].client == units[lo].client;) ++hi;
    f(lo, hi);
  }
}

}  // namespace

int64_t fair_level(std::span<const int64_t> demand, int64_t capacity, int64_t ratio) {
  return level_of(
      [&](const auto& f) {
        for (int64_t d : demand) f(d);
      },
      capacity, ratio);
}

void fair_shares(std::span<FairUnit> units, int64_t seats, int64_t ratio) {
  // A client's demand is what its units would take by the ratio among themselves, so that a
  // client whose large request is held back by its own small one is not counted as large.
  auto unit_level = [&](size_t lo, size_t hi, int64_t capacity) {
    return level_of(
        [&](const auto& f) {
          for (size_t i = lo; i < hi; ++i)
            if (units[i].demand > 0) f(units[i].demand);
        },
        capacity, ratio);
  };
  auto client_demand = [&](size_t lo, size_t hi) {
    int64_t d = 0;
    for (size_t i = lo; i < hi; ++i) d += std::max<int64_t>(units[i].demand, 0);
    const int64_t level = unit_level(lo, hi, d);
    int64_t taken = 0;
    for (size_t i = lo; i < hi; ++i)
      if (units[i].demand > 0) taken += std::max<int64_t>(1, std::min(units[i].demand, level));
    return taken;
  };
  const int64_t client_level = level_of(
      [&](const auto& f) {
        client_runs(units, [&](size_t lo, size_t hi) {
          if (const int64_t d = client_demand(lo, hi); d > 0) f(d);
        });
      },
      seats, ratio);
  client_runs(units, [&](size_t lo, size_t hi) {
    const int64_t client_seats =
        std::max<int64_t>(1, std::min(client_demand(lo, hi), client_level));
    const int64_t level = unit_level(lo, hi, client_seats);
    for (size_t i = lo; i < hi; ++i)
      units[i].share =
          units[i].demand > 0 ? std::max<int64_t>(1, std::min(units[i].demand, level)) : 0;
  });
}

void fair_split(std::span<const int64_t> demand, int64_t capacity, std::span<int64_t> out) {
  INVAR_CHECK(demand.size() == out.size());
  std::fill(out.begin(), out.end(), 0);
  int64_t left = std::max<int64_t>(capacity, 0);
  // Each round gives every unsatisfied party an equal part of what is left (at least 1, to the
  // earliest while it lasts); parties that need less take only what they need. Every round
  // hands out at least one unit, and all but the last satisfy at least one party or split
  // evenly, so rounds are few.
  for (;;) {
    int64_t open = 0;
    for (size_t i = 0; i < demand.size(); ++i) open += out[i] < demand[i];
    if (open == 0 || left == 0) return;
    const int64_t part = std::max<int64_t>(1, left / open);
    for (size_t i = 0; i < demand.size() && left > 0; ++i) {
      const int64_t give = std::min({part, demand[i] - out[i], left});
      if (give <= 0) continue;
      out[i] += give;
      left -= give;
    }
  }
}

}  // namespace invar
