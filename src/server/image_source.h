// Where a chat request's image comes from, read into its encoded bytes (PNG or JPEG), with the
// rules vLLM applies: data: URLs with base64 payloads; file:// only under
// --allowed-local-media-path, the path resolved (symbolic links and "..") before it is checked to
// lie inside that directory; http(s):// refused — the server fetches nothing on a client's
// behalf. Every refusal is a 400 naming the field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace invar::server {

struct ImageSourceConfig {
  std::string allowed_local_media_path;   // "": file:// URLs are refused
  int64_t max_bytes = int64_t(20) << 20;  // encoded bytes of one image
};

// Throws ApiError (400 naming `field`).
std::string image_source_read(const std::string& url, const std::string& field,
                              const ImageSourceConfig& cfg);

// RFC 4648 base64, standard or URL-safe alphabet, padding optional, no whitespace; false for
// any other byte, or when the result would pass max_bytes (checked before anything is decoded).
bool base64_decode(std::string_view in, int64_t max_bytes, std::string& out);

}  // namespace invar::server
