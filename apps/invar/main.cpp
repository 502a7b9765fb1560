// invar: one binary, subcommands registered by cmd_*.cpp (see command.h).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <string>
#include <vector>

#include "command.h"
#include "core/error.h"
#include "flag_hint.h"
#include "version.h"

namespace invar::app {

std::vector<RegisteredCommand>& command_registry() {
  static std::vector<RegisteredCommand> registry;
  return registry;
}

Command::Command(std::string name, Setup setup) {
  command_registry().push_back({std::move(name), std::move(setup), {}});
}

Command::Command(std::string name, DashAliases aliases, Setup setup) {
  command_registry().push_back({std::move(name), std::move(setup), std::move(aliases)});
}

namespace {

// argv without the program name, with the peers' spellings of the subcommand's flags
// (Command::DashAliases; `-np 4`, `-np=4`) replaced by the flags they stand for.
std::vector<std::string> args_rewritten(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const RegisteredCommand* cmd = nullptr;
  for (std::string& a : args) {
    if (a == "--") break;
    if (!cmd) {
      for (const auto& c : command_registry())
        if (c.name == a) cmd = &c;
      continue;
    }
    for (const auto& [alias, flag] : cmd->aliases)
      if (a == alias || a.rfind(alias + "=", 0) == 0) a = flag + a.substr(alias.size());
  }
  return args;
}

}  // namespace
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
  const std::vector<std::string> args = args_rewritten(argc, argv);
  try {
    std::vector<const char*> cargs = {argv[0]};
    for (const std::string& a : args) cargs.push_back(a.c_str());
    app.parse(int(cargs.size()), cargs.data());
  } catch (const CLI::ParseError& e) {
    // --help and --version end the parse too, with status 0.
    const std::string hint = e.get_exit_code() != 0 ? flag_hint(app, args) : "";
    if (hint.empty()) return app.exit(e);
    std::fprintf(stderr, "%sRun with --help for more information.\n", hint.c_str());
    return e.get_exit_code();
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
