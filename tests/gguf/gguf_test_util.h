// Helpers shared by the GGUF tests: raw byte builders for hostile files, tiny models, rewrites.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "forge/make_model.h"
#include "gguf/gguf.h"

namespace invar::test {

// Little-endian byte builder for hand-made (often broken) GGUF images.
struct Bytes {
  std::vector<uint8_t> b;
  Bytes& u8(uint8_t v) { return raw(&v, 1); }
  Bytes& u32(uint32_t v) { return raw(&v, 4); }
  Bytes& u64(uint64_t v) { return raw(&v, 8); }
  Bytes& f32(float v) { return raw(&v, 4); }
  Bytes& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Bytes& raw(const void* p, size_t n) {
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
    return *this;
  }
  Bytes& pad(size_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  Bytes& header(uint64_t n_tensors, uint64_t n_kv, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
};

// The message of the GgufError/Error that fn throws; "" if it throws nothing.
std::string error_of(const std::function<void()>& fn);
std::string parse_error(const std::vector<uint8_t>& bytes);

std::string temp_path(const std::string& name);    // unique per process, removed at exit
std::string sha256_file(const std::string& path);  // hex
std::vector<uint8_t> read_file(const std::string& path);

// A 16-token byte vocabulary written as tokenizer.ggml.* keys; returns n_vocab.
int64_t add_tiny_vocab(GgufWriter& w);
// Small dimensions for each architecture (fast to write, every feature present).
MakeModelConfig tiny_config(Arch arch);
// n_threads and chunk_bytes: GgufWriter::write's (the bytes must not depend on them).
void write_model(const MakeModelConfig& c, const std::string& path, int n_threads = 0,
                 int64_t chunk_bytes = GgufWriter::kChunkBytes);

// Copies src into a new file at path: keys in drop_keys and tensors in drop_tensors are left out,
// then edit() may add or override keys and tensors.
void rewrite(const GgufFile& src, const std::string& path, const std::set<std::string>& drop_keys,
             const std::set<std::string>& drop_tensors,
             const std::function<void(GgufWriter&)>& edit);

}  // namespace invar::test
