// `invar bench vision --mmproj FILE --image IMG`: image-encode time of the vision tower (decode and
// resize excluded), best of --runs per thread count; with --peer llama-mtmd-cli=PATH and
// --peer-model TEXT.gguf (a text model of the mmproj's projection width), llama.cpp's encode time
// on the same files and threads, run between invar's runs so both see the same machine load,
// read from its log line "mtmd batch encoding done in N ms".
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "bench_clock.h"
#include "bench_peer.h"
#include "bench_registry.h"
#include "bench_vision.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "int_list.h"
#include "vision/image_decode.h"
#include "vision/image_preprocess.h"
#include "vision/vision_forward.h"

namespace invar::app {
namespace {

// llama-mtmd-cli's encode time of one run, in seconds.
double peer_encode_seconds(const BenchPeer& peer, const VisionBenchArgs& a, int threads) {
  const PeerProcess p =
      bench_peer_exec({peer.path, "-m", a.peer_model, "--mmproj", a.mmproj, "--image", a.image,
                       "-p", "x", "-n", "1", "--temp", "0", "-t", std::to_string(threads)},
                      size_t(1) << 20);
  if (!WIFEXITED(p.status) || WEXITSTATUS(p.status) != 0)
    throw Error("llama-mtmd-cli failed (" + p.command + "), " + process_exit_text(p.status) +
                "; its stderr ends:\n" + p.err.substr(p.err.size() > 600 ? p.err.size() - 600 : 0));
  std::smatch m;
  const std::regex done("encoding done in ([0-9.]+) ms");
  if (!std::regex_search(p.err, m, done) && !std::regex_search(p.out, m, done))
    throw Error("llama-mtmd-cli printed no 'encoding done in N ms' (" + p.command + ")");
  return std::stod(m[1].str()) / 1000.0;
}

}  // namespace

int vision_bench_run(const VisionBenchArgs& a) {
  const std::optional<BenchPeer> peer = bench_peer_parse(a.peer, "llama-mtmd-cli");
  if (peer && a.peer_model.empty())
    throw Error("--peer needs --peer-model TEXT.gguf: llama-mtmd-cli loads a text model too");
  const auto threads = int_list_parse("--threads", a.threads);
  const auto m = vision_model_load(a.mmproj);
  const RgbImage rgb = image_decode_file(a.image);
  const VisionImage img = image_preprocess(rgb, m->hp);
  const PatchGrid g = patch_grid_of(m->hp, img.width, img.height);
  std::printf(
      "vision: %s, %lld blocks, C=%lld; image %s %lld x %lld -> %lld x %lld, %lld patches, "
      "%lld tokens; best of %d\n\n",
      a.mmproj.c_str(), static_cast<long long>(m->hp.n_layer), static_cast<long long>(m->hp.n_embd),
      a.image.c_str(), static_cast<long long>(rgb.width), static_cast<long long>(rgb.height),
      static_cast<long long>(img.width), static_cast<long long>(img.height),
      static_cast<long long>(g.n_tokens()), static_cast<long long>(g.n_tokens() / 4), a.runs);
  std::printf("| threads | invar ms |%s\n", peer ? " llama.cpp ms | llama.cpp / invar |" : "");
  std::printf("|---|---|%s\n", peer ? "---|---|" : "");
  for (int64_t nt : threads) {
    ThreadPool pool(static_cast<int>(nt));
    VisionBuffers buf;
    std::vector<float> out;
    vision_encode(*m, img, pool, buf, out);  // warm-up: buffers and pages
    double best = 1e30, best_peer = 1e30;
    for (int r = 0; r < a.runs; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      vision_encode(*m, img, pool, buf, out);
      best = std::min(best, seconds_since(t0));
      if (peer) best_peer = std::min(best_peer, peer_encode_seconds(*peer, a, int(nt)));
    }
    if (peer)
      std::printf("| %lld | %.1f | %.1f | %.2f |\n", static_cast<long long>(nt), best * 1e3,
                  best_peer * 1e3, best_peer / best);
    else
      std::printf("| %lld | %.1f |\n", static_cast<long long>(nt), best * 1e3);
  }
  return 0;
}

namespace {

BenchKind vision_bench("vision", [](CLI::App& bench) -> Command::Run {
  auto a = std::make_shared<VisionBenchArgs>();
  auto* sub = bench.add_subcommand(
      "vision",
      "Image-encode time of a vision tower (mmproj, qwen3vl_merger), best of --runs per thread\n"
      "count; --peer llama-mtmd-cli=PATH --peer-model TEXT.gguf times llama.cpp on the same files");
  sub->add_option("--mmproj", a->mmproj, "mmproj GGUF")->required();
  sub->add_option("--image", a->image, "PNG or JPEG")->required();
  sub->add_option("--threads", a->threads, "thread counts, comma separated")->capture_default_str();
  sub->add_option("--runs", a->runs, "timed runs; the best is reported")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--peer", a->peer, "llama-mtmd-cli=PATH: llama.cpp's encode time alongside");
  sub->add_option("--peer-model", a->peer_model,
                  "--peer: the text model llama-mtmd-cli loads (its width = the projection's)");
  return [a]() -> int { return vision_bench_run(*a); };
});

}  // namespace
}  // namespace invar::app
