// JPEG through libjpeg-turbo: errors longjmp back here and become Error values; warnings about
// corrupt or truncated data (libjpeg fills the missing rows and carries on) are errors too, so a
// damaged file is refused rather than decoded into grey. The size is checked after the header,
// before decompression allocates anything of image size; libjpeg's own memory is capped.
#include <jpeglib.h>

#include <csetjmp>
#include <cstdio>
#include <memory>

#include "core/error.h"
#include "vision/image_decode.h"

namespace invar {
namespace {

struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void jpeg_on_error(j_common_ptr c) {
  JpegErr* e = reinterpret_cast<JpegErr*>(c->err);
  e->mgr.format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// Level −1 is a warning (corrupt data, premature end): treated as an error.
void jpeg_on_message(j_common_ptr c, int level) {
  if (level < 0) jpeg_on_error(c);
}

// A progressive JPEG may carry thousands of tiny scans, each a pass over the coefficients: past
// kMaxScans the file is refused, which bounds the decoding time by the image size.
constexpr int kMaxScans = 256;

void jpeg_on_progress(j_common_ptr c) {
  if (c->is_decompressor && reinterpret_cast<j_decompress_ptr>(c)->input_scan_number > kMaxScans) {
    JpegErr* e = reinterpret_cast<JpegErr*>(c->err);
    std::snprintf(e->message, sizeof e->message, "more than %d scans", kMaxScans);
    std::longjmp(e->jump, 1);
  }
}

}  // namespace

ImageDims image_dims_jpeg(std::span<const uint8_t> bytes) {
  jpeg_decompress_struct d{};
  JpegErr err{};
  d.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&d);
    throw Error(std::string("image: JPEG: ") + err.message);
  }
  jpeg_create_decompress(&d);
  jpeg_mem_src(&d, bytes.data(), (unsigned long)bytes.size());
  jpeg_read_header(&d, TRUE);  // the markers up to the first scan: no coefficient is decoded
  const ImageDims out{d.image_width, d.image_height};
  jpeg_destroy_decompress(&d);
  return out;
}

RgbImage image_decode_jpeg(std::span<const uint8_t> bytes, const ImageLimits& limits) {
  jpeg_decompress_struct d{};
  JpegErr err{};
  d.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  // The image is on the heap: no automatic object changes between setjmp and a longjmp.
  const auto out = std::make_unique<RgbImage>();
  if (setjmp(err.jump)) {
    jpeg_destroy_decompress(&d);
    throw Error(std::string("image: JPEG: ") + err.message);
  }
  jpeg_create_decompress(&d);
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_on_progress;
  d.progress = &progress;
  d.mem->max_memory_to_use = long(limits.max_pixels) * 4 + (long(64) << 20);
  jpeg_mem_src(&d, bytes.data(), (unsigned long)bytes.size());
  jpeg_read_header(&d, TRUE);
  try {
    image_limits_check(d.image_width, d.image_height, limits);
  } catch (const Error&) {
    jpeg_destroy_decompress(&d);
    throw;
  }
  d.out_color_space = JCS_RGB;
  jpeg_start_decompress(&d);
  out->width = d.output_width;
  out->height = d.output_height;
  out->rgb.resize(size_t(out->width * out->height * 3));
  while (d.output_scanline < d.output_height) {
    JSAMPROW row = out->rgb.data() + size_t(d.output_scanline) * size_t(out->width) * 3;
    jpeg_read_scanlines(&d, &row, 1);
  }
  jpeg_finish_decompress(&d);
  jpeg_destroy_decompress(&d);
  return std::move(*out);
}

}  // namespace invar
