// What is served, in the peers' shapes: llama-server's GET /props (the context size, the slots,
// the model path, the chat template, the build) and vLLM's GET /version.
#pragma once

#include <nlohmann/json.hpp>

#include "server/backend.h"
#include "server/http_server.h"

namespace invar::server {

// {"default_generation_settings": {"n_ctx", "speculative", "is_processing", "params": {the
// sampling defaults a request gets}}, "total_slots", "model_path", "chat_template",
// "modalities", "build_info", "is_sleeping"[, "random_weights"]}
nlohmann::json props_json(const Backend& b, const ServerConfig& cfg, const EngineMetrics& em);

// {"version": "0.1.0"}
nlohmann::json version_json(const ServerConfig& cfg);

}  // namespace invar::server
