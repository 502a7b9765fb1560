#include "engine/drafter_mtp.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace invar {
namespace {

constexpr int64_t kBlock = 64;  // MTP KV positions per block

struct MtpSeq : DraftSeq {
  std::vector<std::vector<float>> kv;  // blocks of Model::mtp_kv_block_floats(kBlock)
  std::vector<float*> table;           // kv[i].data(), the block table mtp_forward reads
  int64_t n_kv = 0;                    // positions 0 .. n_kv − 1 hold the KV of verified rows
  int64_t hid_pos0 = 0;                // observed trunk hidden rows: positions hid_pos0 ...
  std::vector<float> hid;              // [rows][E]
  // Working rows of one propose()
  std::vector<int32_t> tokens;
  std::vector<float> hidden_in, hidden_out;  // [rows][E]
  std::vector<float> logits;                 // [V]
  std::vector<float> chain_in;               // [E] hidden row fed to the next chained draft
};

// The MTP chunk of n rows at pos0 over s's working rows and KV.
MtpChunk chunk_of(MtpSeq& s, int64_t n, int64_t pos0) {
  MtpChunk c;
  c.tokens = s.tokens.data();
  c.hidden_in = s.hidden_in.data();
  c.n_tokens = n;
  c.pos0 = pos0;
  c.kv_blocks = s.table.data();
  c.block_size = kBlock;
  c.logits = s.logits.data();
  c.hidden_out = s.hidden_out.data();
  return c;
}

int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());  // first of equal maxima
}

}  // namespace

MtpDrafter::MtpDrafter(const Model& model) : model_(model), scratch_(model.scratch_make(1, 1)) {
  const Hparams& hp = model.hparams();
  if (!model.has_mtp())
    throw Error(hp.n_layer_nextn == 0
                    ? std::string("--spec mtp: the model has no MTP block (nextn_predict_layers "
                                  "is absent or 0); use --spec ngram or none")
                    : "--spec mtp: the model's MTP block cannot be used: " + hp.mtp_unusable);
}

std::unique_ptr<DraftSeq> MtpDrafter::seq_make(std::span<const int32_t> prompt) {
  (void)prompt;
  return std::make_unique<MtpSeq>();
}

void MtpDrafter::hidden_observe(DraftSeq& seq, int64_t pos0, int64_t n, const float* hidden) {
  auto& s = static_cast<MtpSeq&>(seq);
  const int64_t E = model_.hparams().n_embd;
  const int64_t hid_end = s.hid_pos0 + int64_t(s.hid.size()) / E;
  // The hidden row of q feeds the MTP row of q + 1: rows after pos0 must run again if they ran
  // before (a recomputation after a preemption); in the usual step pos0 + 1 == n_kv.
  s.n_kv = std::min(s.n_kv, pos0 + 1);
  if (pos0 < s.hid_pos0 || pos0 > hid_end) {
    s.hid.clear();
    s.hid_pos0 = pos0;
  } else {
    s.hid.resize(size_t((pos0 - s.hid_pos0) * E));
  }
  s.hid.insert(s.hid.end(), hidden, hidden + n * E);
}

void MtpDrafter::propose(std::span<DraftJob> jobs, ThreadPool& pool) {
  const int64_t E = model_.hparams().n_embd, V = model_.hparams().n_vocab;
  const int64_t block_floats = model_.mtp_kv_block_floats(kBlock);

  // Catch-up: the rows (hidden of p − 1, token p) of every verified position the MTP KV lacks,
  // for all sequences in one call; the newest row's logits give the first draft.
  chunks_.clear();
  for (DraftJob& j : jobs) {
    auto& s = static_cast<MtpSeq&>(*j.seq);
    const int64_t len = int64_t(j.tokens.size());
    j.out->clear();
    if (len == 0 || j.max_k < 1) continue;
    s.n_kv = std::min(s.n_kv, len - 1);
    const int64_t n = len - s.n_kv;
    while (int64_t(s.kv.size()) * kBlock < len + j.max_k) {
      s.kv.emplace_back(size_t(block_floats), 0.0f);
      s.table.push_back(s.kv.back().data());
    }
    s.tokens.assign(j.tokens.begin() + s.n_kv, j.tokens.end());
    s.hidden_in.assign(size_t(n * E), 0.0f);
    const int64_t hid_rows = int64_t(s.hid.size()) / E;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t src = s.n_kv + i - 1 - s.hid_pos0;  // hidden row of position p − 1
      if (src >= 0 && src < hid_rows)
        std::copy_n(s.hid.begin() + src * E, E, s.hidden_in.begin() + i * E);
    }
    s.hidden_out.resize(size_t(n * E));
    s.logits.resize(size_t(V));
    chunks_.push_back(chunk_of(s, n, s.n_kv));
  }
  if (chunks_.empty()) return;
  model_.mtp_forward(chunks_, *scratch_, pool);

  for (DraftJob& j : jobs) {
    auto& s = static_cast<MtpSeq&>(*j.seq);
    const int64_t len = int64_t(j.tokens.size());
    if (len == 0 || j.max_k < 1) continue;
    s.chain_in.assign(s.hidden_out.end() - E, s.hidden_out.end());
    s.n_kv = len;
    // Only the hidden row of the newest verified position is needed by the next catch-up.
    const int64_t keep_from = std::max<int64_t>(len - 1 - s.hid_pos0, 0);
    const int64_t hid_rows = int64_t(s.hid.size()) / E;
    s.hid.erase(s.hid.begin(), s.hid.begin() + std::min(keep_from, hid_rows) * E);
    s.hid_pos0 += std::min(keep_from, hid_rows);
    j.out->push_back(argmax(s.logits));
  }

  // Chained drafts: row (hidden_out of the previous row, previous draft) at the next position.
  for (int64_t step = 1;; ++step) {
    chunks_.clear();
    for (DraftJob& j : jobs) {
      auto& s = static_cast<MtpSeq&>(*j.seq);
      if (int64_t(j.out->size()) != step || step >= j.max_k) continue;
      s.tokens.assign(1, j.out->back());
      s.hidden_in = s.chain_in;
      s.hidden_out.resize(size_t(E));
      chunks_.push_back(chunk_of(s, 1, int64_t(j.tokens.size()) + step - 1));
    }
    if (chunks_.empty()) return;
    model_.mtp_forward(chunks_, *scratch_, pool);
    for (DraftJob& j : jobs) {
      auto& s = static_cast<MtpSeq&>(*j.seq);
      if (int64_t(j.out->size()) != step || step >= j.max_k) continue;
      s.chain_in = s.hidden_out;
      j.out->push_back(argmax(s.logits));
    }
  }
}

}  // namespace invar
