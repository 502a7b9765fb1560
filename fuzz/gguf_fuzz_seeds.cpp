// Writes the seed corpus for gguf_fuzz into a directory: small models of every architecture and
// weight type, files using every metadata type, and heads of the reference GGUFs.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "forge/make_model.h"
#include "gguf/gguf.h"

namespace {

void write_bytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void add_vocab(invar::GgufWriter& w) {
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "<|endoftext|>"});
  w.set_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  w.set_string_array("tokenizer.ggml.merges", {"a b"});
  w.set_u32("tokenizer.ggml.eos_token_id", 3);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: gguf_fuzz_seeds OUT_DIR [REFERENCE.gguf...]\n");
    return 2;
  }
  const std::string dir = argv[1];
  int n = 0;
  // Tiny models (one GDN layer, or one attention layer) so that a whole file fits in the
  // fuzzer's -max_len and mutations reach the hyper-parameter and tensor checks.
  for (invar::Arch arch : {invar::Arch::qwen3next, invar::Arch::qwen35, invar::Arch::qwen35moe}) {
    for (int64_t interval : {1, 2}) {
      invar::MakeModelConfig c;
      c.arch = arch;
      c.n_embd = 4;
      c.n_layer = 1;
      c.interval = interval;
      c.n_head = 2;
      c.n_head_kv = 1;
      c.head_dim = 2;
      c.n_rot = 2;
      c.n_ff = 4;
      c.n_expert = 2;
      c.n_expert_used = 1;
      c.n_ff_exp = 4;
      c.n_ff_shexp = 4;
      c.ssm_conv = 2;
      c.ssm_state = 2;
      c.ssm_groups = 1;
      c.ssm_v_heads = 2;
      c.tied = interval == 1;
      c.fused_gate_up = arch == invar::Arch::qwen35moe && interval == 2;
      invar::GgufWriter w;
      invar::make_model(c, 4, w);
      add_vocab(w);
      w.write(dir + "/model" + std::to_string(n++) + ".gguf");
    }
  }
  {
    invar::MakeModelConfig c;  // q8_0 blocks need rows of 32
    c.arch = invar::Arch::qwen35;
    c.type = invar::DType::Q8_0;
    c.n_embd = 32;
    c.n_layer = 1;
    c.interval = 1;
    c.n_head = 1;
    c.n_head_kv = 1;
    c.head_dim = 32;
    c.n_rot = 2;
    c.n_ff = 32;
    c.tied = true;
    invar::GgufWriter w;
    invar::make_model(c, 4, w);
    add_vocab(w);
    w.write(dir + "/model_q8.gguf");
  }
  // Every metadata type once, nested arrays included (written by hand: the writer refuses them).
  invar::GgufWriter w;
  w.set_u32("general.alignment", 16);
  w.set_bool("b", true);
  w.set_u64("u64", 1);
  w.set_i32("i32", -1);
  w.set_f32("f32", 0.5f);
  w.set_f32_array("f32s", {1, 2});
  w.add_tensor("t", invar::DType::BF16, {3, 1}, std::vector<uint8_t>(6, 1));
  w.add_tensor("u", invar::DType::F16, {1}, std::vector<uint8_t>(2, 2));
  w.write(dir + "/types.gguf");
  const std::vector<uint8_t> nested = {
      'G', 'G', 'U', 'F', 3, 0, 0, 0, 0,   0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,  // header
      1,   0,   0,   0,   0, 0, 0, 0, 'n', 9, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0,
      0,                                                    // key n: array of arrays
      0,   0,   0,   0,   2, 0, 0, 0, 0,   0, 0, 0, 7, 9};  // [uint8 × 2]
  write_bytes(dir + "/nested.gguf", nested);
  for (int i = 2; i < argc; ++i) {
    std::vector<uint8_t> b = read_bytes(argv[i]);
    b.resize(std::min<size_t>(b.size(), 4096));
    write_bytes(dir + "/reference_head" + std::to_string(i) + ".gguf", b);
  }
  return 0;
}
