#include "server/fingerprint.h"

namespace invar::server {

std::string system_fingerprint_of(std::string_view model_sha256,
                                  std::string_view numerics_version) {
  std::string input(model_sha256);
  input += ':';
  input += numerics_version;
  return "fp_" + sha256_hex(input).substr(0, 16);
}

}  // namespace invar::server
