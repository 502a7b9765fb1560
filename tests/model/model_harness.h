// Helpers of the model tests: a sequence's own state + KV blocks, running it through
// Model::forward in chunks, raw-bit comparison with a readable first-mismatch message, and a
// small random qwen35moe GGUF (fused gate_up) for the architecture no reference file covers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/seq_images.h"
#include "forge/make_model.h"
#include "model/model.h"

namespace invar::test {

// One sequence's recurrent state and paged KV, sized for `capacity` positions.
struct SeqState {
  SeqState(const Model& m, int64_t capacity, int64_t block_size = 16);
  std::vector<float> state;    // [state_floats]
  std::vector<float> kv;       // [n_blocks][kv_block_floats]
  std::vector<float*> blocks;  // [n_blocks]
  int64_t block_size;
};

// Runs tokens[0..n) through forward in chunks of `chunk` (0: one call), all logits kept:
// returns [n][V]. st continues from its current contents (positions start at pos0). With
// `images` (slots counted from 0, the sequence's start), image slots take their rows and, on an
// IMROPE model, every row its IMROPE position.
std::vector<float> run_chunked(const Model& m, SeqState& st, const std::vector<int32_t>& tokens,
                               int64_t chunk, ThreadPool& pool, int64_t pos0 = 0,
                               const SeqImages* images = nullptr);

// Empty string if a and b have the same bits; otherwise a message naming the count of
// differing floats and the first few (index, row, column, both values as %.9g and hex).
std::string bits_diff(const std::vector<float>& a, const std::vector<float>& b,
                      int64_t row_len = 0);

// Float64 log-softmax of x[0..n), and the ids of the k largest of lp by value descending then
// id ascending (DESIGN N6): how the oracle tests compare top-k logprobs.
std::vector<double> log_softmax_f64(const double* x, int64_t n);
std::vector<int64_t> top_ids_f64(const std::vector<double>& lp, int64_t k);
// max |li − lo| over the union of both log-softmax rows' top-k ids; a NaN difference is the worst.
double top_k_worst_diff(const std::vector<double>& li, const std::vector<double>& lo, int64_t k);

// tests/model/float64_oracle.py's float64 logits of a token sequence on a model file.
struct OracleJob {
  std::string model;
  const std::vector<int32_t>* tokens;
  int64_t n_vocab;
};
// One oracle process over every job, its files under `dir`: [job][T][V] (NaN where it wrote
// nothing; a failed run or short file is a test failure).
std::vector<std::vector<double>> float64_oracle_logits(const std::vector<OracleJob>& jobs,
                                                       const std::string& dir);

// The first index of the largest of v[0..n) (the greedy token).
int32_t argmax_of(const float* v, int64_t n);

// A tiny model of `arch` (E = 64, 4 layers of which 2 are attention, H = 4, Hkv = 2, D = 16,
// MoE 4 experts choose 2), with an MTP block of kind `mtp`.
MakeModelConfig tiny_model_config(Arch arch, MtpKind mtp = MtpKind::none);

// Writes a random-weight qwen35moe GGUF with make_model (fused ffn_gate_up_exps, 4 layers of
// which 2 are attention, Hv/Hk = 2, vocabulary copied from `vocab_from`) to `path`.
void write_tiny_qwen35moe(const std::string& path, const std::string& vocab_from);

// The small model of the quantised-weight tests: rows of 256 (E, VAL) take the K-quants, while
// D·H = 64, Fe = 64 and Fs = 96 are not multiples of 256, so llama-quantize's fallback types
// (or the 32-blocks) appear too. `quant` is a preset or type name (forge/quant_preset.h).
MakeModelConfig quant_test_config(Arch arch, const std::string& quant);

// Writes c with the vocabulary of vocab_from ("": tests/data/models/qwen35-tiny.gguf) to path.
void write_generated(const MakeModelConfig& c, const std::string& path,
                     const std::string& vocab_from = "");

// The model a test binary runs on: the environment's INVAR_TEST_MODEL (each CTest entry sets
// it, so one executable serves every model). It names a reference model in tests/data/models,
// "qwen35moe-generated" for write_tiny_qwen35moe, or "generated:ARCH:TYPE" for
// quant_test_config(ARCH, TYPE), both written into the binary dir.
std::string test_model_name();
std::string test_model_path(const std::string& name);

}  // namespace invar::test
