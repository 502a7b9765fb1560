// The table of vLLM's and llama-server's flags (apps/invar/peer_flags.h) without the binary: the
// rewrite each kind of row makes, the refusals, vLLM's human-readable counts, and the hint rule
// that no longer turns -fa into -c.
#include "peer_flags.h"

#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "flag_nearest.h"

namespace peer_flags_test {

using invar::app::flag_nearest;
using invar::app::human_int_parse;
using invar::app::peer_args_rewrite;
using invar::app::peer_flags;
using invar::app::PeerAction;
using Args = std::vector<std::string>;

// The refusal's message, "" when the rewrite accepted.
std::string refusal(const Args& args) {
  try {
    peer_args_rewrite(args);
  } catch (const invar::Error& e) {
    return e.what();
  }
  return "";
}

TEST(PeerFlags, HumanIntsAsVllmReadsThem) {
  // vllm/engine/arg_utils.py human_readable_int_or_auto: lowercase decimal, uppercase binary.
  const std::vector<std::pair<std::string, int64_t>> ok = {
      {"4096", 4096},
      {" 512 ", 512},
      {"32k", 32000},
      {"32K", 32768},
      {"1m", 1000000},
      {"1M", 1048576},
      {"2g", 2000000000},
      {"1G", int64_t(1) << 30},
      {"1t", 1000000000000},
      {"1T", int64_t(1) << 40},
      {"25.6k", 25600},
      {"1.001k", 1000},  // Python's int(1.001 * 1000.0): the double 1000.99…, truncated
      {"4.1k", 4100},
      {"auto", -7},
      {"AUTO", -7},
      {"-1", -7},
      {"0", 0},
  };
  for (const auto& [text, want] : ok) {
    const auto got = human_int_parse(text, -7);
    ASSERT_TRUE(got.has_value()) << text;
    EXPECT_EQ(*got, want) << text;
  }
  for (const std::string bad : {"", "k", "1.5K", "1.5", "1.k", "12x", "1kk", "1 k", "-2", "+3",
                                "0x10", "9999999999999999999", "8388608T", "1e3"})
    EXPECT_FALSE(human_int_parse(bad, -7).has_value()) << "'" << bad << "'";
}

TEST(PeerFlags, TableRowsAreWellFormed) {
  std::set<std::string> names;
  for (const auto& r : peer_flags()) {
    ASSERT_FALSE(r.names.empty());
    EXPECT_TRUE(r.peer == "vLLM" || r.peer == "llama-server") << r.names[0];
    EXPECT_FALSE(r.says.empty()) << r.names[0];
    for (const std::string& n : r.names) {
      EXPECT_EQ(n[0], '-') << n;
      names.insert(n);
    }
    if (r.action == PeerAction::rename) {
      EXPECT_EQ(r.invar.rfind("--", 0), 0u) << r.names[0];
    }
  }
  // Every spelling takes its value one way (the rewrite reads it from the first row).
  for (const std::string& n : names) {
    std::set<int> ways;
    for (const auto& r : peer_flags())
      if (std::find(r.names.begin(), r.names.end(), n) != r.names.end()) ways.insert(int(r.value));
    EXPECT_EQ(ways.size(), 1u) << n;
  }
}

TEST(PeerFlags, RewriteRenamesAcceptsAndLeavesTheRest) {
  const Args got = peer_args_rewrite({"--enable-prefix-caching", "-m", "x.gguf", "-t", "2",
                                      "--max-num-batched-tokens=8k", "-fa", "-ngl", "99", "-fa",
                                      "on", "--reasoning-format", "none", "-np", "3"});
  const Args want = {
      "--peer-note=--enable-prefix-caching (vLLM): the prefix cache is on by default "
      "(--no-prefix-cache turns it off); a hit never changes an answer",
      "-m",
      "x.gguf",
      "--threads=2",
      "--peer-note=-t 2 (llama-server): invar's --threads",
      "--max-batch-tokens=8k",  // the size is read by the flag's own parser
      "--peer-note=--max-num-batched-tokens 8k (vLLM): invar's --max-batch-tokens: tokens per "
      "engine step",
      // -fa without a value: the next argument is a flag, not on/off/auto
      "--peer-note=-fa (llama-server): attention is invar's own CPU kernel, the same bits "
      "whichever is asked",
      "--peer-note=-ngl 99 (llama-server): no GPU: every layer runs on the CPU",
      "--peer-note=-fa on (llama-server): attention is invar's own CPU kernel, the same bits "
      "whichever is asked",
      "--reasoning-format",  // invar's own flag with its own value: left to CLI11
      "none",
      "--max-num-seqs=3",
      "--peer-note=-np 3 (llama-server): invar's --max-num-seqs",
  };
  EXPECT_EQ(got, want);
  // A value fixed by the row replaces the peer's.
  EXPECT_EQ(peer_args_rewrite({"--reasoning-format", "deepseek"})[0], "--reasoning-format=auto");
  EXPECT_EQ(peer_args_rewrite({"--reasoning-parser=qwen3"})[0], "--reasoning-format=auto");
  // A value that starts with a dash stays the renamed flag's value.
  EXPECT_EQ(peer_args_rewrite({"-a", "-x"})[0], "--served-model-name=-x");
  // After --, everything is positional.
  EXPECT_EQ(peer_args_rewrite({"--", "-t", "2"}), Args({"--", "-t", "2"}));
  EXPECT_EQ(peer_args_rewrite({"--tensor-parallel-size", "1"}).size(), 1u) << "one note only";
}

TEST(PeerFlags, RefusalsNameTheFlagAndWhy) {
  const struct {
    Args args;
    std::string want;
  } cases[] = {
      {{"--tensor-parallel-size", "4"},
       "--tensor-parallel-size 4 (vLLM): invar runs a model in one"},
      {{"-tp=2"}, "-tp 2 (vLLM): "},
      {{"--dtype", "float16"}, "--dtype float16 (vLLM): invar computes in the GGUF file's own"},
      {{"--reasoning-parser", "deepseek_r1"}, "--reasoning-parser deepseek_r1 (vLLM): invar reads"},
      {{"--reasoning-format", "deepseek-legacy"}, "deepseek-legacy keeps the <think> tags"},
      {{"-hf", "Qwen/Qwen3-8B-GGUF"},
       "-hf Qwen/Qwen3-8B-GGUF (llama-server): invar does not download: give the GGUF path "
       "(--model FILE)"},
      {{"--hf-repo=a/b"}, "invar does not download: give the GGUF path (--model FILE)"},
      {{"-hfr", "a/b"}, "invar does not download"},
      {{"--jinja=1"}, "--jinja takes no value, not '1'"},
      {{"-m", "x", "-ngl"}, "-ngl needs a value"},
  };
  for (const auto& c : cases) {
    const std::string why = refusal(c.args);
    EXPECT_NE(why.find(c.want), std::string::npos) << c.args[0] << ": " << why;
  }
  EXPECT_EQ(refusal({"--dtype", "auto", "--tensor-parallel-size", "1"}), "");
}

TEST(PeerFlags, HintsNeedMostOfTheName) {
  const Args serve = {"-m", "-c", "-h", "--ctx", "--ctx-size", "--port", "--threads", "--help"};
  EXPECT_EQ(flag_nearest("-fa", serve), "") << "two edits make -fa any one-letter flag";
  EXPECT_EQ(flag_nearest("-ub", serve), "");
  EXPECT_EQ(flag_nearest("--ctx-sze", serve), "--ctx-size");
  EXPECT_EQ(flag_nearest("--prot", serve), "--port");
  EXPECT_EQ(flag_nearest("--hepl", serve), "--help");
  EXPECT_EQ(flag_nearest("--thread", serve), "--threads");
}

}  // namespace peer_flags_test
