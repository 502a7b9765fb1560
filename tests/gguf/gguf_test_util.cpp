#include "gguf_test_util.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <vector>

namespace invar::test {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { GgufFile::from_memory(bytes.data(), bytes.size()); });
}

namespace {
// Every path handed out, removed (files and directories alike) when the test process exits, so
// runs leave nothing behind in the temporary directory.
class TempPaths {
 public:
  std::string add(std::string path) {
    std::lock_guard<std::mutex> lock(mu_);
    paths_.push_back(path);
    return path;
  }
  ~TempPaths() {
    std::error_code ec;
    for (const auto& p : paths_) std::filesystem::remove_all(p, ec);
  }

 private:
  std::mutex mu_;
  std::vector<std::string> paths_;
};
}  // namespace

std::string temp_path(const std::string& name) {
  static std::atomic<int> counter{0};
  static TempPaths paths;
  return paths.add(::testing::TempDir() + "invar_gguf_" + std::to_string(::getpid()) + "_" +
                   std::to_string(counter++) + "_" + name);
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string sha256_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file(path);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

int64_t add_tiny_vocab(GgufWriter& w) {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (char c = 'a'; c < 'a' + 13; ++c) {
    tokens.emplace_back(1, c);
    types.push_back(1);
  }
  for (const char* s : {"ab", "<|endoftext|>", "<|im_start|>"}) {
    tokens.emplace_back(s);
    types.push_back(tokens.size() == 14 ? 1 : 3);
  }
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "qwen2");
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  w.set_i32_array("tokenizer.ggml.token_type", types);
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.bos_token_id", 14);
  w.set_u32("tokenizer.ggml.eos_token_id", 14);
  w.set_bool("tokenizer.ggml.add_bos_token", false);
  return int64_t(tokens.size());
}

MakeModelConfig tiny_config(Arch arch) {
  MakeModelConfig c;
  c.arch = arch;
  c.name = "tiny";
  c.n_embd = 32;
  c.n_layer = 4;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.head_dim = 8;
  c.n_rot = 4;
  c.n_ff = 32;
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 32;
  c.n_ff_shexp = 32;
  c.ssm_state = 8;
  c.ssm_groups = 2;
  c.ssm_v_heads = 4;
  c.interval = 2;
  c.tied = arch == Arch::qwen35;
  c.seed = 7;
  return c;
}

void write_model(const MakeModelConfig& c, const std::string& path, int n_threads,
                 int64_t chunk_bytes) {
  GgufWriter w;
  GgufWriter vocab;
  const int64_t n_vocab = add_tiny_vocab(vocab);
  make_model(c, n_vocab, w);
  add_tiny_vocab(w);
  w.write(path, n_threads, chunk_bytes);
}

void rewrite(const GgufFile& src, const std::string& path, const std::set<std::string>& drop_keys,
             const std::set<std::string>& drop_tensors,
             const std::function<void(GgufWriter&)>& edit) {
  GgufWriter w;
  for (const auto& kv : src.kvs())
    if (!drop_keys.count(kv.key)) w.set_value(kv.key, kv.value);
  for (const auto& t : src.tensors()) {
    if (drop_tensors.count(t.name)) continue;
    w.add_tensor(t.name, t.type, t.ne, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  if (edit) edit(w);
  w.write(path);
}

}  // namespace invar::test
