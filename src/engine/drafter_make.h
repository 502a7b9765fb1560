// The drafters by the names `--spec` takes: the one place that knows every Drafter
// implementation, so drafter.h (the interface) stays below them.
#pragma once

#include <memory>
#include <string_view>

#include "engine/drafter.h"

namespace invar {

// Checks a name and config before any model is loaded (mtp's need for an MTP block is checked
// by drafter_make). Throws invar::Error naming the flag.
void drafter_config_check(std::string_view name, const DrafterConfig& cfg);

// The names `--spec` takes: "none" (null: no speculation), "ngram", "mtp". Throws invar::Error
// with a message naming the problem for an unknown name, a config out of range, or a model that
// cannot serve the drafter (no MTP block).
std::unique_ptr<Drafter> drafter_make(std::string_view name, const Model& model,
                                      const DrafterConfig& cfg);

}  // namespace invar
