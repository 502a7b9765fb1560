#include "server/request_log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "server/api_error.h"

namespace invar::server {
namespace {

std::string utc_now() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, int(ms.count()));
  return buf;
}

// Seconds rounded to the microsecond: a log line, not a measurement.
double rounded(double s) {
  return double(int64_t(s * 1e6 + 0.5)) / 1e6;
}

}  // namespace

std::string request_log_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t base = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  char buf[24];
  std::snprintf(buf, sizeof buf, "req-%016llx",
                static_cast<unsigned long long>(base + counter.fetch_add(1)));
  return buf;
}

namespace {

// The line with every string field cut to `cut` bytes.
std::string line_of(const RequestRecord& r, LogFormat f, const std::string& time, size_t cut) {
  auto c = [cut](const std::string& s) { return echo_cut(s, cut); };
  nlohmann::ordered_json j = {{"time", time},
                              {"id", c(r.id)},
                              {"method", c(r.method)},
                              {"endpoint", c(r.path)},
                              {"status", r.status},
                              {"model", c(r.model)},
                              {"user", c(r.user)},
                              {"n", r.n},
                              {"seed", nullptr},
                              {"prompt_tokens", r.usage.prompt_tokens},
                              {"cached_tokens", r.usage.cached_tokens},
                              {"completion_tokens", r.usage.completion_tokens},
                              {"ttft_s", nullptr},
                              {"duration_s", rounded(r.duration_s)},
                              {"error", c(r.error)}};
  if (r.seed) j["seed"] = *r.seed;
  if (r.ttft_s >= 0) j["ttft_s"] = rounded(r.ttft_s);
  if (f == LogFormat::json) return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string line = "invar serve: request";
  for (auto& [k, v] : j.items()) {
    if (k == "time" || v.is_null() || (v.is_string() && v.get<std::string>().empty())) continue;
    bool tokens = k == "n" || k.find("tokens") != std::string::npos;
    if (tokens && r.n == 0) continue;  // not a completion
    // Strings are quoted (JSON escapes) so that a client's text cannot forge a field; the
    // method and endpoint (framed tokens) only when cut.
    const bool bare =
        (k == "method" || k == "endpoint") && v.get<std::string>().find(' ') == std::string::npos;
    line +=
        " " + k + "=" +
        (v.is_string() && !bare ? v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
         : v.is_string()        ? v.get<std::string>()
                                : v.dump());
  }
  return line;
}

}  // namespace

std::string request_log_line(const RequestRecord& r, LogFormat f) {
  // Escapes may grow a string sixfold: cut harder until the line fits (at 8 bytes a field it
  // always does).
  const std::string time = utc_now();
  for (size_t cut = 512;; cut /= 2) {
    std::string line = line_of(r, f, time, cut);
    if (line.size() <= kRequestLogLineBytes || cut <= 8) return line;
  }
}

void request_log_write(const RequestRecord& r, LogFormat f) {
  if (f == LogFormat::none) return;
  std::string line = request_log_line(r, f) + "\n";
  // One write: lines from concurrent requests never interleave.
  ssize_t n = ::write(2, line.data(), line.size());
  (void)n;
}

}  // namespace invar::server
