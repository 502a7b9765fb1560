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
  // The subcommand's arguments (after its name) as CLI11 is to parse them: main.cpp applies it
  // before parsing, so that it can answer spellings CLI11 cannot declare (a single dash and
  // several letters, as llama-server's -np). Throws Error to refuse the command line.
  using ArgsRewrite = std::function<std::vector<std::string>(const std::vector<std::string>&)>;
  Command(std::string name, Setup setup);
  Command(std::string name, ArgsRewrite rewrite, Setup setup);
};

struct RegisteredCommand {
  std::string name;
  Command::Setup setup;
  Command::ArgsRewrite rewrite;  // null: the arguments as given
};
std::vector<RegisteredCommand>& command_registry();

}  // namespace invar::app
