// A minimal PNG decoder for the HTML-report test: 8-bit RGB/RGBA, non-interlaced (what
// Chromium's screenshots are). Returns false with a reason otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace invar::probe_test {

struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;  // [height][width][3]
};

bool png_decode(const std::string& bytes, Image& out, std::string& why);

}  // namespace invar::probe_test
