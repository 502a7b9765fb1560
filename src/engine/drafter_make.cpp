#include "engine/drafter_make.h"

#include <string>

#include "core/error.h"
#include "engine/drafter_mtp.h"
#include "engine/ngram_drafter.h"
#include "model/model.h"

namespace invar {

void drafter_config_check(std::string_view name, const DrafterConfig& cfg) {
  if (name != "none" && name != "ngram" && name != "mtp")
    throw Error("--spec must be none, mtp or ngram, got '" + std::string(name) + "'");
  if (cfg.max_k < 1 || cfg.max_k > 64)
    throw Error("--spec-tokens must be in 1..64, got " + std::to_string(cfg.max_k));
  if (cfg.ngram_min < 1 || cfg.ngram_max < cfg.ngram_min)
    throw Error("--spec-ngram-min must be ≥ 1 and ≤ --spec-ngram-max (got " +
                std::to_string(cfg.ngram_min) + ", " + std::to_string(cfg.ngram_max) + ")");
}

std::unique_ptr<Drafter> drafter_make(std::string_view name, const Model& model,
                                      const DrafterConfig& cfg) {
  drafter_config_check(name, cfg);
  if (name == "none") return nullptr;
  if (name == "ngram") return std::make_unique<NgramDrafter>(cfg);
  return std::make_unique<MtpDrafter>(model);  // name == "mtp"
}

}  // namespace invar
