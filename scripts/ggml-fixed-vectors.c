// Writes fixed test vectors of ggml's low-bit weight types: random blocks with edge-case scales and
// the F32 values ggml's own dequantize_row_* (ggml-quants.c) gives for them. Built and run by
// scripts/gen-ggml-fixed-vectors; layout in tests/data/README.md.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-quants.h"

// ggml-quants.c's only references into the rest of ggml; the dequantisers never call them.
void ggml_abort(const char* file, int line, const char* fmt, ...) {
  fprintf(stderr, "ggml_abort %s:%d %s\n", file, line, fmt);
  abort();
}
size_t ggml_row_size(enum ggml_type t, int64_t n) {
  (void)t;
  (void)n;
  abort();
}
const char* ggml_type_name(enum ggml_type t) {
  (void)t;
  abort();
}
size_t ggml_type_size(enum ggml_type t) {
  (void)t;
  abort();
}

static uint64_t rng_state = 20240917;
static uint64_t splitmix(void) {
  uint64_t x = (rng_state += 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// F16 scales of the first blocks: +max, -max, smallest subnormal, largest subnormal, smallest
// normal, +0, -0, -1, -smallest subnormal; the rest random finite.
static const uint16_t kF16Extremes[] = {0x7bff, 0xfbff, 0x0001, 0x03ff, 0x0400,
                                        0x0000, 0x8000, 0xbc00, 0x8001};
// E8M0 exponents of MXFP4's first blocks: the subnormal halves (0, 1), the smallest normal, 1.0's
// neighbours, the largest finite (254) and 255 (NaN in OCP's E8M0, 2^127 in ggml).
static const uint8_t kE8M0Extremes[] = {0, 1, 2, 126, 127, 128, 253, 254, 255};
#define N_EXTREMES 9
#define N_BLOCKS 16

typedef void (*dequant_fn)(const void* x, float* y, int64_t k);
struct type_case {
  const char* name;
  int block_size, block_bytes;
  int d_offset;  // byte offset of the F16 scale; -1: IQ1_M's split scale; -2: MXFP4's E8M0
  dequant_fn fn;
};

static uint16_t random_finite_f16(void) {
  const uint64_t r = splitmix();
  return (uint16_t)((r & 0x83ff) | (((r >> 16) % 31) << 10));
}

static void set_iq1m_scale(uint8_t* blk, uint16_t h) {
  uint16_t sc[4];
  memcpy(sc, blk + 48, 8);
  for (int i = 0; i < 4; ++i) sc[i] = (uint16_t)((sc[i] & 0x0fff) | (((h >> (4 * i)) & 0xf) << 12));
  memcpy(blk + 48, sc, 8);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT\n", argv[0]);
    return 2;
  }
  const struct type_case cases[] = {
      {"iq2_xxs", 256, 66, 0, (dequant_fn)dequantize_row_iq2_xxs},
      {"iq2_xs", 256, 74, 0, (dequant_fn)dequantize_row_iq2_xs},
      {"iq3_xxs", 256, 98, 0, (dequant_fn)dequantize_row_iq3_xxs},
      {"iq1_s", 256, 50, 0, (dequant_fn)dequantize_row_iq1_s},
      {"iq3_s", 256, 110, 0, (dequant_fn)dequantize_row_iq3_s},
      {"iq2_s", 256, 82, 0, (dequant_fn)dequantize_row_iq2_s},
      {"iq1_m", 256, 56, -1, (dequant_fn)dequantize_row_iq1_m},
      {"tq1_0", 256, 54, 52, (dequant_fn)dequantize_row_tq1_0},
      {"tq2_0", 256, 66, 64, (dequant_fn)dequantize_row_tq2_0},
      {"mxfp4", 32, 17, -2, (dequant_fn)dequantize_row_mxfp4},
  };
  FILE* out = fopen(argv[1], "wb");
  if (!out) return 1;
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; ++t) {
    const struct type_case* c = &cases[t];
    const size_t bytes = (size_t)c->block_bytes * N_BLOCKS;
    const int64_t n = (int64_t)c->block_size * N_BLOCKS;
    uint8_t* blocks = malloc(bytes);
    float* y = malloc(sizeof(float) * (size_t)n);
    for (size_t i = 0; i < bytes; ++i) blocks[i] = (uint8_t)splitmix();
    for (int b = 0; b < N_BLOCKS; ++b) {
      uint8_t* blk = blocks + (size_t)b * c->block_bytes;
      if (c->d_offset == -2) {
        blk[0] = b < N_EXTREMES ? kE8M0Extremes[b] : (uint8_t)(100 + splitmix() % 56);
        continue;
      }
      const uint16_t h = b < N_EXTREMES ? kF16Extremes[b] : random_finite_f16();
      if (c->d_offset == -1)
        set_iq1m_scale(blk, h);
      else
        memcpy(blk + c->d_offset, &h, 2);
    }
    c->fn(blocks, y, n);
    const uint32_t len = (uint32_t)strlen(c->name), nb = N_BLOCKS;
    fwrite(&len, 4, 1, out);
    fwrite(c->name, 1, len, out);
    fwrite(&nb, 4, 1, out);
    fwrite(blocks, 1, bytes, out);
    fwrite(y, sizeof(float), (size_t)n, out);
    free(blocks);
    free(y);
  }
  return fclose(out) == 0 ? 0 : 1;
}
