// Quantised tensors at the loader's edge: every weight type of a make-model file is accepted,
// and hostile ones are refused with a message naming the tensor and the problem: data cut short,
// a row that is not whole blocks, an unsupported type id, a quantised norm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "gguf_test_util.h"
#include "model/finite_scales.h"
#include "model/hparams.h"
#include "quant/blocks.h"

namespace invar::test {
namespace gguf_quant_test {

std::string q4km_model() {
  static const std::string p = [] {
    MakeModelConfig c = tiny_config(Arch::qwen3next);
    c.n_embd = 256;
    c.quant = "q4_k_m";
    const std::string path = temp_path("q4km.gguf");
    write_model(c, path);
    return path;
  }();
  return p;
}

// Offset of the type id field of tensor `name` in a GGUF image (after name, n_dims, ne[]).
size_t type_field(const std::vector<uint8_t>& bytes, const std::string& name, size_t n_dims) {
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  EXPECT_NE(it, bytes.end());
  return size_t(it - bytes.begin()) + name.size() + 4 + 8 * n_dims;
}

TEST(GgufQuant, PresetFileLoadsWithItsTypeMix) {
  auto f = GgufFile::open(q4km_model());
  EXPECT_NO_THROW(hparams_from_gguf(*f));
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::Q4_K);
  EXPECT_EQ(f->find_tensor("output.weight")->type, DType::Q6_K);
  EXPECT_EQ(f->find_tensor("blk.0.ssm_conv1d.weight")->type, DType::F32);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight")->type, DType::F32);
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  // Every tensor's data is exactly its blocks.
  for (const auto& t : f->tensors())
    EXPECT_EQ(int64_t(t.n_bytes), dtype_row_bytes(t.type, t.ne[0]) * (t.n_elements() / t.ne[0]))
        << t.name;
}

// A NaN or Inf block scale is refused when the file is loaded, naming the tensor, the block and
// the field (issue 29): d of a Q4_K block, dmin of another, an element of an F32 tensor. The
// intact file passes.
TEST(GgufQuant, NonFiniteBlockScalesAreRefused) {
  const std::vector<uint8_t> good = read_file(q4km_model());
  EXPECT_NO_THROW(check_finite_scales(*GgufFile::from_memory(good.data(), good.size())));
  struct Plant {
    std::string tensor;
    int64_t block;
    size_t field;  // index in quant_f16_offsets, or the element for F32
    uint16_t f16;  // F16 bits (quantised) or 0 for an F32 NaN
    std::string expect;
  };
  // Two Q4_K tensors (scale d, min dmin) and an F32 one, found in the file.
  std::vector<std::string> q4k, f32;
  {
    auto f = GgufFile::from_memory(good.data(), good.size());
    for (const GgufTensorInfo& t : f->tensors()) {
      if (t.type == DType::Q4_K && t.n_elements() >= 6 * 256) q4k.push_back(t.name);
      if (t.type == DType::F32 && t.n_elements() >= 10) f32.push_back(t.name);
    }
  }
  ASSERT_GE(q4k.size(), 2u);
  ASSERT_GE(f32.size(), 1u);
  const Plant plants[] = {
      {q4k[0], 3, 0, 0x7E00, "block 3: scale d is NaN"},
      {q4k[1], 5, 1, 0x7C00, "block 5: scale dmin is +Inf"},
      {f32[0], 9, 9, 0, "element 9: value is NaN"},
  };
  for (const Plant& p : plants) {
    std::vector<uint8_t> bad = good;
    auto f = GgufFile::from_memory(good.data(), good.size());
    const GgufTensorInfo* t = f->find_tensor(p.tensor);
    ASSERT_TRUE(t) << p.tensor;
    const size_t base = size_t(t->data - f->bytes());
    if (t->type == DType::F32) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      std::memcpy(bad.data() + base + 4 * size_t(p.field), &nan, 4);
    } else {
      const size_t at =
          base + size_t(p.block * dtype_block_bytes(t->type)) + quant_f16_offsets(t->type)[p.field];
      std::memcpy(bad.data() + at, &p.f16, 2);
    }
    const std::string e =
        error_of([&] { check_finite_scales(*GgufFile::from_memory(bad.data(), bad.size())); });
    EXPECT_NE(e.find("'" + p.tensor + "'"), std::string::npos) << e;
    EXPECT_NE(e.find(p.expect), std::string::npos) << e;
  }
}

// token_embd {256, 16} q4_K (16 × 144 bytes) relabelled as each low-bit type of 256-blocks (at
// most 110 bytes a block): its data still fits, and the file's tensors pass the loader's checks.
TEST(GgufQuant, LowBitTypesLoad) {
  const std::vector<uint8_t> orig = read_file(q4km_model());
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                  DType::IQ1_S, DType::IQ1_M, DType::TQ1_0, DType::TQ2_0}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<uint8_t> bytes = orig;
    const uint32_t id = uint32_t(t);
    std::memcpy(&bytes[type_field(bytes, "token_embd.weight", 2)], &id, 4);
    auto f = GgufFile::from_memory(bytes.data(), bytes.size());
    EXPECT_EQ(f->find_tensor("token_embd.weight")->type, t);
    EXPECT_EQ(f->find_tensor("token_embd.weight")->n_bytes, uint64_t(16 * dtype_block_bytes(t)));
    EXPECT_EQ(error_of([&] { hparams_from_gguf(*f); }), "");
  }
}

// The low-bit types' scales: the F16 d of the IQ2 / IQ3 / IQ1_S / TQ blocks, IQ1_M's d spread
// over its scale nibbles, MXFP4's E8M0 byte (255 is NaN). A tensor of 4 random blocks with
// finite scales passes; with block 2's scale made NaN or Inf it names block 2.
TEST(GgufQuant, LowBitScalesAreChecked) {
  const DType types[] = {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S,
                         DType::IQ1_S,   DType::IQ1_M,  DType::TQ1_0, DType::TQ2_0,   DType::MXFP4};
  for (DType type : types) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const int64_t bb = dtype_block_bytes(type), blocks = 4;
    std::vector<uint8_t> data(size_t(bb * blocks));
    uint32_t r = 12345;
    for (auto& x : data) x = uint8_t((r = r * 1103515245u + 12345u) >> 24);
    auto plant = [&](int64_t b, uint16_t h) {
      uint8_t* blk = data.data() + b * bb;
      if (type == DType::MXFP4)
        blk[0] = h == 0x3c00 ? 127 : 0xff;
      else if (type == DType::IQ1_M)
        iq1m_scale_set(blk, h);
      else
        std::memcpy(blk + quant_f16_offsets(type).at(0), &h, 2);
    };
    for (int64_t b = 0; b < blocks; ++b) plant(b, 0x3c00);  // 1.0
    GgufTensorInfo t;
    t.name = "w";
    t.type = type;
    t.ne = {dtype_block_size(type) * blocks};
    t.n_bytes = data.size();
    t.data = data.data();
    EXPECT_FALSE(first_nonfinite_scale(t).has_value());
    plant(2, 0x7c00);
    const auto bad = first_nonfinite_scale(t);
    ASSERT_TRUE(bad.has_value());
    EXPECT_EQ(bad->block, 2);
    EXPECT_EQ(bad->field, type == DType::MXFP4 ? "e" : "d");
    EXPECT_TRUE(std::isnan(bad->value) || std::isinf(bad->value));
  }
}

TEST(GgufQuant, TruncatedQuantisedDataIsRefused) {
  std::vector<uint8_t> bytes = read_file(q4km_model());
  auto f = GgufFile::from_memory(bytes.data(), bytes.size());
  // Cut the file inside the last tensor's blocks.
  const GgufTensorInfo* last = &f->tensors()[0];
  for (const auto& t : f->tensors())
    if (t.offset > last->offset) last = &t;
  const std::string name = last->name;
  const std::string type(dtype_name(last->type));
  bytes.resize(bytes.size() - 100);
  const std::string e = parse_error(bytes);
  EXPECT_NE(e.find("tensor '" + name + "': data"), std::string::npos) << e;
  EXPECT_NE(e.find("extends past the end of the file"), std::string::npos) << e;
}

TEST(GgufQuant, RowsThatAreNotWholeBlocksAreRefused) {
  Bytes b;
  b.header(1, 0);
  b.str("w").u32(2).u64(128).u64(2).u32(uint32_t(DType::Q4_K)).u64(0);
  b.pad(32);
  for (int i = 0; i < 144; ++i) b.u8(0);
  EXPECT_NE(parse_error(b.b).find("tensor 'w': row length 128 is not a multiple of the q4_K "
                                  "block size 256"),
            std::string::npos)
      << parse_error(b.b);
}

TEST(GgufQuant, UnsupportedTypeAndQuantisedNormAreNamed) {
  const std::vector<uint8_t> orig = read_file(q4km_model());
  // The router blk.0.ffn_gate_inp (f32, 4 bytes a weight) relabelled i8 (1 byte): fits its data,
  // a type invar does not compute with.
  std::vector<uint8_t> bytes = orig;
  const size_t at = type_field(bytes, "blk.0.ffn_gate_inp.weight", 2);
  uint32_t id = 24;
  std::memcpy(&bytes[at], &id, 4);
  auto f = GgufFile::from_memory(bytes.data(), bytes.size());
  const std::string e = error_of([&] { hparams_from_gguf(*f); });
  EXPECT_NE(e.find("tensor 'blk.0.ffn_gate_inp.weight' has type i8, invar supports f32, f16, q4_0"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("q6_K, iq2_xxs, iq2_xs, iq3_xxs, iq1_s, iq4_nl, iq3_s, iq2_s, iq4_xs, iq1_m, "
                   "bf16, tq1_0, tq2_0, mxfp4"),
            std::string::npos)
      << e;

  // A norm (f32 {256}) relabelled q4_K: its 1 KiB holds more than one 144-byte block, the type is
  // valid, but norms must be f32.
  bytes = orig;
  const size_t nat = type_field(bytes, "output_norm.weight", 1);
  id = uint32_t(DType::Q4_K);
  std::memcpy(&bytes[nat], &id, 4);
  auto g = GgufFile::from_memory(bytes.data(), bytes.size());
  const std::string e2 = error_of([&] { hparams_from_gguf(*g); });
  EXPECT_NE(e2.find("tensor 'output_norm.weight' has type q4_K, expected f32"), std::string::npos)
      << e2;
}

}  // namespace gguf_quant_test
}  // namespace invar::test
