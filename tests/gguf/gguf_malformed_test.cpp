// Hostile and truncated GGUF images: every one must fail with a GgufError whose text names the
// field (and offset), never crash and never allocate what the header merely claims.
#include <gtest/gtest.h>

#include "gguf_test_util.h"

namespace invar {
namespace gguf_malformed_test {

using test::Bytes;
using test::parse_error;

void tensor_info(Bytes& b, const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                 uint64_t offset) {
  b.str(name).u32(uint32_t(ne.size()));
  for (uint64_t d : ne) b.u64(d);
  b.u32(type).u64(offset);
}

// One kv, two tensors (f32 {4, 2} at 0, q8_0 {32} at 32), data section aligned to 32.
Bytes good_image() {
  Bytes b;
  b.header(2, 1).str("general.architecture").u32(8).str("qwen3next");
  tensor_info(b, "t0", {4, 2}, 0, 0);
  tensor_info(b, "t1", {32}, 8, 32);
  b.pad(32);
  for (int i = 0; i < 32 + 34; ++i) b.u8(uint8_t(i));
  return b;
}

#define EXPECT_ERROR_HAS(bytes, text)                                     \
  do {                                                                    \
    const std::string err = parse_error((bytes).b);                       \
    EXPECT_NE(err.find(text), std::string::npos) << "error was: " << err; \
  } while (0)

TEST(GgufMalformed, GoodImageParses) {
  const Bytes b = good_image();
  EXPECT_EQ(parse_error(b.b), "");
  auto f = GgufFile::from_memory(b.b.data(), b.b.size());
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[1].n_bytes, 34u);
  EXPECT_EQ(f->tensors()[1].type, DType::Q8_0);
  EXPECT_EQ(f->tensors()[1].data[0], 32);
}

TEST(GgufMalformed, EveryTruncationFails) {
  const Bytes b = good_image();
  const size_t end_of_data = b.b.size();
  for (size_t n = 0; n < end_of_data; ++n) {
    const std::vector<uint8_t> cut(b.b.begin(), b.b.begin() + long(n));
    const std::string err = parse_error(cut);
    EXPECT_NE(err, "") << "prefix of " << n << " bytes parsed";
    EXPECT_EQ(err.rfind("gguf: offset ", 0), 0u) << err;
  }
  // Where the cut falls decides which field is named.
  auto cut = [&](size_t n) {
    return parse_error(std::vector<uint8_t>(b.b.begin(), b.b.begin() + long(n)));
  };
  EXPECT_NE(cut(2).find("bad magic"), std::string::npos) << cut(2);
  EXPECT_NE(cut(6).find("version"), std::string::npos) << cut(6);
  EXPECT_NE(cut(20).find("metadata kv count"), std::string::npos) << cut(20);
  EXPECT_NE(cut(30).find("metadata kv count 1 does not fit"), std::string::npos) << cut(30);
  EXPECT_NE(cut(40).find("offset 24: kv 0 key: string length 20 exceeds"), std::string::npos)
      << cut(40);
  EXPECT_NE(cut(60).find("general.architecture"), std::string::npos) << cut(60);
  EXPECT_NE(cut(76).find("offset 8: tensor count 2 does not fit in the 3 bytes after the metadata"),
            std::string::npos)
      << cut(76);
  EXPECT_NE(cut(140).find("offset 137: tensor 't1' type"), std::string::npos) << cut(140);
  EXPECT_NE(cut(end_of_data - 1).find("tensor 't1': data"), std::string::npos)
      << cut(end_of_data - 1);
}

TEST(GgufMalformed, BadMagicAndVersion) {
  Bytes b = good_image();
  b.b[0] = 'X';
  EXPECT_ERROR_HAS(b, "offset 0: bad magic");
  Bytes v1;
  v1.header(0, 0, 1);
  EXPECT_ERROR_HAS(v1, "offset 4: unsupported version 1");
  Bytes be;
  be.header(0, 0, 0x03000000);
  EXPECT_ERROR_HAS(be, "big-endian");
  Bytes v2;
  v2.header(0, 0, 2);
  EXPECT_EQ(parse_error(v2.b), "");
}

TEST(GgufMalformed, HugeCountsFailBeforeAllocating) {
  Bytes kv;
  kv.header(0, uint64_t(1) << 60);
  EXPECT_ERROR_HAS(kv, "metadata kv count 1152921504606846976 does not fit");
  Bytes t;
  t.header(uint64_t(1) << 62, 0);
  EXPECT_ERROR_HAS(t, "offset 8: tensor count 4611686018427387904 does not fit");
  Bytes arr;
  arr.header(0, 1).str("k").u32(9).u32(4).u64(uint64_t(1) << 61);
  EXPECT_ERROR_HAS(arr, "key 'k': array of 2305843009213693952 uint32 elements does not fit");
  Bytes sarr;
  sarr.header(0, 1).str("k").u32(9).u32(8).u64(uint64_t(1) << 40);
  EXPECT_ERROR_HAS(sarr, "array of 1099511627776 string elements does not fit");
}

TEST(GgufMalformed, HugeStringLength) {
  Bytes key;
  key.header(0, 1).u64(uint64_t(1) << 60).u64(0).u64(0);
  EXPECT_ERROR_HAS(key, "offset 24: kv 0 key: string length 1152921504606846976 exceeds");
  Bytes val;
  val.header(0, 1).str("name").u32(8).u64(~uint64_t(0));
  EXPECT_ERROR_HAS(val, "key 'name': string length 18446744073709551615 exceeds");
  Bytes elem;
  elem.header(0, 1).str("a").u32(9).u32(8).u64(2).str("ok").u64(uint64_t(1) << 60);
  EXPECT_ERROR_HAS(elem, "key 'a'[1]: string length");
  Bytes tname;
  tname.header(1, 0).u64(uint64_t(1) << 60).u64(0).u64(0).u64(0).u64(0);
  EXPECT_ERROR_HAS(tname, "tensor 0 name: string length");
}

TEST(GgufMalformed, BadTypeIds) {
  Bytes v;
  v.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_ERROR_HAS(v, "offset 33: key 'k' type: unknown metadata value type 13");
  Bytes e;
  e.header(0, 1).str("k").u32(9).u32(77).u64(0);
  EXPECT_ERROR_HAS(e, "key 'k' element type: unknown metadata value type 77");
  Bytes t;
  t.header(1, 0);
  tensor_info(t, "w", {4}, 99, 0);
  EXPECT_ERROR_HAS(t, "tensor 'w': unknown ggml type id 99");
  Bytes removed;
  removed.header(1, 0);
  tensor_info(removed, "w", {4}, 4, 0);  // q4_2, removed from ggml
  EXPECT_ERROR_HAS(removed, "unknown ggml type id 4");
}

TEST(GgufMalformed, NestedArraysAreCountedAndSkipped) {
  Bytes b;
  b.header(0, 2).str("nested").u32(9).u32(9).u64(2);
  b.u32(4).u64(2).u32(1).u32(2);  // [uint32 1, 2]
  b.u32(8).u64(1).str("x");       // ["x"]
  b.str("after").u32(4).u32(42);
  const std::string err = parse_error(b.b);
  ASSERT_EQ(err, "");
  auto f = GgufFile::from_memory(b.b.data(), b.b.size());
  const GgufValue* v = f->find("nested");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->elem_type, GgufType::ARRAY);
  EXPECT_EQ(v->arr_len, 2u);
  EXPECT_EQ(f->get_int("after"), 42);
  EXPECT_NE(test::error_of([&] { f->get_int_array("nested"); }).find("has type array of array"),
            std::string::npos);

  Bytes deep;
  deep.header(0, 1).str("d").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  deep.u32(4).u64(0);
  EXPECT_ERROR_HAS(deep, "nested deeper than");
}

TEST(GgufMalformed, TensorDims) {
  Bytes nd;
  nd.header(1, 0);
  tensor_info(nd, "w", {1, 1, 1, 1, 1}, 0, 0);
  EXPECT_ERROR_HAS(nd, "tensor 'w': n_dims 5 (must be 1 to 4)");
  Bytes zero;
  zero.header(1, 0);
  tensor_info(zero, "w", {4, 0}, 0, 0);
  EXPECT_ERROR_HAS(zero, "tensor 'w': dimension 1 = 0 is out of range");
  Bytes neg;
  neg.header(1, 0);
  tensor_info(neg, "w", {~uint64_t(0)}, 0, 0);
  EXPECT_ERROR_HAS(neg, "dimension 0 = 18446744073709551615 is out of range");
  Bytes ovf;
  ovf.header(1, 0);
  tensor_info(ovf, "w", {uint64_t(1) << 32, uint64_t(1) << 32}, 0, 0);
  EXPECT_ERROR_HAS(ovf, "tensor 'w': element count overflows");
  Bytes bytes_ovf;
  bytes_ovf.header(1, 0);
  tensor_info(bytes_ovf, "w", {uint64_t(1) << 62}, 0, 0);  // 2^62 f32 elements = 2^64 bytes
  EXPECT_ERROR_HAS(bytes_ovf, "tensor 'w': byte size overflows");
  Bytes q8;
  q8.header(1, 0);
  tensor_info(q8, "w", {33}, 8, 0);
  EXPECT_ERROR_HAS(q8, "row length 33 is not a multiple of the q8_0 block size 32");
  Bytes longname;
  longname.header(1, 0);
  tensor_info(longname, std::string(64, 'n'), {1}, 0, 0);
  EXPECT_ERROR_HAS(longname, "name longer than 63 bytes");
}

TEST(GgufMalformed, TensorDataPlacement) {
  auto image = [](uint64_t off0, uint64_t off1, size_t data_bytes) {
    Bytes b;
    b.header(2, 0);
    tensor_info(b, "t0", {8}, 0, off0);
    tensor_info(b, "t1", {8}, 0, off1);
    b.pad(32);
    for (size_t i = 0; i < data_bytes; ++i) b.u8(0);
    return b;
  };
  EXPECT_EQ(parse_error(image(0, 32, 64).b), "");
  EXPECT_ERROR_HAS(image(0, 16, 64), "tensor 't1': data offset 16 is not aligned to 32");
  EXPECT_ERROR_HAS(image(0, 0, 64), "data overlaps tensor");
  EXPECT_ERROR_HAS(image(0, 32, 63),
                   "tensor 't1': data [32, +32) extends past the end of the file");
  EXPECT_ERROR_HAS(image(0, ~uint64_t(0) - 31, 64), "extends past the end of the file");
  // Data section start beyond the file.
  Bytes nodata;
  nodata.header(1, 0);
  tensor_info(nodata, "t", {1}, 0, 0);
  EXPECT_ERROR_HAS(nodata, "past the end of the file");
}

TEST(GgufMalformed, Duplicates) {
  Bytes k;
  k.header(0, 2).str("a").u32(4).u32(1).str("a").u32(4).u32(2);
  EXPECT_ERROR_HAS(k, "offset 41: duplicate metadata key 'a'");
  Bytes t;
  t.header(2, 0);
  tensor_info(t, "w", {8}, 0, 0);
  tensor_info(t, "w", {8}, 0, 32);
  t.pad(32);
  for (int i = 0; i < 64; ++i) t.u8(0);
  EXPECT_ERROR_HAS(t, "duplicate tensor 'w'");
}

TEST(GgufMalformed, Alignment) {
  auto with_alignment = [](uint32_t type, uint64_t value) {
    Bytes b;
    b.header(0, 1).str("general.alignment").u32(type);
    if (type == 4)
      b.u32(uint32_t(value));
    else
      b.u64(value);
    return b;
  };
  EXPECT_ERROR_HAS(with_alignment(4, 24), "general.alignment 24 is not a power of two");
  EXPECT_ERROR_HAS(with_alignment(4, 0), "general.alignment 0 is not a power of two");
  EXPECT_ERROR_HAS(with_alignment(10, 64), "general.alignment has type uint64, expected uint32");
  const Bytes ok = with_alignment(4, 64);
  auto f = GgufFile::from_memory(ok.b.data(), ok.b.size());
  EXPECT_EQ(f->alignment(), 64u);
}

TEST(GgufMalformed, TypedGettersNameTheKey) {
  Bytes b;
  b.header(0, 4).str("s").u32(8).str("text").str("u").u32(10).u64(~uint64_t(0));
  b.str("f").u32(6).f32(0.5f).str("i8").u32(1).u8(0xff);
  auto f = GgufFile::from_memory(b.b.data(), b.b.size());
  EXPECT_EQ(test::error_of([&] { f->get_int("s"); }),
            "gguf: key 's' has type string, expected an integer");
  EXPECT_EQ(test::error_of([&] { f->get_int("missing"); }), "gguf: missing required key 'missing'");
  EXPECT_EQ(test::error_of([&] { f->get_int("u"); }),
            "gguf: key 'u' = 18446744073709551615 is out of range");
  EXPECT_EQ(test::error_of([&] { f->get_string("f"); }),
            "gguf: key 'f' has type float32, expected string");
  EXPECT_EQ(test::error_of([&] { f->get_bool_or("f", true); }),
            "gguf: key 'f' has type float32, expected bool");
  EXPECT_EQ(f->get_float("f"), 0.5);
  EXPECT_EQ(f->get_int("i8"), -1);
  EXPECT_EQ(f->get_string_or("nope", "d"), "d");
}

TEST(GgufMalformed, OpenNamesThePath) {
  const std::string missing = test::temp_path("does_not_exist.gguf");
  EXPECT_NE(test::error_of([&] { GgufFile::open(missing); }).find("cannot open '" + missing + "'"),
            std::string::npos);
  const std::string empty = test::temp_path("empty.gguf");
  GgufWriter().write(empty);  // a valid file with nothing in it
  EXPECT_EQ(test::error_of([&] { GgufFile::open(empty); }), "");
  std::FILE* fp = std::fopen(empty.c_str(), "wb");
  std::fclose(fp);
  EXPECT_EQ(test::error_of([&] { GgufFile::open(empty); }),
            empty + ": gguf: offset 0: bad magic: not a GGUF file");
  std::remove(empty.c_str());
}

}  // namespace gguf_malformed_test
}  // namespace invar
