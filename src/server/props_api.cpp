#include "server/props_api.h"

#include "server/api_request.h"

namespace invar::server {

nlohmann::json props_json(const Backend& b, const ServerConfig& cfg, const EngineMetrics& em) {
  const ApiRequest defaults;  // what a request that sets nothing samples with
  const nlohmann::json params = {{"temperature", defaults.sampling.temperature},
                                 {"top_k", defaults.sampling.top_k},
                                 {"top_p", defaults.sampling.top_p},
                                 {"min_p", defaults.sampling.min_p},
                                 {"stop", nlohmann::json::array()},
                                 {"ignore_eos", defaults.ignore_eos},
                                 {"stream", defaults.stream}};
  const ChatPrompt* tmpl = b.chat_template();
  nlohmann::json p = {{"default_generation_settings",
                       {{"n_ctx", b.n_ctx()},
                        {"speculative", !em.spec_accepted_hist.empty()},
                        {"is_processing", em.requests_running > 0},
                        {"params", params}}},
                      {"total_slots", cfg.total_slots},
                      {"model_path", cfg.model_path},
                      {"chat_template", tmpl ? tmpl->source() : ""},
                      {"modalities", {{"vision", b.vision()}, {"audio", false}}},
                      {"build_info", cfg.build_info},
                      {"is_sleeping", false}};
  if (cfg.random_weights) p["random_weights"] = true;
  return p;
}

nlohmann::json version_json(const ServerConfig& cfg) {
  return {{"version", cfg.version}};
}

}  // namespace invar::server
