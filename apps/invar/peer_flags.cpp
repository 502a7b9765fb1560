#include "peer_flags.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace invar::app {

const std::vector<PeerFlag>& peer_flags() {
  using A = PeerAction;
  using V = PeerValue;
  const std::string vllm = "vLLM", llama = "llama-server";
  // One row: spellings, peer, how the value comes, the values it is for (none: any), action,
  // invar's flag (rename), and the log line or the reason for the refusal.
  // clang-format off
  static const std::vector<PeerFlag> rows = {
      {{"--max-num-batched-tokens"}, vllm, V::required, {}, A::rename, "--max-batch-tokens",
       "invar's --max-batch-tokens: tokens per engine step"},
      {{"--enable-prefix-caching"}, vllm, V::none, {}, A::accept, "",
       "the prefix cache is on by default (--no-prefix-cache turns it off); a hit never changes "
       "an answer"},
      {{"--no-enable-prefix-caching"}, vllm, V::none, {}, A::rename, "--no-prefix-cache",
       "invar's --no-prefix-cache"},
      {{"--enable-auto-tool-choice"}, vllm, V::none, {}, A::accept, "",
       "tool calls are read whenever a request sends tools (the syntax: --tool-call-parser, "
       "default from the template)"},
      {{"--enable-reasoning"}, vllm, V::none, {}, A::accept, "",
       "reasoning is read by default (--reasoning-format none keeps it in content)"},
      {{"--reasoning-parser"}, vllm, V::required, {"qwen3"}, A::rename, "--reasoning-format=auto",
       "invar's --reasoning-format auto: <think>…</think> goes to reasoning_content, as vLLM's "
       "qwen3 parser reads it"},
      {{"--reasoning-parser"}, vllm, V::required, {}, A::refuse, "",
       "invar reads reasoning only as vLLM's qwen3 parser does (the Qwen templates invar serves "
       "open <think> blocks themselves): give --reasoning-parser qwen3, or leave it out"},
      {{"--tensor-parallel-size", "-tp"}, vllm, V::required, {"1"}, A::accept, "",
       "one process computes on this machine's cores (--threads)"},
      {{"--tensor-parallel-size", "-tp"}, vllm, V::required, {}, A::refuse, "",
       "invar runs a model in one process on the CPU, with nothing to split it across: only 1 "
       "(--threads sets the cores)"},
      {{"--gpu-memory-utilization"}, vllm, V::required, {}, A::accept, "",
       "no GPU: the KV blocks and checkpoints kept are bounded by --cache-bytes"},
      {{"--dtype"}, vllm, V::required, {"auto"}, A::accept, "",
       "weights compute in the GGUF file's own types"},
      {{"--dtype"}, vllm, V::required, {}, A::refuse, "",
       "invar computes in the GGUF file's own types (a model in another type is another file; "
       "--activations sets the numerics of the products): only auto"},
      {{"--trust-remote-code"}, vllm, V::none, {}, A::accept, "",
       "invar runs no code from a model's repository: its architectures are built in"},
      {{"--disable-log-requests", "--no-enable-log-requests"}, vllm, V::none, {}, A::accept, "",
       "requests' contents are never logged; one line per request without them (--log-format "
       "none: no line)"},

      {{"--jinja"}, llama, V::none, {}, A::accept, "",
       "chat templates are always rendered by invar's Jinja engine (--chat-template FILE "
       "replaces the model's)"},
      {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, llama, V::required, {}, A::accept, "",
       "no GPU: every layer runs on the CPU"},
      {{"--mlock"}, llama, V::none, {}, A::accept, "",
       "weights stay mapped from the file, not locked (--huge-pages copies them into 2 MiB "
       "pages)"},
      {{"--cont-batching", "-cb"}, llama, V::none, {}, A::accept, "",
       "the engine always batches continuously"},
      {{"--no-webui"}, llama, V::none, {}, A::accept, "",
       "invar serves no web UI"},
      {{"-fa", "--flash-attn"}, llama, V::optional, {"on", "off", "auto"}, A::accept, "",
       "attention is invar's own CPU kernel, the same bits whichever is asked"},
      {{"-ub", "--ubatch-size"}, llama, V::required, {}, A::accept, "",
       "an engine step's tokens are bounded by --max-batch-tokens alone"},
      {{"--cache-reuse"}, llama, V::required, {}, A::accept, "",
       "cached prefixes are reused by whole blocks (--block-size), exact by construction; no KV "
       "shifting"},
      {{"-t"}, llama, V::required, {}, A::rename, "--threads",
       "invar's --threads"},
      {{"-tb", "--threads-batch"}, llama, V::required, {}, A::accept, "",
       "prompt and generation share one thread count (--threads)"},
      {{"-np"}, llama, V::required, {}, A::rename, "--max-num-seqs",
       "invar's --max-num-seqs"},
      {{"-a", "--alias"}, llama, V::required, {}, A::rename, "--served-model-name",
       "invar's --served-model-name"},
      {{"--metrics"}, llama, V::none, {}, A::accept, "",
       "/metrics is always served (--metrics-public: without the API key)"},
      {{"--reasoning-format"}, llama, V::required, {"deepseek"}, A::rename, "--reasoning-format=auto",
       "invar's auto: <think>…</think> goes to reasoning_content, out of content"},
      {{"--reasoning-format"}, llama, V::required, {"deepseek-legacy"}, A::refuse, "",
       "deepseek-legacy keeps the <think> tags in content beside reasoning_content; invar does "
       "one or the other (auto or none)"},
      {{"-hf", "-hfr", "--hf-repo", "-hff", "--hf-file", "-mu", "--model-url"}, llama, V::required,
       {}, A::refuse, "",
       "invar does not download: give the GGUF path (--model FILE)"},
  };
  // clang-format on
  return rows;
}

namespace {

// The row for `flag` with `value` ("" when none was taken), or null when no row answers.
const PeerFlag* peer_row(const std::string& flag, const std::string& value, bool has_value) {
  for (const PeerFlag& r : peer_flags()) {
    if (std::find(r.names.begin(), r.names.end(), flag) == r.names.end()) continue;
    if (r.values.empty() || (!has_value && r.value == PeerValue::optional) ||
        (has_value && std::find(r.values.begin(), r.values.end(), value) != r.values.end()))
      return &r;
  }
  return nullptr;
}

bool peer_named(const std::string& flag) {
  for (const PeerFlag& r : peer_flags())
    if (std::find(r.names.begin(), r.names.end(), flag) != r.names.end()) return true;
  return false;
}

}  // namespace

std::vector<std::string> peer_args_rewrite(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      out.insert(out.end(), args.begin() + i, args.end());
      break;
    }
    const size_t eq = a.find('=');
    const std::string flag = a.substr(0, eq);
    if (a.size() < 2 || a[0] != '-' || !peer_named(flag)) {
      out.push_back(a);
      continue;
    }
    // Every row of one spelling takes its value the same way: the first says how.
    PeerValue how = PeerValue::none;
    for (const PeerFlag& r : peer_flags())
      if (std::find(r.names.begin(), r.names.end(), flag) != r.names.end()) {
        how = r.value;
        break;
      }
    std::string value;
    bool has_value = eq != std::string::npos;
    size_t used = 0;  // arguments after `a` the value took
    if (has_value) {
      value = a.substr(eq + 1);
      if (how == PeerValue::none) throw Error(flag + " takes no value, not '" + value + "'");
    } else if (how != PeerValue::none && i + 1 < args.size()) {
      const PeerFlag* r = peer_row(flag, args[i + 1], true);
      if (how == PeerValue::required || (r && !r->values.empty())) {
        value = args[i + 1];
        has_value = true;
        used = 1;
      }
    }
    if (how == PeerValue::required && !has_value) throw Error(flag + " needs a value");
    const PeerFlag* row = peer_row(flag, value, has_value);
    if (!row) {  // invar's own flag with one of its own values
      out.push_back(a);
      continue;
    }
    const std::string given = flag + (has_value ? " " + value : "");
    if (row->action == PeerAction::refuse)
      throw Error(given + " (" + row->peer + "): " + row->says);
    // Joined (--flag=VALUE): a value that starts with a dash stays a value.
    if (row->action == PeerAction::rename)
      out.push_back(row->invar.find('=') != std::string::npos || !has_value
                        ? row->invar
                        : row->invar + "=" + value);
    out.push_back(std::string(kPeerNoteFlag) + "=" + given + " (" + row->peer + "): " + row->says);
    i += used;
  }
  return out;
}

std::optional<int64_t> human_int_parse(const std::string& text, int64_t auto_value) {
  const size_t b = text.find_first_not_of(" \t\n\r\f\v");
  if (b == std::string::npos) return std::nullopt;
  const std::string s = text.substr(b, text.find_last_not_of(" \t\n\r\f\v") - b + 1);
  std::string lower = s;
  for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (s == "-1" || lower == "auto") return auto_value;
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  if (digits == 0) return std::nullopt;
  size_t end = digits;
  if (end < s.size() && s[end] == '.') {
    size_t frac = end + 1;
    while (frac < s.size() && std::isdigit(static_cast<unsigned char>(s[frac]))) ++frac;
    if (frac == end + 1) return std::nullopt;  // "1." is not vLLM's \d+(\.\d+)?
    end = frac;
  }
  const std::string number = s.substr(0, end);
  const bool fraction = end > digits;
  if (end == s.size()) {
    if (fraction) return std::nullopt;  // a plain number is an int
    errno = 0;
    const long long v = std::strtoll(number.c_str(), nullptr, 10);
    if (errno == ERANGE) return std::nullopt;
    return int64_t(v);
  }
  if (end + 1 != s.size()) return std::nullopt;
  const char suffix = s[end];
  const char* decimal = "kmgt";
  const char* binary = "KMGT";
  if (const char* d = std::strchr(decimal, suffix)) {
    // Python's int(float(number) * 10**n): the double product, truncated toward zero.
    const double v = std::strtod(number.c_str(), nullptr) * std::pow(10.0, 3 * (d - decimal + 1));
    if (!(v < 9223372036854775808.0)) return std::nullopt;
    return int64_t(v);
  }
  if (const char* k = std::strchr(binary, suffix)) {
    if (fraction) return std::nullopt;  // vLLM: "Decimals are not allowed with binary suffixes"
    errno = 0;
    const long long v = std::strtoll(number.c_str(), nullptr, 10);
    const int shift = 10 * int(k - binary + 1);
    if (errno == ERANGE || v > (INT64_MAX >> shift)) return std::nullopt;
    return int64_t(v) << shift;
  }
  return std::nullopt;
}

}  // namespace invar::app
