#include "sim/simulator.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/error.h"
#include "core/sha256.h"

namespace invar::sim {
namespace {

// Origins are 64-bit structural hashes: equal iff built from the same chain of computations.
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a ^ (b + 0x9e3779b97f4a7c15ull + (a << 6) + (a >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t mix_str(uint64_t h, const std::string& s) {
  h = mix(h, s.size());
  for (unsigned char c : s) h = mix(h, c);
  return h;
}

// Token positions [begin, end) whose KV came from computation `origin`.
struct Segment {
  int64_t begin, end;
  uint64_t origin;
};

void push_segment(std::vector<Segment>& segs, Segment s) {
  if (!segs.empty() && segs.back().end == s.begin && segs.back().origin == s.origin) {
    segs.back().end = s.end;
  } else {
    segs.push_back(s);
  }
}

uint64_t hash_segments(const std::vector<Segment>& segs, int64_t upto) {
  uint64_t h = 0x51ed27;
  for (const auto& s : segs) {
    if (s.begin >= upto) break;
    h = mix(mix(mix(h, uint64_t(s.begin)), uint64_t(std::min(s.end, upto))), s.origin);
  }
  return h;
}

struct KvBlock {
  std::vector<Segment> segs;  // covers the block's positions
  std::string writer;         // "A#1" for display
};
struct StateEntry {
  uint64_t origin;
  std::string writer;
};

class Simulation {
 public:
  Simulation(const Trace& t, const Policy& p) : trace_(t), policy_(p) {}

  RunResult run(const TraceRequest& r, int64_t run_index) {
    const int64_t B = policy_.block_size;
    const int64_t P = trace_.prompt_tokens(r);
    const int64_t doc_len = r.doc.empty() ? 0 : trace_.documents.at(r.doc);
    const int64_t full_blocks = P / B;
    std::vector<std::string> keys(full_blocks);
    for (int64_t b = 0; b < full_blocks; ++b) {
      // Prefix-chained identity: a block entirely inside the document is shared by every request
      // on that document (and salt); a block reaching into the tail belongs to the request name.
      const bool shared = (b + 1) * B <= doc_len;
      keys[b] = r.salt + '\x1f' + r.doc + '\x1f' + (shared ? std::string() : r.name) + '\x1f' +
                std::to_string(b);
    }
    RunResult out;
    out.request = r.name;
    out.run = run_index;
    out.prompt_tokens = P;

    // Lookup: at most P − 1 tokens can hit.
    const int64_t max_blocks = (P - 1) / B;
    int64_t matched = 0;
    const int64_t match_limit =
        std::min(full_blocks,
                 policy_.use_eagle() && !policy_.chunk_invariant() ? max_blocks + 1 : max_blocks);
    while (matched < match_limit && kv_.count(keys[matched])) ++matched;
    int64_t attn_hit = matched;
    if (policy_.use_eagle() && !policy_.chunk_invariant()) {
      attn_hit = std::max<int64_t>(matched - 1, 0);  // EAGLE/MTP drop the last matched block
    }
    int64_t hit = 0;  // in blocks: deepest boundary with KV and state both resident
    for (int64_t h = attn_hit; h >= 1; --h) {
      if (states_.count(keys[h - 1])) {
        hit = h;
        break;
      }
    }
    out.cached_tokens = hit * B;

    std::vector<Segment> segs;
    uint64_t state_origin = 0;  // cold start
    if (hit > 0) {
      for (int64_t b = 0; b < hit; ++b) {
        for (const auto& s : kv_.at(keys[b]).segs) push_segment(segs, s);
      }
      const auto& st = states_.at(keys[hit - 1]);
      state_origin = st.origin;
      out.hit_origin = "kv " + kv_.at(keys[0]).writer + ", state " + st.writer;
    } else {
      out.hit_origin = "cold";
    }

    const std::string writer = r.name + "#" + std::to_string(run_index);
    std::map<int64_t, uint64_t> new_states;  // boundary → origin
    int64_t computed = hit * B;
    while (computed < P) {
      const int64_t len = policy_step_length(policy_, P, computed, policy_.budget);
      const int64_t s = computed, e = computed + len;
      out.steps.push_back({s, e});
      uint64_t step_id;
      if (policy_.chunk_invariant()) {
        step_id = 0;  // replaced per token below: only the tokens matter
      } else {
        // A step's numbers depend on its shape and on what it continues from: the state entering
        // it and the KV of every earlier token.
        step_id = mix(mix(mix(state_origin, hash_segments(segs, s)), uint64_t(s)), uint64_t(e));
      }
      if (policy_.chunk_invariant()) {
        // Origin = the tokens themselves: the document's, then the request's own tail.
        const uint64_t doc_id = mix_str(0x7e, r.doc);
        const uint64_t tail_id = mix_str(doc_id, r.name);
        if (s < doc_len) push_segment(segs, {s, std::min(e, doc_len), doc_id});
        if (e > doc_len) push_segment(segs, {std::max(s, doc_len), e, tail_id});
      } else {
        push_segment(segs, {s, e, step_id});
      }
      // States stored by this step.
      for (int64_t q = (s / B + 1) * B; q <= e; q += B) {
        const bool store = policy_.state_at_every_boundary() || q == e;
        if (!store) continue;
        const uint64_t origin =
            policy_.chunk_invariant() ? mix(0x5747e, hash_segments(segs, q)) : mix(step_id, q);
        new_states[q] = origin;
        out.states_written.push_back(q);
      }
      state_origin =
          policy_.chunk_invariant() ? mix(0x5747e, hash_segments(segs, e)) : mix(step_id, e);
      computed = e;
    }

    // Insert what this run produced; a block or state already cached keeps its first writer.
    for (int64_t b = hit; b < full_blocks; ++b) {
      if (kv_.count(keys[b])) continue;
      KvBlock kb;
      kb.writer = writer;
      for (const auto& sg : segs) {
        const int64_t lo = std::max(sg.begin, b * B), hi = std::min(sg.end, (b + 1) * B);
        if (lo < hi) kb.segs.push_back({lo, hi, sg.origin});
      }
      kv_.emplace(keys[b], std::move(kb));
    }
    for (const auto& [q, origin] : new_states) {
      if (q / B - 1 < full_blocks) {
        states_.try_emplace(keys[q / B - 1], StateEntry{origin, writer});
      }
    }
    out.signature = signature_hex(segs, P);
    return out;
  }

 private:
  static std::string signature_hex(const std::vector<Segment>& segs, int64_t P) {
    std::string bytes;
    for (const auto& s : segs) {
      const int64_t v[3] = {s.begin, s.end, int64_t(s.origin)};
      bytes.append(reinterpret_cast<const char*>(v), sizeof v);
    }
    return sha256_hex(bytes);
  }

  const Trace& trace_;
  const Policy& policy_;
  std::unordered_map<std::string, KvBlock> kv_;
  std::unordered_map<std::string, StateEntry> states_;
};

}  // namespace

SimResult simulate(const Trace& trace, const Policy& policy) {
  if (policy.block_size < 1) throw Error("simulate: --block-size must be >= 1");
  if (policy.budget < 1) throw Error("simulate: --budget must be >= 1");
  Simulation sim(trace, policy);
  SimResult res;
  std::map<std::string, std::string> first_signature;
  std::map<std::string, int64_t> runs_of;
  for (const auto& r : trace.requests) {
    for (int64_t i = 0; i < r.repeat; ++i) {
      RunResult rr = sim.run(r, ++runs_of[r.name]);
      auto [it, inserted] = first_signature.try_emplace(r.name, rr.signature);
      rr.diverges = !inserted && it->second != rr.signature;
      res.runs.push_back(std::move(rr));
    }
  }
  return res;
}

std::vector<SweepPoint> simulate_sweep(const Trace& trace, const Policy& policy,
                                       const std::string& name, int64_t lo, int64_t hi) {
  bool found = false;
  for (const auto& r : trace.requests) found = found || r.name == name;
  if (!found) throw Error("simulate: --sweep names unknown request '" + name + "'");
  if (lo > hi) throw Error("simulate: --sweep range is empty");
  std::vector<SweepPoint> out;
  for (int64_t len = lo; len <= hi; ++len) {
    Trace t = trace;
    bool ok = true;
    for (auto& r : t.requests) {
      if (r.name != name) continue;
      const int64_t doc = r.doc.empty() ? 0 : t.documents.at(r.doc);
      if (len <= doc) ok = false;
      r.tail = len - doc;
    }
    if (!ok) {
      throw Error("simulate: --sweep length " + std::to_string(len) +
                  " does not exceed the document of '" + name + "'");
    }
    SweepPoint pt{len, false};
    for (const auto& run : simulate(t, policy).runs) {
      if (run.request != name && run.diverges) pt.diverges = true;
    }
    out.push_back(pt);
  }
  return out;
}

}  // namespace invar::sim
