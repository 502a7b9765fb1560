// Writer round trips: every metadata type and tensor type comes back identical, and a file
// made by gguf-py (the reference models) is reproduced byte for byte.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "gguf_test_util.h"

namespace invar {
namespace gguf_writer_test {

const std::string kData = INVAR_TEST_DATA_DIR;

GgufValue scalar(GgufType t, uint64_t u, int64_t i, double f) {
  GgufValue v;
  v.type = t;
  v.u64 = u;
  v.i64 = i;
  v.f64 = f;
  return v;
}

void expect_same_value(const GgufValue& a, const GgufValue& b, const std::string& key) {
  EXPECT_EQ(a.type, b.type) << key;
  EXPECT_EQ(a.u64, b.u64) << key;
  EXPECT_EQ(a.i64, b.i64) << key;
  EXPECT_EQ(a.f64, b.f64) << key;
  EXPECT_EQ(a.str, b.str) << key;
  if (a.type == GgufType::ARRAY) {
    EXPECT_EQ(a.elem_type, b.elem_type) << key;
    EXPECT_EQ(a.arr_len, b.arr_len) << key;
    EXPECT_EQ(a.arr_int, b.arr_int) << key;
    EXPECT_EQ(a.arr_float, b.arr_float) << key;
    EXPECT_EQ(a.arr_str, b.arr_str) << key;
  }
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 31 + seed);
  return v;
}

TEST(GgufWriter, EveryValueAndTensorTypeRoundTrips) {
  GgufWriter w;
  std::vector<GgufKv> expect;
  auto put = [&](const std::string& k, const GgufValue& v) {
    w.set_value(k, v);
    expect.push_back({k, v});
  };
  put("u8", scalar(GgufType::UINT8, 200, 0, 0));
  put("i8", scalar(GgufType::INT8, 0, -100, 0));
  put("u16", scalar(GgufType::UINT16, 60000, 0, 0));
  put("i16", scalar(GgufType::INT16, 0, -30000, 0));
  put("u32", scalar(GgufType::UINT32, 4000000000u, 0, 0));
  put("i32", scalar(GgufType::INT32, 0, -2000000000, 0));
  put("u64", scalar(GgufType::UINT64, ~uint64_t(0), 0, 0));
  put("i64", scalar(GgufType::INT64, 0, INT64_MIN, 0));
  put("f32", scalar(GgufType::FLOAT32, 0, 0, 0.1f));
  put("f64", scalar(GgufType::FLOAT64, 0, 0, 0.1));
  put("bool", scalar(GgufType::BOOL, 1, 0, 0));
  GgufValue s = scalar(GgufType::STRING, 0, 0, 0);
  s.str = std::string("with\0nul and ünïcode", 21);
  put("str", s);
  for (GgufType et :
       {GgufType::UINT8, GgufType::INT16, GgufType::INT32, GgufType::UINT64, GgufType::BOOL}) {
    GgufValue a = scalar(GgufType::ARRAY, 0, 0, 0);
    a.elem_type = et;
    a.arr_int = {0, 1, et == GgufType::BOOL ? 1 : 2};
    a.arr_len = 3;
    put("arr." + std::string(gguf_type_name(et)), a);
  }
  GgufValue af = scalar(GgufType::ARRAY, 0, 0, 0);
  af.elem_type = GgufType::FLOAT64;
  af.arr_float = {0.25, -1e300};
  af.arr_len = 2;
  put("arr.f64", af);
  GgufValue as = scalar(GgufType::ARRAY, 0, 0, 0);
  as.elem_type = GgufType::STRING;
  as.arr_str = {"", "a b", std::string(1000, 'x')};
  as.arr_len = 3;
  put("arr.str", as);
  GgufValue empty = as;
  empty.arr_str.clear();
  empty.arr_len = 0;
  put("arr.empty", empty);

  w.add_tensor("f32", DType::F32, {3, 2}, pattern(24, 1));
  w.add_tensor("f16", DType::F16, {5}, pattern(10, 2));
  w.add_tensor("bf16", DType::BF16, {2, 2, 2, 2}, pattern(32, 3));
  w.add_tensor("q8_0", DType::Q8_0, {64, 3}, pattern(6 * 34, 4));
  const std::string path = test::temp_path("roundtrip.gguf");
  w.write(path);

  auto f = GgufFile::open(path);
  ASSERT_EQ(f->kvs().size(), expect.size());
  for (size_t i = 0; i < expect.size(); ++i) {
    EXPECT_EQ(f->kvs()[i].key, expect[i].key);
    expect_same_value(f->kvs()[i].value, expect[i].value, expect[i].key);
  }
  EXPECT_EQ(f->get_int("i64"), INT64_MIN);
  EXPECT_EQ(f->get_float("f32"), double(0.1f));
  ASSERT_EQ(f->tensors().size(), 4u);
  const std::vector<std::pair<std::string, size_t>> sizes = {
      {"f32", 24}, {"f16", 10}, {"bf16", 32}, {"q8_0", 204}};
  uint8_t seed = 1;
  for (const auto& [name, n] : sizes) {
    const GgufTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->n_bytes, n) << name;
    EXPECT_EQ(t->offset % 32, 0u) << name;
    EXPECT_EQ(std::vector<uint8_t>(t->data, t->data + t->n_bytes), pattern(n, seed++)) << name;
  }
  EXPECT_EQ(f->find_tensor("bf16")->ne, std::vector<int64_t>({2, 2, 2, 2}));
  EXPECT_EQ(f->find_tensor("q8_0")->type, DType::Q8_0);
  // The file ends on an aligned boundary after the last tensor, as gguf-py writes it.
  EXPECT_EQ(f->file_size() % 32, 0u);
  std::remove(path.c_str());
}

// open(..., huge_pages): the image is a private copy in 2 MiB pages; every byte, key and tensor is
// the mapped file's, the tensors point into the copy.
TEST(GgufWriter, HugePageCopyHoldsTheFilesBytes) {
  GgufWriter w;
  w.set_value("u32", scalar(GgufType::UINT32, 7, 0, 0));
  w.add_tensor("a", DType::F32, {1024, 3}, pattern(3 * 4096, 5));
  w.add_tensor("b", DType::Q8_0, {64, 5}, pattern(5 * 68, 6));
  const std::string path = test::temp_path("huge.gguf");
  w.write(path);
  auto mapped = GgufFile::open(path);
  auto copied = GgufFile::open(path, /*populate=*/false, /*huge_pages=*/true);
  ASSERT_EQ(copied->file_size(), mapped->file_size());
  EXPECT_NE(copied->bytes(), mapped->bytes());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copied->bytes()) % (uintptr_t(2) << 20), 0u);
  EXPECT_EQ(std::memcmp(copied->bytes(), mapped->bytes(), size_t(mapped->file_size())), 0);
  EXPECT_EQ(copied->get_int("u32"), 7);
  for (const char* name : {"a", "b"}) {
    const GgufTensorInfo* t = copied->find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->data - copied->bytes(), mapped->find_tensor(name)->data - mapped->bytes());
  }
  copied->populate();  // a no-op on the copy, as on a populated mapping
  std::remove(path.c_str());
}

TEST(GgufWriter, ReferenceFilesAreReproducedByteForByte) {
  for (const char* name : {"qwen3next-tiny", "qwen35-tiny"}) {
    const std::string src = kData + "/models/" + name + ".gguf";
    auto f = GgufFile::open(src);
    const std::string out = test::temp_path(std::string(name) + ".gguf");
    test::rewrite(*f, out, {}, {}, nullptr);
    EXPECT_EQ(test::read_file(out), test::read_file(src)) << name;
    std::remove(out.c_str());
  }
}

TEST(GgufWriter, CustomAlignmentAndReplacement) {
  GgufWriter w;
  w.set_u32("general.alignment", 64);
  w.set_u32("k", 1);
  w.set_u32("k", 2);  // set replaces, keeping the position
  w.add_tensor("a", DType::F32, {3}, pattern(12, 0));
  w.add_tensor("b", DType::F32, {3}, pattern(12, 9));
  EXPECT_NE(test::error_of([&] {
              w.add_tensor("a", DType::F32, {1}, pattern(4, 0));
            }).find("duplicate tensor 'a'"),
            std::string::npos);
  const std::string path = test::temp_path("align64.gguf");
  w.write(path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_EQ(f->kvs().size(), 2u);
  EXPECT_EQ(f->get_int("k"), 2);
  EXPECT_EQ(f->find_tensor("b")->offset, 64u);
  EXPECT_EQ((f->find_tensor("a")->data - f->bytes()) % 64, 0);
  // No temporary file is left beside the output.
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::path(path).parent_path()))
    EXPECT_EQ(e.path().string().find(path + ".tmp"), std::string::npos) << e.path();
  std::remove(path.c_str());

  GgufWriter bad;
  bad.set_u32("general.alignment", 48);
  EXPECT_NE(test::error_of([&] { bad.write(test::temp_path("bad.gguf")); }).find("power of two"),
            std::string::npos);
  EXPECT_NE(
      test::error_of([&] { GgufWriter().write("/nonexistent-dir/x.gguf"); }).find("cannot create"),
      std::string::npos);
}

TEST(GgufWriter, StreamedRowsAreTheSameBytesWhateverTheChunksAndThreads) {
  // Three tensors, the middle one given: rows of 256 bytes (F32, 64 wide), 37 and 5 rows.
  const auto row_byte = [](int64_t r, int64_t j) { return uint8_t(r * 7 + j * 13 + 1); };
  const auto given = [&](int64_t rows, int64_t salt) {
    std::vector<uint8_t> v(size_t(rows * 256));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < 256; ++j) v[size_t(r * 256 + j)] = uint8_t(row_byte(r, j) + salt);
    return v;
  };
  std::atomic<int> calls{0};
  const auto rows_fn = [&](int64_t salt) {
    return [&, salt](int64_t r0, int64_t r1, uint8_t* out) {
      ++calls;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < 256; ++j) out[(r - r0) * 256 + j] = uint8_t(row_byte(r, j) + salt);
    };
  };
  GgufWriter mem, streamed;
  for (GgufWriter* w : {&mem, &streamed}) w->set_u32("general.alignment", 512);
  mem.add_tensor("a", DType::F32, {64, 37}, given(37, 0));
  mem.add_tensor("b", DType::F32, {64, 5}, given(5, 1));
  mem.add_tensor("c", DType::F32, {64, 37}, given(37, 2));
  streamed.add_tensor_rows("a", DType::F32, {64, 37}, rows_fn(0));
  streamed.add_tensor("b", DType::F32, {64, 5}, given(5, 1));
  streamed.add_tensor_rows("c", DType::F32, {64, 37}, rows_fn(2));
  const std::string ref = test::temp_path("rows-mem.gguf"), out = test::temp_path("rows.gguf");
  mem.write(ref);
  const std::string want = test::sha256_file(ref);
  struct Way {
    int threads;
    int64_t chunk;
    int min_calls;  // proves the rows were really produced in that many pieces
  };
  for (const Way& way : {Way{1, GgufWriter::kChunkBytes, 2}, Way{3, 1, 74}, Way{2, 1000, 26}}) {
    calls = 0;
    streamed.write(out, way.threads, way.chunk);
    EXPECT_EQ(test::sha256_file(out), want) << way.threads << " threads, chunk " << way.chunk;
    EXPECT_GE(calls.load(), way.min_calls);
  }
  for (const auto& p : {ref, out}) std::remove(p.c_str());
}

}  // namespace gguf_writer_test
}  // namespace invar
