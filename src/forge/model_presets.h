// Published configurations of the architectures invar runs, for `invar make-model --preset`: the
// per-layer shapes of the real checkpoints (random weights), so benchmarks run on the shapes users
// run. Sources are cited per preset in model_presets.cpp.
#pragma once

#include <string>
#include <string_view>

#include "forge/make_model.h"

namespace invar {

struct ModelPreset {
  std::string_view name;         // "qwen3-next-80b-a3b"
  std::string_view description;  // one line for --help
  MakeModelConfig config;        // every shape field set; type, seed and name left default
};

// nullptr if unknown.
const ModelPreset* model_preset_find(std::string_view name);
// "name: description" lines for --help.
std::string model_presets_help();

}  // namespace invar
