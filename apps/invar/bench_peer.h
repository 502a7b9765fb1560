// `invar bench model --peer llama-bench=PATH`: llama.cpp's llama-bench as a peer, run on the same
// file at the same thread count between invar's own runs, so both see the same machine load.
// Each peer run is one llama-bench process with one test and one repetition; its `-o json`
// output gives the tokens/s.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace invar::app {

struct BenchPeer {
  std::string path;  // the peer's executable (llama-bench, llama-server)
};

// "NAME=PATH" → the peer, NAME being `name` (the one peer the bench knows); "" → nullopt.
// Throws Error naming what is wrong: another peer name, no '=', or a PATH that is not an
// executable file.
std::optional<BenchPeer> bench_peer_parse(const std::string& spec,
                                          const std::string& name = "llama-bench");

// One run of a peer's executable: its command line, wait status, whole stdout and the last
// max_err bytes of its stderr.
struct PeerProcess {
  std::string command;
  int status = 0;
  std::string out, err;
};
// Runs args[0] with args (no shell) and waits for it. Throws Error when it cannot start.
PeerProcess bench_peer_exec(const std::vector<std::string>& args, size_t max_err = 600);

// How a child process ended (a waitpid status), in words; a SIGILL says the usual cause.
std::string process_exit_text(int status);

// One measurement. Prefill: n_prompt tokens from an empty context (n_gen = 0, n_depth = 0).
// Decode: n_gen tokens, one per step, after n_depth tokens of context (n_prompt = 0).
struct PeerTest {
  int64_t n_prompt = 0, n_gen = 0, n_depth = 0;
  int threads = 1;
};

// Runs llama-bench on model for t; returns its mean tokens/s. Throws Error with the command and
// the tail of llama-bench's stderr when it fails or prints no such test.
double bench_peer_run(const BenchPeer& peer, const std::string& model, const PeerTest& t);

// The avg_ts of the test with t's n_prompt, n_gen and n_threads in llama-bench's JSON output
// (an array of objects). Throws Error when the text is not that JSON or has no such test.
double bench_peer_parse_json(const std::string& text, const PeerTest& t);

}  // namespace invar::app
