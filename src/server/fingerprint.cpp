#include "server/fingerprint.h"

#include <openssl/sha.h>

namespace invar::server {

std::string sha256_hex(std::string_view data) {
  unsigned char md[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), md);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : md) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

std::string system_fingerprint_of(std::string_view model_sha256, std::string_view numerics_version) {
  std::string input(model_sha256);
  input += ':';
  input += numerics_version;
  return "fp_" + sha256_hex(input).substr(0, 16);
}

}  // namespace invar::server
