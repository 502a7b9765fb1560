// GGUF v3 files (llama.cpp's container): an mmap-based reader and a writer.
//
// Layout: magic "GGUF", u32 version (3), u64 n_tensors, u64 n_kv, then n_kv × (string key,
// u32 type, value), then n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type,
// u64 offset), padding to `general.alignment` (default 32), then tensor data; each tensor's
// offset is relative to the start of the data section and aligned. Strings are u64 length +
// bytes. All little-endian.
//
// The reader never trusts the file: every length, count, type and offset is checked against
// the bytes that are really there before it is used, and errors name the byte offset and the
// field ("gguf: offset 1234: tensor 'blk.0.attn_q.weight': data extends past end of file").
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "quant/dtype.h"

namespace invar {

// Metadata value types, numbered as in the GGUF spec.
enum class GgufType : uint32_t {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
};
std::string_view gguf_type_name(GgufType t);
inline bool gguf_type_is_unsigned(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64;
}
inline bool gguf_type_is_signed(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}
inline bool gguf_type_is_float(GgufType t) {
  return t == GgufType::FLOAT32 || t == GgufType::FLOAT64;
}

// One metadata value. Scalars of any integer width are held in i64/u64, floats in f64; arrays
// hold their elements in the vector that matches elem_type.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // for ARRAY
  uint64_t u64 = 0;                      // unsigned integer scalars and BOOL
  int64_t i64 = 0;                       // signed integer scalars
  double f64 = 0;                        // FLOAT32 / FLOAT64
  std::string str;                       // STRING
  std::vector<int64_t> arr_int;          // ARRAY of any integer type or BOOL
  std::vector<double> arr_float;         // ARRAY of FLOAT32 / FLOAT64
  std::vector<std::string> arr_str;      // ARRAY of STRING
  uint64_t arr_len = 0;                  // ARRAY element count (nested arrays: stored, not decoded)
};

struct GgufKv {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous (row) dimension
  DType type = DType::F32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the mapping; valid while the GgufFile lives
  int64_t n_elements() const;
};

// "{a, b, c}", as errors about tensor shapes print them.
std::string tensor_shape_str(const std::vector<int64_t>& ne);

// What identifies one version of a file without reading it (stat): model/sha256_cache.h keys on
// it. Times in nanoseconds since the epoch.
struct FileIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};
// The identity of the file at `path` now, or nullopt when it cannot be stat'ed.
std::optional<FileIdentity> file_identity_of(const std::string& path);

class GgufError : public Error {
 public:
  using Error::Error;
};

class GgufFile {
 public:
  // Maps and parses the file. Throws GgufError with offset + field on any problem. populate:
  // every page is mapped now (MAP_POPULATE); otherwise only the pages parsing reads, and
  // populate() maps the rest (a caller can run it on a thread of its own).
  // huge_pages: the image is instead copied, whole, into private anonymous memory in 2 MiB pages
  // (populate is implied): one TLB entry covers 2 MiB of weights instead of 4 KiB, which the
  // prefill matmuls (weights read once per row block, a new page every 4 KiB row of F32) feel
  // in TLB misses (F32 file: prefill ~10% faster in CPU time on this VM). The cost: a private
  // copy (not shared with other processes through the page cache) and the copy's time at load.
  // The bytes are the file's: no result changes.
  static std::unique_ptr<GgufFile> open(const std::string& path, bool populate = true,
                                        bool huge_pages = false);
  // Maps every page of the file into the mapping in one pass (MADV_POPULATE_READ), as open's
  // MAP_POPULATE does. Reads only: safe beside any other reader.
  void populate() const;
  // Parses an in-memory image (the bytes are copied). Same checks; used by the fuzzer.
  static std::unique_ptr<GgufFile> from_memory(const uint8_t* bytes, size_t size);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t file_size() const { return size_; }
  const uint8_t* bytes() const { return base_; }  // the whole file image
  // The file's identity when it was opened (all zero for from_memory).
  const FileIdentity& identity() const { return identity_; }

  const std::vector<GgufKv>& kvs() const { return kvs_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Lookups: nullptr if absent.
  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;

  // Typed getters. Throw GgufError naming the key if it is missing or of an incompatible type.
  // Integers accept any integer type that fits; floats accept FLOAT32/FLOAT64.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;
  double get_float(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::vector<std::string> get_string_array(std::string_view key) const;
  std::vector<int64_t> get_int_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;
  // With a default when absent (still throws on a wrong type).
  int64_t get_int_or(std::string_view key, int64_t def) const;
  double get_float_or(std::string_view key, double def) const;
  bool get_bool_or(std::string_view key, bool def) const;
  std::string get_string_or(std::string_view key, std::string def) const;

 private:
  GgufFile() = default;
  void parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  FileIdentity identity_;
  void* mapping_ = nullptr;     // mmap'd region, or nullptr
  size_t mapping_bytes_ = 0;    // its length (the file's, or the huge-page copy's)
  std::vector<uint8_t> owned_;  // from_memory copy
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
};

// Builds a GGUF v3 file that llama.cpp loads. Keys and tensors are written in insertion order.
// A tensor's bytes are either given (add_tensor) or produced while the file is written
// (add_tensor_rows), a bounded number of rows at a time, so that a file far larger than memory
// can be written: the header and tensor infos need only the shapes.
class GgufWriter {
 public:
  // Fills rows [row_begin, row_end) of a tensor (a row is ne[0] elements, dtype_row_bytes(type,
  // ne[0]) bytes) into out. Called from several threads at once on disjoint ranges: the bytes of
  // a row must depend on its index only.
  using RowsFn = std::function<void(int64_t row_begin, int64_t row_end, uint8_t* out)>;

  void set_string(const std::string& key, const std::string& v);
  void set_u32(const std::string& key, uint32_t v);
  void set_i32(const std::string& key, int32_t v);
  void set_u64(const std::string& key, uint64_t v);
  void set_f32(const std::string& key, float v);
  void set_bool(const std::string& key, bool v);
  void set_string_array(const std::string& key, const std::vector<std::string>& v);
  void set_i32_array(const std::string& key, const std::vector<int32_t>& v);
  void set_f32_array(const std::string& key, const std::vector<float>& v);
  // Any already-parsed value (for copying metadata between files).
  void set_value(const std::string& key, const GgufValue& v);
  // ne in ggml order; data must hold dtype_row_bytes(type, ne[0]) * (product of ne[1..]) bytes.
  void add_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne,
                  std::vector<uint8_t> data);
  // A tensor whose rows `fill` produces during write().
  void add_tensor_rows(const std::string& name, DType type, const std::vector<int64_t>& ne,
                       RowsFn fill);
  // Writes atomically (temp file + rename). Throws invar::Error on I/O failure. Rows of
  // add_tensor_rows tensors are produced by n_threads threads (0: one per core) into a buffer
  // of at most chunk_bytes (one row when a row is larger), which is written while the next one
  // is filled: memory stays ~2 chunks whatever the file size. The bytes do not depend on either.
  static constexpr int64_t kChunkBytes = int64_t(32) << 20;
  void write(const std::string& path, int n_threads = 0, int64_t chunk_bytes = kChunkBytes) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;  // empty when `fill` produces the rows
    RowsFn fill;
    uint64_t n_bytes = 0;
  };
  void tensor_check(const std::string& name, DType type, const std::vector<int64_t>& ne) const;
  std::vector<GgufKv> kvs_;
  std::vector<Tensor> tensors_;
};

}  // namespace invar
