// Standalone fake server for `--server-cmd` tests:
//   probe_fake_server PORT MODE(stable|ulp|reorder|mixed) SHAPE(openai|llamacpp) [FINGERPRINT]
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "fake_server.h"

int main(int argc, char** argv) {
  using namespace invar::probe_test;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s PORT MODE SHAPE [FINGERPRINT]\n", argv[0]);
    return 2;
  }
  try {
    FakeConfig cfg;
    cfg.mode = fake_mode_parse(argv[2]);
    cfg.shape = std::string(argv[3]) == "llamacpp" ? FakeShape::llamacpp : FakeShape::openai;
    if (argc > 4) cfg.fingerprint = argv[4];
    FakeServer s(cfg);
    s.serve_forever(std::atoi(argv[1]));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "probe_fake_server: %s\n", e.what());
    return 1;
  }
  return 0;
}
