#include "png_decode.h"

#include <zlib.h>

#include <cstdlib>
#include <cstring>

namespace invar::probe_test {
namespace {

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

int paeth(int a, int b, int c) {
  int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
  if (pa <= pb && pa <= pc) return a;
  return pb <= pc ? b : c;
}

}  // namespace

bool png_decode(const std::string& bytes, Image& out, std::string& why) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 8 || std::memcmp(p, "\x89PNG\r\n\x1a\n", 8) != 0)
    return why = "not a PNG", false;
  size_t off = 8;
  int bpp = 0;
  std::string idat;
  while (off + 12 <= bytes.size()) {
    const uint32_t len = be32(p + off);
    const std::string type(bytes.data() + off + 4, 4);
    if (off + 12 + len > bytes.size()) return why = "truncated chunk " + type, false;
    const uint8_t* d = p + off + 8;
    if (type == "IHDR") {
      out.width = int(be32(d));
      out.height = int(be32(d + 4));
      const int depth = d[8], colour = d[9], interlace = d[12];
      if (depth != 8 || (colour != 2 && colour != 6) || interlace != 0)
        return why = "unsupported PNG (depth " + std::to_string(depth) + ", colour type " +
                     std::to_string(colour) + ")",
               false;
      bpp = colour == 2 ? 3 : 4;
    } else if (type == "IDAT") {
      idat.append(reinterpret_cast<const char*>(d), len);
    } else if (type == "IEND") {
      break;
    }
    off += 12 + len;
  }
  if (bpp == 0) return why = "no IHDR", false;
  const size_t stride = size_t(out.width) * size_t(bpp);
  std::vector<uint8_t> raw((stride + 1) * size_t(out.height));
  uLongf raw_len = uLongf(raw.size());
  if (uncompress(raw.data(), &raw_len, reinterpret_cast<const Bytef*>(idat.data()),
                 uLong(idat.size())) != Z_OK ||
      raw_len != raw.size())
    return why = "IDAT does not inflate to the image size", false;
  std::vector<uint8_t> img(stride * size_t(out.height)), prev(stride, 0);
  for (int y = 0; y < out.height; y++) {
    const uint8_t filter = raw[size_t(y) * (stride + 1)];
    const uint8_t* src = &raw[size_t(y) * (stride + 1) + 1];
    uint8_t* row = &img[size_t(y) * stride];
    for (size_t x = 0; x < stride; x++) {
      const int a = x >= size_t(bpp) ? row[x - size_t(bpp)] : 0, b = prev[x],
                c = x >= size_t(bpp) ? prev[x - size_t(bpp)] : 0;
      int v = src[x];
      switch (filter) {
        case 0:
          break;
        case 1:
          v += a;
          break;
        case 2:
          v += b;
          break;
        case 3:
          v += (a + b) / 2;
          break;
        case 4:
          v += paeth(a, b, c);
          break;
        default:
          return why = "bad filter " + std::to_string(filter), false;
      }
      row[x] = uint8_t(v);
    }
    std::memcpy(prev.data(), row, stride);
  }
  out.rgb.resize(size_t(out.width) * size_t(out.height) * 3);
  for (size_t i = 0; i < size_t(out.width) * size_t(out.height); i++)
    for (int k = 0; k < 3; k++) out.rgb[i * 3 + size_t(k)] = img[i * size_t(bpp) + size_t(k)];
  return true;
}

}  // namespace invar::probe_test
