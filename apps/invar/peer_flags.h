// vLLM's and llama-server's `serve` flags on `invar serve`, so that a command line copied from
// either works where the meaning is the same. One table (peer_flags.cpp) says, per spelling and
// value, what invar does: the same thing under invar's own flag (rename), nothing because it
// cannot matter on this engine (accept, with one log line saying what invar does instead), or a
// refusal naming why (a value that would change behaviour in a way invar cannot honour).
//
// The table answers before CLI11 parses: peer_args_rewrite turns the peers' flags into invar's
// own, and each log line into a hidden `--peer-note=TEXT` that `invar serve` prints at start.
// Spellings CLI11 cannot declare (a single dash and several letters: -ngl, -fa, -np) need it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace invar::app {

enum class PeerAction {
  rename,  // invar's flag `invar` means the same: the value (or `invar`'s own) is passed on
  accept,  // cannot matter on this engine: dropped, `says` logged
  refuse,  // would change behaviour in a way invar cannot honour: the start is refused with `says`
};

enum class PeerValue {
  none,      // a switch
  required,  // FLAG VALUE or FLAG=VALUE
  optional,  // a value only when the next argument is one of `values` (-fa, -fa on)
};

struct PeerFlag {
  std::vector<std::string> names;  // the spellings: "-ngl", "--n-gpu-layers"
  std::string peer;                // whose flag: "vLLM", "llama-server"
  PeerValue value;
  std::vector<std::string> values;  // the values this row is for; empty: any
  PeerAction action;
  std::string invar;  // rename: invar's flag, with "=VALUE" when the peer's value is not passed on
  std::string says;   // accept: what invar does instead; refuse: why not; rename: the log line
};

// The rows, in the order they are tried: the first row naming the flag whose `values` hold the
// value answers. A flag of invar's own whose value no row holds is left to CLI11.
const std::vector<PeerFlag>& peer_flags();

// The hidden flag that carries a log line through the parse.
inline constexpr const char* kPeerNoteFlag = "--peer-note";

// `args` (a subcommand's arguments, after its name) with every peer flag answered: renamed to
// invar's flag (`--flag=VALUE`), each followed by `--peer-note=TEXT`. Throws Error naming the flag,
// its peer and why on a refused one. Arguments after `--` are positional and left as they are.
std::vector<std::string> peer_args_rewrite(const std::vector<std::string>& args);

// An integer as vLLM's --max-model-len reads it (vllm/engine/arg_utils.py,
// human_readable_int_or_auto): digits; or digits with an optional fraction then one suffix,
// k m g t decimal (10^3, 10^6, 10^9, 10^12; "25.6k" = 25600, the product truncated as Python's
// int(float(number) * mult) does) or K M G T binary (2^10 … 2^40, whole numbers only: "1.5K" is
// refused, as vLLM refuses it); "-1" or "auto" (any case) → `auto_value`. nullopt otherwise, or
// past INT64_MAX.
std::optional<int64_t> human_int_parse(const std::string& text, int64_t auto_value);

}  // namespace invar::app
