// `invar bench`: groups the benchmark kinds registered in cmd_bench_*.cpp.
#include <algorithm>
#include <map>
#include <memory>

#include "bench_registry.h"

namespace invar::app {

std::vector<RegisteredCommand>& bench_registry() {
  static std::vector<RegisteredCommand> registry;
  return registry;
}

BenchKind::BenchKind(std::string name, Command::Setup setup) {
  bench_registry().push_back({std::move(name), std::move(setup), {}});
}

namespace {

Command bench_command("bench", [](CLI::App& root) -> Command::Run {
  auto* bench = root.add_subcommand(
      "bench", "Benchmarks: print tables of speed next to this machine's limits (not tests)");
  bench->require_subcommand(1);
  auto runs = std::make_shared<std::map<std::string, Command::Run>>();
  auto& reg = bench_registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  for (auto& k : reg) (*runs)[k.name] = k.setup(*bench);
  return [bench, runs]() -> int {
    for (auto* sub : bench->get_subcommands()) return runs->at(sub->get_name())();
    return 2;
  };
});

}  // namespace
}  // namespace invar::app
