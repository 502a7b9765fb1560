// Subcommand registry: each cmd_<name>.cpp registers itself with a static Command object, so
// adding a subcommand is adding one file.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace invar::app {

struct Command {
  // setup adds the subcommand to `root` and returns it; the returned callback runs it and
  // returns the process exit status.
  using Run = std::function<int()>;
  using Setup = std::function<Run(CLI::App& root)>;
  // Peers' flag spellings CLI11 cannot declare (a single dash and several letters, as
  // llama-server's -np) → the flag they stand for; main.cpp rewrites them before parsing.
  using DashAliases = std::vector<std::pair<std::string, std::string>>;
  Command(std::string name, Setup setup);
  Command(std::string name, DashAliases aliases, Setup setup);
};

struct RegisteredCommand {
  std::string name;
  Command::Setup setup;
  Command::DashAliases aliases;
};
std::vector<RegisteredCommand>& command_registry();

}  // namespace invar::app
