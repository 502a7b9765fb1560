// What to tell a user whose command line CLI11 refused for an unknown flag or subcommand: the
// nearest known name, as git and cargo do ("did you mean --ctx-size?").
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace invar::app {

// The name of `known` nearest to `given` (edit distance over the names without their dashes, a
// swap of neighbours counting one, at most max(1, length / 3); else the shortest name `given`
// begins), or "" when none is near.
std::string flag_nearest(const std::string& given, const std::vector<std::string>& known);

// One line per unknown flag or subcommand in `args` (argv without the program name), each
// naming its nearest known name when there is one; "" when every flag and subcommand is known
// (the refusal is about something else: a value, a missing argument).
std::string flag_hint(const CLI::App& root, const std::vector<std::string>& args);

}  // namespace invar::app
