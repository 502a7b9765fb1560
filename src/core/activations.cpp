#include "core/activations.h"

#include <atomic>

#include "core/numerics_version.h"

namespace invar {
namespace {

std::atomic<int> g_profile{int(ActivationProfile::f32)};

}  // namespace

ActivationProfile activations_active() {
  return ActivationProfile(g_profile.load(std::memory_order_relaxed));
}

void activations_set(ActivationProfile profile) {
  g_profile.store(int(profile), std::memory_order_relaxed);
}

std::optional<ActivationProfile> activations_parse(std::string_view s) {
  if (s == "f32") return ActivationProfile::f32;
  if (s == "q8") return ActivationProfile::q8;
  return std::nullopt;
}

std::string_view activations_name(ActivationProfile profile) {
  return profile == ActivationProfile::q8 ? "q8" : "f32";
}

std::string_view numerics_version_of(ActivationProfile profile) {
  return profile == ActivationProfile::q8 ? kNumericsVersionQ8 : kNumericsVersion;
}

}  // namespace invar
