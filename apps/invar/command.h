// Subcommand registry: each cmd_<name>.cpp registers itself with a static Command object, so
// adding a subcommand is adding one file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace invar::app {

struct Command {
  // setup adds the subcommand to `root` and returns it; the returned callback runs it and
  // returns the process exit status.
  using Run = std::function<int()>;
  using Setup = std::function<Run(CLI::App& root)>;
  Command(std::string name, Setup setup);
};

struct RegisteredCommand {
  std::string name;
  Command::Setup setup;
};
std::vector<RegisteredCommand>& command_registry();

}  // namespace invar::app
