// `invar bench <kind>`: each cmd_bench_<kind>.cpp registers one kind, like command.h.
#pragma once

#include "command.h"

namespace invar::app {

struct BenchKind {
  BenchKind(std::string name, Command::Setup setup);  // setup receives the `bench` subcommand
};
std::vector<RegisteredCommand>& bench_registry();

}  // namespace invar::app
