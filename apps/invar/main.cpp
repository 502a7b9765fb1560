// invar: one binary, subcommands registered by cmd_*.cpp (see command.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>

#include "command.h"
#include "core/error.h"
#include "version.h"

namespace invar::app {

std::vector<RegisteredCommand>& command_registry() {
  static std::vector<RegisteredCommand> registry;
  return registry;
}

Command::Command(std::string name, Setup setup) {
  command_registry().push_back({std::move(name), std::move(setup)});
}

}  // namespace invar::app

int main(int argc, char** argv) {
  using namespace invar::app;
  CLI::App app{
      "invar: a hybrid-LLM inference engine whose prefix cache never changes the answer.\n"
      "For one model file and one build, the logits at every position are a pure function of\n"
      "the token sequence: bit-identical whatever the cache state, chunking, batch or threads."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text,
                       "print the version, numerics version, build type "
                       "and ISA, and exit");
  auto& reg = command_registry();
  std::sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<std::string, Command::Run> runs;
  for (auto& c : reg) runs[c.name] = c.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (auto* sub : app.get_subcommands()) {
    try {
      return runs.at(sub->get_name())();
    } catch (const invar::Error& e) {
      std::fprintf(stderr, "invar %s: %s\n", sub->get_name().c_str(), e.what());
      return 2;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "invar %s: %s\n", sub->get_name().c_str(), e.what());
      return 2;
    }
  }
  return 0;
}
