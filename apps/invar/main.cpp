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

Command::Command(std::string name, ArgsRewrite rewrite, Setup setup) {
  command_registry().push_back({std::move(name), std::move(setup), std::move(rewrite)});
}

namespace {

// argv without the program name, the subcommand's arguments through its ArgsRewrite (the
// peers' spellings of its flags answered: `-np 4` → `--max-num-seqs 4`); *cmd_name: the
// subcommand's name ("" when none was found). Throws Error when the rewrite refuses.
std::vector<std::string> args_rewritten(int argc, char** argv, std::string* cmd_name) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size() && args[i] != "--"; ++i)
    for (const auto& c : command_registry()) {
      if (c.name != args[i]) continue;
      *cmd_name = c.name;
      if (!c.rewrite) return args;
      std::vector<std::string> out(args.begin(), args.begin() + i + 1);
      const auto rest = c.rewrite(std::vector<std::string>(args.begin() + i + 1, args.end()));
      out.insert(out.end(), rest.begin(), rest.end());
      return out;
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
  std::string cmd_name;
  std::vector<std::string> args;
  try {
    args = args_rewritten(argc, argv, &cmd_name);
  } catch (const invar::Error& e) {
    std::fprintf(stderr, "invar %s: %s\n", cmd_name.c_str(), e.what());
    return 2;
  }
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
