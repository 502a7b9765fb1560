// What the load-time block-scale check (model/finite_scales.h) costs next to reading the file
// once: rounds alternate the two (A B A B, the page cache warm after the first), and the table
// gives each one's best and median. Usage: finite_scales_bench FILE.gguf [rounds=8].
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gguf/gguf.h"
#include "model/finite_scales.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Reads every 8 bytes of the mapping (what a hash or a first forward pass must touch).
uint64_t read_all(const uint8_t* p, uint64_t n) {
  uint64_t s = 0;
  for (uint64_t i = 0; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    s += v;
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE.gguf [rounds=8]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 8;
  auto f = invar::GgufFile::open(argv[1]);
  const double gb = double(f->file_size()) / 1e9;
  std::vector<double> read_s, check_s;
  uint64_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    sink += read_all(f->bytes(), uint64_t(f->file_size()));
    read_s.push_back(seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    invar::check_finite_scales(*f);
    check_s.push_back(seconds_since(t0));
  }
  std::printf("file %s: %.2f GB, %zu tensors, %d rounds (A B A B)\n", argv[1], gb,
              f->tensors().size(), rounds);
  std::printf("%-28s %10s %10s %10s\n", "pass", "best s", "median s", "GB/s");
  std::printf("%-28s %10.3f %10.3f %10.1f\n", "read the file (8-byte sum)",
              *std::min_element(read_s.begin(), read_s.end()), median(read_s), gb / median(read_s));
  std::printf("%-28s %10.3f %10.3f %10.1f\n", "check every block scale",
              *std::min_element(check_s.begin(), check_s.end()), median(check_s),
              gb / median(check_s));
  std::printf("check / read (medians): %.2f   (checksum %llu)\n", median(check_s) / median(read_s),
              static_cast<unsigned long long>(sink % 1000));
  return 0;
}
