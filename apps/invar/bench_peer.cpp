#include "bench_peer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace invar::app {

std::optional<BenchPeer> bench_peer_parse(const std::string& spec, const std::string& name) {
  if (spec.empty()) return std::nullopt;
  const size_t eq = spec.find('=');
  if (eq == std::string::npos)
    throw Error("--peer: expected " + name + "=PATH, got '" + spec + "'");
  const std::string given = spec.substr(0, eq), path = spec.substr(eq + 1);
  if (given != name)
    throw Error("--peer: unknown peer '" + given + "' (the one peer is " + name + "=PATH)");
  struct stat st;
  if (path.empty() || stat(path.c_str(), &st) != 0)
    throw Error("--peer: " + name + " '" + path + "' does not exist");
  if (!S_ISREG(st.st_mode) || access(path.c_str(), X_OK) != 0)
    throw Error("--peer: " + name + " '" + path + "' is not an executable file");
  return BenchPeer{path};
}

double bench_peer_parse_json(const std::string& text, const PeerTest& t) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    throw Error("llama-bench output is not a JSON array (-o json)");
  for (const auto& r : j) {
    if (!r.is_object()) continue;
    const auto num = [&](const char* k) {
      return r.contains(k) && r[k].is_number() ? r[k].get<double>() : -1.0;
    };
    if (num("n_prompt") == double(t.n_prompt) && num("n_gen") == double(t.n_gen) &&
        num("n_threads") == double(t.threads) && num("avg_ts") > 0)
      return num("avg_ts");
  }
  throw Error("llama-bench output has no test with n_prompt " + std::to_string(t.n_prompt) +
              ", n_gen " + std::to_string(t.n_gen) + ", n_threads " + std::to_string(t.threads) +
              " and a positive avg_ts");
}

namespace {

// The last lines of a file (llama-bench's stderr), for an error message.
std::string file_tail(const std::string& path, size_t max_bytes) {
  std::string s;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
  }
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace

// A SIGILL's usual cause: a build for an instruction set this machine, or this VM's guest,
// cannot run (e.g. llama.cpp's AMX kernels in a guest without AMX state).
std::string process_exit_text(int status) {
  if (WIFEXITED(status)) return "exit status " + std::to_string(WEXITSTATUS(status));
  if (!WIFSIGNALED(status)) return "ended abnormally";
  const int sig = WTERMSIG(status);
  std::string text = "killed by signal " + std::to_string(sig);
  if (const char* name = sigabbrev_np(sig)) text += std::string(" (SIG") + name + ")";
  if (sig == SIGILL)
    text +=
        ": it uses an instruction this machine does not run; rebuild it without them (e.g. "
        "llama.cpp with -DGGML_NATIVE=OFF and the AMX options off)";
  return text;
}

PeerProcess bench_peer_exec(const std::vector<std::string>& args, size_t max_err) {
  PeerProcess p;
  for (const auto& a : args) p.command += (p.command.empty() ? "" : " ") + a;
  char err_path[] = "/tmp/invar-peer-XXXXXX";
  const int err_fd = mkstemp(err_path);
  int out[2];
  if (err_fd < 0 || pipe(out) != 0) throw Error("cannot start " + p.command + ": no pipe");
  const pid_t pid = fork();
  if (pid < 0) throw Error("cannot start " + p.command + ": fork failed");
  if (pid == 0) {
    dup2(out[1], 1);
    dup2(err_fd, 2);
    close(out[0]);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  close(err_fd);
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof buf)) > 0) p.out.append(buf, size_t(n));
  close(out[0]);
  waitpid(pid, &p.status, 0);
  p.err = file_tail(err_path, max_err);
  unlink(err_path);
  return p;
}

double bench_peer_run(const BenchPeer& peer, const std::string& model, const PeerTest& t) {
  const PeerProcess p = bench_peer_exec(
      {peer.path, "-m", model, "-t", std::to_string(t.threads), "-p", std::to_string(t.n_prompt),
       "-n", std::to_string(t.n_gen), "-d", std::to_string(t.n_depth), "-r", "1", "-o", "json"});
  if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0)
    throw Error("llama-bench failed (" + p.command + "), " + process_exit_text(p.status) +
                "; its stderr ends:\n" + p.err);
  try {
    return bench_peer_parse_json(p.out, t);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (" + p.command + "); its stderr ends:\n" + p.err);
  }
}

}  // namespace invar::app
