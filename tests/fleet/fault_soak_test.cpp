// The fault soak (`make soak`, label soak): three real `invar serve` replicas sharing a real
// redis-server, each with its own disk tier on a small tmpfs, behind a real nginx, under a client
// load, while faults come one after another: a replica SIGKILLed and restarted on its port, Redis
// crashed and restarted empty, a replica's disk filled to the last byte then freed, a corrupt
// record planted in a disk tier and in Redis. Checked: every 200 carries the digest of a solo
// run with no cache (docs/digest.md); 5xx only for requests in flight at the killed replica when
// it died; each failure logged once per episode by invar, not once per request; the corrupt
// records counted. Prints requests, errors by kind and recovery time per fault.
//
// INVAR_FAULT_SOAK_S: seconds of load (default 150); the faults are spread over it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "cache/prefix_cache.h"
#include "cache/redis_process.h"
#include "cache/tier_record.h"
#include "fleet/fleet_processes.h"
#include "probe/completion.h"
#include "probe/digest.h"
#include "server/serve_process.h"

namespace fault_soak_test {

using namespace invar::fleet::testing;
using invar::server::testing::kInvarBin;
using invar::server::testing::kTinyModel;
using invar::server::testing::metric_value;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kReplicas = 3;
constexpr int kClients = 3;
constexpr int kBlock = 16;
constexpr int kPrefixes = 4, kQuestions = 4;
constexpr int kPrefixTokens = 20 * kBlock, kQuestionTokens = 2 * kBlock + 8;
constexpr int64_t kDiskBytes = 24 << 20;         // each replica's tmpfs
constexpr int64_t kDiskBudget = 16 << 20;        // --cache-dir-bytes: below the tmpfs
constexpr const char* kMemoryBytes = "3000000";  // --cache-bytes: a few prompts' blocks

std::vector<int32_t> prompt_of(int r) {
  std::mt19937 prefix_rng(static_cast<uint32_t>(100 + r / kQuestions));
  std::mt19937 question_rng(static_cast<uint32_t>(1000 + r));
  std::vector<int32_t> p;
  for (int i = 0; i < kPrefixTokens; ++i)
    p.push_back(20 + static_cast<int32_t>(prefix_rng() % 300));
  for (int i = 0; i < kQuestionTokens; ++i)
    p.push_back(20 + static_cast<int32_t>(question_rng() % 300));
  return p;
}

json body_of(int r, const std::string& salt) {
  json b = {{"prompt", prompt_of(r)}, {"max_tokens", 4}, {"temperature", 0},
            {"ignore_eos", true},     {"logprobs", 20},  {"return_tokens_as_token_ids", true}};
  if (!salt.empty()) b["cache_salt"] = salt;
  return b;
}

// The order digest of a 200 body; "" when it does not parse.
std::string digest_of(const std::string& body) {
  try {
    const auto c = invar::probe::completion_parse(invar::probe::json::parse(body),
                                                  invar::probe::Api::completions);
    return c.tokens.size() == 4 ? invar::probe::completion_digests(c).order : "";
  } catch (const std::exception&) {
    return "";
  }
}

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string metrics_of(int port) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(1, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : "";
}

double tier_metric(const std::string& m, const std::string& name, const std::string& tier) {
  return metric_value(m, name + "\\{tier=\"" + tier + "\"\\}");
}

// One replica on a fixed port, so that nginx's upstream stays valid across a restart; each life
// logs to its own file.
struct Replica {
  int index = 0, port = 0, lives = 0;
  fs::path dir, disk;
  std::string redis_url;
  pid_t pid = -1;

  fs::path log(int life) const {
    return dir / ("replica" + std::to_string(index) + "." + std::to_string(life) + ".log");
  }
  // The fleet's --cache-tier-key: the same secret for every replica (they share Redis).
  std::string tier_key() const {
    return invar::testing::tier_key_file((dir / "tier.key").string(), 'f');
  }
  bool start() {
    pid = process_spawn({kInvarBin,
                         "serve",
                         "--host",
                         "127.0.0.1",
                         "--port",
                         std::to_string(port),
                         "--model",
                         kTinyModel,
                         "--threads",
                         "1",
                         "--block-size",
                         std::to_string(kBlock),
                         "--ctx",
                         "4096",
                         "--log-format",
                         "none",
                         "--cache-bytes",
                         kMemoryBytes,
                         "--cache-dir",
                         disk.string(),
                         "--cache-dir-bytes",
                         std::to_string(kDiskBudget),
                         "--cache-redis",
                         redis_url,
                         "--cache-tier-key",
                         tier_key()},
                        log(lives++));
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    while (Clock::now() < deadline && waitpid(pid, nullptr, WNOHANG) == 0) {
      httplib::Client c("127.0.0.1", port);
      c.set_connection_timeout(0, 200000);
      if (auto r = c.Get("/health"); r && r->status == 200) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  std::string addr() const { return "127.0.0.1:" + std::to_string(port); }
};

// What one client request got, in seconds since the load began.
struct Outcome {
  std::string id;
  double t0 = 0, t1 = 0;
  std::string kind;  // ok, wrong_answer, http_<status>, transport_<error>
};

// A disk tier on a tmpfs of its own when the test may mount one (root); else a plain directory,
// and the disk-full fault is skipped.
bool tmpfs_mount(const fs::path& dir) {
  fs::create_directories(dir);
  const std::string opts = "size=" + std::to_string(kDiskBytes);
  return ::mount("tmpfs", dir.c_str(), "tmpfs", 0, opts.c_str()) == 0;
}

// Writes `path` until the filesystem refuses (ENOSPC): returns the bytes written.
int64_t disk_fill(const fs::path& path) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::vector<char> chunk(1 << 16, 'x');
  int64_t n = 0;
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) n += 1 << 16;
  std::fclose(f);
  struct statvfs s {};
  ::statvfs(path.parent_path().c_str(), &s);
  return s.f_bavail == 0 ? n : -n;  // negative: space left over
}

// Overwrites 8 bytes in the middle of a record (a file, or a Redis value via SETRANGE).
void record_damage(const fs::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(fs::file_size(file) / 2));
  f.write("CORRUPT!", 8);
}

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

TEST(FaultSoak, NoWrongAnswerNoStray5xxEachFailureLoggedOnce) {
  const char* env = std::getenv("INVAR_FAULT_SOAK_S");
  const double soak_s = std::max(40.0, env ? std::atof(env) : 150.0);
  const fs::path dir = scratch_dir("invar-fault-soak");
  invar::testing::RedisProcess redis;
  ASSERT_NE(redis.port(), 0) << redis.failure();

  // 1. The solo run: each request once on a replica without any cache.
  constexpr int kRequests = kPrefixes * kQuestions;
  std::vector<std::string> solo(kRequests);
  {
    invar::server::testing::ServeProcess s(
        {"--model", kTinyModel, "--threads", "1", "--block-size", std::to_string(kBlock), "--ctx",
         "4096", "--no-prefix-cache"},
        "fault_soak_solo");
    ASSERT_NE(s.port(), 0) << s.log();
    httplib::Client c("127.0.0.1", s.port());
    c.set_read_timeout(120, 0);
    for (int r = 0; r < kRequests; ++r) {
      auto res = c.Post("/v1/completions", body_of(r, "").dump(), "application/json");
      ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no answer");
      solo[r] = digest_of(res->body);
      ASSERT_FALSE(solo[r].empty()) << res->body;
    }
  }

  // 2. The fleet.
  bool tmpfs = true;
  std::vector<Replica> replicas(kReplicas);
  struct FleetCleanup {  // whatever way the test leaves
    std::vector<Replica>& replicas;
    const fs::path& dir;
    ~FleetCleanup() {
      for (Replica& rep : replicas) {
        process_stop(rep.pid, SIGKILL);
        if (!rep.disk.empty()) ::umount2(rep.disk.c_str(), MNT_DETACH);
      }
      fs::remove_all(dir);
    }
  } cleanup{replicas, dir};
  std::vector<std::string> upstreams;
  for (int i = 0; i < kReplicas; ++i) {
    Replica& rep = replicas[i];
    rep.index = i;
    rep.dir = dir;
    rep.disk = dir / ("disk" + std::to_string(i));
    tmpfs = tmpfs_mount(rep.disk) && tmpfs;
    rep.redis_url = redis.url();
    rep.port = invar::test::port_free();
    ASSERT_TRUE(rep.start()) << fs::path(rep.log(0)).string() << ":\n" << file_text(rep.log(0));
    upstreams.push_back(rep.addr());
  }
  if (!tmpfs)
    std::printf(
        "fault soak: cannot mount a tmpfs (not root?): plain directories, "
        "the disk-full fault is skipped\n");
  NginxProcess nginx(dir / "nginx", upstreams, "--fallback spread");
  ASSERT_NE(nginx.port(), 0) << nginx.error();

  // 3. The load: half the requests under a salt that changes every 4 s, so that new records are
  // written to the disk tiers and Redis all the time; a salt never changes an answer.
  const auto t0 = Clock::now();
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<Outcome> outcomes;
  std::vector<std::thread> clients;
  struct ClientsJoin {  // whatever way the test leaves
    std::atomic<bool>& stop;
    std::vector<std::thread>& clients;
    ~ClientsJoin() {
      stop = true;
      for (auto& t : clients)
        if (t.joinable()) t.join();
    }
  } clients_join{stop, clients};
  for (int k = 0; k < kClients; ++k)
    clients.emplace_back([&, k] {
      std::mt19937 rng(static_cast<uint32_t>(7 + k));
      httplib::Client c("127.0.0.1", nginx.port());
      c.set_read_timeout(60, 0);
      for (int n = 0; !stop; ++n) {
        Outcome o;
        const int r = static_cast<int>(rng() % kRequests);
        const std::string salt =
            rng() % 2 ? "" : "generation-" + std::to_string(static_cast<int>(since(t0) / 4));
        o.id = "c" + std::to_string(k) + "-" + std::to_string(n);
        o.t0 = since(t0);
        auto res = c.Post("/v1/completions", {{"X-Request-Id", o.id}}, body_of(r, salt).dump(),
                          "application/json");
        o.t1 = since(t0);
        if (!res)
          o.kind = "transport_" + httplib::to_string(res.error());
        else if (res->status != 200)
          o.kind = "http_" + std::to_string(res->status);
        else
          o.kind = digest_of(res->body) == solo[r] ? "ok" : "wrong_answer";
        std::lock_guard<std::mutex> lock(mu);
        outcomes.push_back(o);
      }
    });

  // The faults, one after another, a quarter of the soak apart.
  const double gap = soak_s / 5;
  struct Fault {
    std::string name;
    double at = 0, until = 0;  // seconds since t0: when it began and when it was undone
    double recovered = -1;     // when the affected component answered well again
    std::string note;
  };
  std::vector<Fault> faults;
  const auto sleep_until = [&](double t) {
    while (since(t0) < t) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  };
  const auto wait_for = [&](const std::function<bool()>& done, double timeout_s) {
    const double end = since(t0) + timeout_s;
    while (!done() && since(t0) < end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return done() ? since(t0) : -1.0;
  };

  // Fault 1: SIGKILL the replica with the most requests in flight, restart it 2 s later.
  sleep_until(gap);
  int victim = 0;
  double most = -1;
  for (int i = 0; i < kReplicas; ++i) {
    const double n = metric_value(metrics_of(replicas[i].port), "invar_server_inflight_requests");
    if (n > most) most = n, victim = i;
  }
  Fault kill{"SIGKILL replica " + std::to_string(victim) + ", restart", since(t0), 0, -1, ""};
  ::kill(replicas[victim].pid, SIGKILL);
  waitpid(replicas[victim].pid, nullptr, 0);
  const double killed = since(t0);  // the process is gone
  kill.note = std::to_string(static_cast<int>(most)) + " in flight";
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_TRUE(replicas[victim].start()) << file_text(replicas[victim].log(1));
  kill.until = since(t0);
  faults.push_back(kill);

  // Fault 2: damage one record in a replica's disk tier and the same record in Redis: block 0
  // of a prefix under no salt, which the replica reads whenever its memory lacks it; then the
  // damaged file sends it to Redis. (Before Redis restarts: records that every disk holds are
  // not written to Redis again.)
  sleep_until(2 * gap);
  const int planted_on = (victim + 2) % kReplicas;
  // The record's name as the replicas derive it from the fleet's key: chain keys start at the
  // keyed salt key, names are a keyed hash of them.
  const invar::TierSecret secret = invar::tier_secret_load(replicas[planted_on].tier_key());
  std::vector<uint64_t> keys;
  invar::PrefixCache(invar::CacheConfig{.block_size = kBlock,
                                        .block_floats = 1,
                                        .state_floats = 1,
                                        .cache_bytes = 1 << 20,
                                        .chain_secret = secret.chain})
      .chain_keys(prompt_of(0), "", 1, keys);
  const std::string hex = invar::tier_key_hex(invar::tier_record_name(secret, keys[1]));
  fs::path planted;
  for (auto& e : fs::recursive_directory_iterator(replicas[planted_on].disk))
    if (e.path().filename() == hex + ".blk") planted = e.path();
  std::string redis_key = redis.command({"KEYS", "invar:*:" + hex});
  if (!redis_key.empty()) redis_key.pop_back();  // the reply's trailing newline
  // Records counted corrupt by the replicas' current lives: {disk, Redis}.
  const auto corrupt_counts = [&] {
    std::pair<double, double> n{0, 0};
    for (int i = 0; i < kReplicas; ++i) {
      const std::string m = metrics_of(replicas[i].port);
      n.first += tier_metric(m, "invar_cache_tier_corrupt_total", "disk");
      n.second += tier_metric(m, "invar_cache_tier_corrupt_total", "redis");
    }
    return n;
  };
  const auto corrupt_before = corrupt_counts();
  Fault plant{"corrupt record on disk " + std::to_string(planted_on) + " and in Redis", since(t0),
              0, -1, ""};
  ASSERT_FALSE(planted.empty()) << "no record " << hex << " on disk " << planted_on;
  ASSERT_FALSE(redis_key.empty()) << "no record " << hex << " in Redis";
  record_damage(planted);
  redis.command({"SETRANGE", redis_key, "200", "CORRUPT!"});
  plant.until = since(t0);
  plant.recovered = wait_for(
      [&] {
        const auto c = corrupt_counts();
        return c.first > corrupt_before.first && c.second > corrupt_before.second;
      },
      gap);
  plant.note = "recovered: both copies counted corrupt";
  faults.push_back(plant);

  // Fault 3: Redis crashes (its records go with it) and is back 3 s later, empty.
  sleep_until(3 * gap);
  std::vector<double> redis_writes(kReplicas);
  for (int i = 0; i < kReplicas; ++i)
    redis_writes[i] =
        tier_metric(metrics_of(replicas[i].port), "invar_cache_tier_writes_total", "redis");
  Fault red{"Redis crash, restart empty", since(t0), 0, -1, ""};
  redis.stop();
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_TRUE(redis.restart());
  red.until = since(t0);
  red.recovered = wait_for(
      [&] {
        for (int i = 0; i < kReplicas; ++i)
          if (tier_metric(metrics_of(replicas[i].port), "invar_cache_tier_writes_total", "redis") >
              redis_writes[i])
            return true;
        return false;
      },
      gap);
  red.note = "recovered: first record written to the new Redis";
  faults.push_back(red);

  // Fault 4: a replica's disk fills to the last byte for 5 s, then the filler is removed.
  const int full = (victim + 1) % kReplicas;
  bool full_evicted = false;  // the tier evicted records while the disk was full
  if (tmpfs) {
    sleep_until(4 * gap);
    const auto disk_writes = [&] {
      return tier_metric(metrics_of(replicas[full].port), "invar_cache_tier_writes_total", "disk");
    };
    const auto disk_evictions = [&] {
      return tier_metric(metrics_of(replicas[full].port), "invar_cache_tier_evictions_total",
                         "disk");
    };
    Fault fill{"disk of replica " + std::to_string(full) + " full", since(t0), 0, -1, ""};
    const double evictions_before = disk_evictions();
    const int64_t filled = disk_fill(replicas[full].disk / "filler");
    std::this_thread::sleep_for(std::chrono::seconds(5));
    const double before = disk_writes();
    full_evicted = disk_evictions() > evictions_before;
    fs::remove(replicas[full].disk / "filler");
    fill.until = since(t0);
    fill.recovered = wait_for([&] { return disk_writes() > before; }, gap);
    fill.note = "filler " + std::to_string(filled >> 20) + " MiB" +
                (filled < 0 ? " (space left over!)" : "") +
                "; recovered: first record written after the filler went";
    faults.push_back(fill);
  }

  sleep_until(soak_s);
  stop = true;
  for (auto& t : clients) t.join();

  // 4. The checks. Upstreams of each request, from nginx's log.
  std::map<std::string, std::string> upstream_of;
  {
    const std::string log = nginx.access_log();
    std::regex re("request_id=([^ ]+) upstream=([^ ]+(?:, [^ ]+)*) upstream_status");
    for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it)
      upstream_of[(*it)[1]] = (*it)[2];
  }
  std::map<std::string, int> kinds;
  int stray = 0, killed_in_flight = 0;
  std::string stray_text;
  for (const Outcome& o : outcomes) {
    ++kinds[o.kind];
    if (o.kind == "ok") {
      // The first good answer served by the restarted replica.
      const auto& up = upstream_of[o.id];
      if (o.t0 > faults[0].until && up.find(replicas[victim].addr()) != std::string::npos &&
          (faults[0].recovered < 0 || o.t1 < faults[0].recovered))
        faults[0].recovered = o.t1;
      continue;
    }
    // Allowed: a 502 for a request that was at the killed replica when it died (sent before
    // the process was gone, answered after the signal; a grace of 0.2 s for nginx to notice
    // its idle connections to the replica closing).
    const bool in_flight_at_kill =
        o.t0 <= killed + 0.2 && o.t1 >= faults[0].at &&
        upstream_of[o.id].find(replicas[victim].addr()) != std::string::npos;
    if (o.kind == "http_502" && in_flight_at_kill) {
      ++killed_in_flight;
      continue;
    }
    ++stray;
    if (stray <= 10)
      stray_text += o.id + " " + o.kind + " [" + std::to_string(o.t0) + ", " +
                    std::to_string(o.t1) + "] upstream " + upstream_of[o.id] + "\n";
  }
  faults[0].note += faults[0].recovered < 0 ? "; the restarted replica served nothing"
                                            : "; recovered: first 200 from the restarted replica";

  std::printf("\nfault soak: %.0f s, %d replicas, %d clients, disk tiers on %s\n", soak_s,
              kReplicas, kClients, tmpfs ? "tmpfs (24 MiB each)" : "plain directories");
  std::printf("%-22s %8zu\n", "requests", outcomes.size());
  for (const auto& [kind, n] : kinds) std::printf("%-22s %8d\n", kind.c_str(), n);
  std::printf("%-22s %8d\n", "502 killed in flight", killed_in_flight);
  std::printf("%-22s %8d\n", "unexplained errors", stray);
  std::printf("\n%-40s %6s %7s %9s %9s  %s\n", "fault", "at s", "undone", "recovery", "(undone)",
              "");
  for (const Fault& f : faults)
    std::printf("%-40s %6.1f %7.1f %8.2fs %8.2fs  %s\n", f.name.c_str(), f.at, f.until,
                f.recovered < 0 ? -1.0 : f.recovered - f.at,
                f.recovered < 0 ? -1.0 : f.recovered - f.until, f.note.c_str());
  // Failures counted by the replicas' current lives against the lines their logs hold.
  std::map<std::string, double> counted;
  for (const Replica& rep : replicas) {
    const std::string m = metrics_of(rep.port);
    for (const char* tier : {"disk", "redis"})
      for (const char* name : {"errors", "write_failures", "corrupt"})
        counted[std::string(tier) + " " + name] +=
            tier_metric(m, std::string("invar_cache_tier_") + name + "_total", tier);
  }
  std::printf("\ncounted by the replicas (current lives):");
  for (const auto& [what, n] : counted) std::printf(" %s %.0f;", what.c_str(), n);
  std::printf("\nlogged by the replicas (every life):\n");
  for (const Replica& rep : replicas)
    for (int life = 0; life < rep.lives; ++life) {
      std::istringstream log(file_text(rep.log(life)));
      for (std::string line; std::getline(log, line);)
        if (line.find("invar: cache tier ") != std::string::npos)
          std::printf("  replica %d.%d: %s\n", rep.index, life, line.c_str());
    }

  EXPECT_EQ(kinds["wrong_answer"], 0) << "answers differ from the solo run";
  EXPECT_EQ(stray, 0) << "errors outside the killed replica's in-flight requests:\n" << stray_text;
  EXPECT_GT(kinds["ok"], 100) << "the load hardly ran";
  for (const Fault& f : faults) EXPECT_GE(f.recovered, 0) << f.name << ": no recovery seen";

  // Each failure once per episode in each replica's log (one episode per fault, so never more
  // than one line per tier and direction); the one corrupt record planted per tier once.
  int corrupt_lines = 0;
  for (const Replica& rep : replicas)
    for (int life = 0; life < rep.lives; ++life) {
      const std::string log = file_text(rep.log(life));
      for (const char* line :
           {"cache tier redis: a read failed", "cache tier redis: a write failed",
            "cache tier disk: a read failed", "cache tier disk: a write failed"})
        EXPECT_LE(count_of(log, line), 1) << rep.log(life) << ": '" << line << "' repeats:\n"
                                          << log.substr(0, 4000);
      corrupt_lines += count_of(log, "is truncated, corrupt, foreign");
      EXPECT_EQ(count_of(log, "a write failed"), count_of(log, "writes succeed again"))
          << rep.log(life) << ": a failure never ended\n"
          << log.substr(0, 4000);
    }
  const std::string full_log = file_text(replicas[full].log(replicas[full].lives - 1));
  // A full filesystem makes the tier evict its own records and write again (ENOSPC); only when
  // that cannot make room does a write fail, logged. Either way the full disk was met. (Budget
  // evictions count in the same metric: the check is that the fault was seen, not which way.)
  if (tmpfs) {
    EXPECT_TRUE(full_evicted ||
                full_log.find("cache tier disk: a write failed (write ") != std::string::npos)
        << "the full disk was neither absorbed by evictions nor logged:\n"
        << full_log.substr(0, 4000);
  }
  const auto corrupt_after = corrupt_counts();
  EXPECT_GE(corrupt_after.first - corrupt_before.first, 1) << "the damaged file went unseen";
  EXPECT_GE(corrupt_after.second - corrupt_before.second, 1) << "the damaged value went unseen";
  EXPECT_EQ(corrupt_before.first + corrupt_before.second, 0) << "corrupt before the plant";
  EXPECT_EQ(corrupt_lines, corrupt_after.first + corrupt_after.second)
      << "one log line per corrupt record";
}

}  // namespace fault_soak_test
