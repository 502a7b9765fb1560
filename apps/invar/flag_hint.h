// What to tell a user whose command line CLI11 refused for an unknown flag or subcommand: the
// nearest known name, as git and cargo do ("did you mean --ctx-size?").
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "flag_nearest.h"

namespace invar::app {

// One line per unknown flag or subcommand in `args` (argv without the program name), each
// naming its nearest known name when there is one; "" when every flag and subcommand is known
// (the refusal is about something else: a value, a missing argument).
std::string flag_hint(const CLI::App& root, const std::vector<std::string>& args);

}  // namespace invar::app
