#include "server/image_source.h"

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>

#include "server/api_error.h"

namespace invar::server {
namespace {

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;  // '-' and '_': the URL-safe alphabet
  if (c == '/' || c == '_') return 63;
  return -1;
}

std::string mb(int64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

std::string data_url_read(const std::string& url, const std::string& field,
                          const ImageSourceConfig& cfg) {
  const size_t comma = url.find(',');
  if (comma == std::string::npos)
    throw bad_request(field, "'" + field + "': a data URL must be data:MIME;base64,DATA");
  const std::string head = url.substr(5, comma - 5);  // after "data:"
  if (head.size() < 7 || head.compare(head.size() - 7, 7, ";base64") != 0)
    throw bad_request(field, "'" + field + "': only base64 data URLs are read (data:" +
                                 head.substr(0, 64) + ",...)");
  const std::string mime = head.substr(0, head.size() - 7);
  if (!mime.empty() && mime.rfind("image/", 0) != 0)
    throw bad_request(
        field, "'" + field + "': the data URL holds " + mime.substr(0, 64) + ", not an image");
  std::string out;
  const std::string_view payload(url.data() + comma + 1, url.size() - comma - 1);
  if (int64_t(payload.size()) / 4 * 3 > cfg.max_bytes)
    throw bad_request(field,
                      "'" + field + "': the image is over " + mb(cfg.max_bytes) + " encoded");
  if (!base64_decode(payload, cfg.max_bytes, out))
    throw bad_request(field, "'" + field + "': the data URL's payload is not valid base64");
  if (out.empty()) throw bad_request(field, "'" + field + "': the data URL holds no bytes");
  return out;
}

std::string file_url_read(const std::string& url, const std::string& field,
                          const ImageSourceConfig& cfg) {
  if (cfg.allowed_local_media_path.empty())
    throw bad_request(field, "'" + field +
                                 "': file:// URLs are read only under a directory the server "
                                 "allows (invar serve --allowed-local-media-path DIR)");
  std::string path = url.substr(7);  // file://PATH; only the local host's form
  if (path.rfind("localhost/", 0) == 0) path = path.substr(9);
  if (path.empty() || path[0] != '/')
    throw bad_request(field, "'" + field + "': a file URL must be file:///ABSOLUTE/PATH");
  std::unique_ptr<char, decltype(&std::free)> real(realpath(path.c_str(), nullptr), &std::free);
  std::unique_ptr<char, decltype(&std::free)> dir(
      realpath(cfg.allowed_local_media_path.c_str(), nullptr), &std::free);
  const std::string inside = dir ? std::string(dir.get()) + "/" : "";
  if (!real || !dir || std::string(real.get()).rfind(inside, 0) != 0)
    throw bad_request(field, "'" + field +
                                 "': the file does not exist or lies outside the directory the "
                                 "server allows (--allowed-local-media-path)");
  std::ifstream f(real.get(), std::ios::binary | std::ios::ate);
  if (!f) throw bad_request(field, "'" + field + "': the file cannot be read");
  const std::streamoff size = f.tellg();
  if (size < 0) throw bad_request(field, "'" + field + "': the file cannot be read");
  if (size > cfg.max_bytes)
    throw bad_request(field, "'" + field + "': the image is over " + mb(cfg.max_bytes));
  std::string out(size_t(size), '\0');
  f.seekg(0);
  if (!f.read(out.data(), size))
    throw bad_request(field, "'" + field + "': the file cannot be read");
  return out;
}

}  // namespace

bool base64_decode(std::string_view in, int64_t max_bytes, std::string& out) {
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1 || int64_t(in.size() / 4 * 3 + 2) > max_bytes + 2) return false;
  out.clear();
  out.reserve(in.size() / 4 * 3 + 2);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    const int v = base64_value(c);
    if (v < 0) return false;
    acc = (acc << 6) | uint32_t(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(char((acc >> bits) & 0xff));
    }
  }
  return int64_t(out.size()) <= max_bytes;
}

std::string image_source_read(const std::string& url, const std::string& field,
                              const ImageSourceConfig& cfg) {
  auto starts = [&url](const char* p) {
    const size_t n = std::char_traits<char>::length(p);
    if (url.size() < n) return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(url[i])) != p[i]) return false;
    return true;
  };
  if (starts("data:")) return data_url_read(url, field, cfg);
  if (starts("file://")) return file_url_read(url, field, cfg);
  if (starts("http://") || starts("https://"))
    throw bad_request(field, "'" + field +
                                 "': remote image URLs are not fetched: send the image inline "
                                 "as a data: URL (data:image/png;base64,...)");
  throw bad_request(field, "'" + field +
                               "' must be a data: URL (data:image/png;base64,...) or, "
                               "under --allowed-local-media-path, a file:// URL");
}

}  // namespace invar::server
