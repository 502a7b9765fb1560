// Tokenizer: added tokens first, then per plain segment NFC -> split regex -> byte-level ids ->
// merges by rank.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>

#include "core/error.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pre_split.h"
#include "tokenizer/token_index.h"
#include "tokenizer/token_types.h"
#include "tokenizer/utf8.h"

namespace invar {

namespace {

struct AddedToken {
  std::string_view text;  // into Vocab::tokens
  int32_t id;
  bool control;  // special: matched only when parse_special
};

// Per-call buffers, so encode is const and thread-safe.
struct EncodeScratch {
  std::vector<std::pair<uint32_t, uint32_t>> pieces;
  std::vector<int32_t> ids;
  BpeScratch bpe;
};

}  // namespace

struct Tokenizer::Impl {
  Vocab vocab;
  std::vector<std::string> raw;        // [V] bytes each token decodes to
  TokenIndex id_of;                    // vocab string -> first id with it
  std::array<int32_t, 256> byte_id{};  // [256] token of each single byte, or -1
  MergeTable merges;
  std::vector<AddedToken> added;        // longest first
  std::array<bool, 256> added_first{};  // first bytes of added tokens
  PreSplitter splitter;

  explicit Impl(Vocab v) : vocab(std::move(v)), merges(vocab.merges.size()), splitter(vocab.pre) {}

  void encode_plain(std::string_view seg, EncodeScratch& s, std::vector<int32_t>& out) const;
};

Tokenizer::Tokenizer(Vocab v) : impl_(std::make_unique<Impl>(std::move(v))) {
  Impl& m = *impl_;
  Vocab& voc = m.vocab;
  const size_t n = voc.tokens.size();
  if (n == 0) throw Error("tokenizer: the vocabulary is empty");
  if (n >= (1u << 31)) throw Error("tokenizer: vocabulary too large");
  if (voc.token_types.empty()) voc.token_types.assign(n, token_type::kNormal);
  if (voc.token_types.size() != n) {
    throw Error("tokenizer: " + std::to_string(voc.token_types.size()) + " token types for " +
                std::to_string(n) + " tokens");
  }
  for (int32_t* id : {&voc.bos_id, &voc.eos_id, &voc.pad_id}) {
    if (*id >= static_cast<int64_t>(n)) {
      throw Error("tokenizer: special token id " + std::to_string(*id) +
                  " is outside the vocabulary of " + std::to_string(n));
    }
  }

  m.id_of = TokenIndex(voc.tokens);
  m.raw.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& t = voc.tokens[i];
    const int32_t type = voc.token_types[i];
    if (type == token_type::kControl || type == token_type::kUserDefined) {
      m.raw[i] = t;  // added tokens are stored as their literal text
      if (!t.empty()) {
        m.added.push_back({t, static_cast<int32_t>(i), type == token_type::kControl});
        m.added_first[static_cast<uint8_t>(t[0])] = true;
      }
    } else if (type == token_type::kUnused) {
      m.raw[i].clear();
    } else {
      // HF's ByteLevel decoder: a token with a code point outside the byte alphabet keeps its
      // own UTF-8.
      auto bytes = byte_level::decode(t);
      m.raw[i] = bytes ? std::move(*bytes) : t;
    }
  }
  std::stable_sort(m.added.begin(), m.added.end(), [](const AddedToken& a, const AddedToken& b) {
    return a.text.size() > b.text.size();
  });

  for (int b = 0; b < 256; ++b) {
    m.byte_id[b] = m.id_of.find(byte_level::encode_byte(static_cast<uint8_t>(b)));
  }

  // A vocabulary built by these merges holds merge r's result at a fixed offset plus r (GPT-2
  // and Qwen: 256 + r), so the id after the previous result is tried before the index is asked;
  // with a text occurring twice only the index knows the first id.
  std::string joined;
  int32_t next_result = -1;
  for (size_t r = 0; r < voc.merges.size(); ++r) {
    const std::string& mg = voc.merges[r];
    const size_t sp = mg.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == mg.size()) {
      throw Error("tokenizer: merge " + std::to_string(r) + " '" + mg +
                  "' is not two tokens separated by a space");
    }
    const std::string_view a(mg.data(), sp), b(mg.data() + sp + 1, mg.size() - sp - 1);
    const int32_t ia = m.id_of.find(a), ib = m.id_of.find(b);
    // Symbols are always tokens, so a merge whose parts are not tokens can never fire.
    if (ia < 0 || ib < 0) continue;
    int32_t ir = next_result;
    const std::string* guess =
        m.id_of.unique() && ir >= 0 && size_t(ir) < n ? &voc.tokens[size_t(ir)] : nullptr;
    if (!guess || guess->size() != a.size() + b.size() || !guess->starts_with(a) ||
        !guess->ends_with(b)) {
      joined.assign(a);
      joined.append(b);
      ir = m.id_of.find(joined);
    }
    if (ir < 0) {
      throw Error("tokenizer: merge " + std::to_string(r) + " '" + mg + "' makes '" + joined +
                  "', which is not in the vocabulary");
    }
    m.merges.add(ia, ib, static_cast<uint32_t>(r), ir);
    next_result = ir + 1;
  }
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_file(const std::string& path) {
  char magic[4] = {};
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw Error("tokenizer: cannot open '" + path + "'");
    f.read(magic, 4);
  }
  if (std::string_view(magic, 4) == "GGUF") {
    auto g = GgufFile::open(path, /*populate=*/false);  // the vocabulary is in the header
    return std::make_unique<Tokenizer>(vocab_from_gguf(*g));
  }
  return std::make_unique<Tokenizer>(vocab_from_tokenizer_json(path));
}

void Tokenizer::Impl::encode_plain(std::string_view seg, EncodeScratch& s,
                                   std::vector<int32_t>& out) const {
  if (seg.empty()) return;
  std::string normalized;
  if (!utf8::nfc_trivially_stable(seg)) {
    normalized = utf8::nfc(seg);
    seg = normalized;
  }
  s.pieces.clear();
  splitter.split(seg, s.pieces);
  for (const auto& [b, e] : s.pieces) {
    s.ids.clear();
    for (uint32_t i = b; i < e; ++i) {
      const auto byte = static_cast<uint8_t>(seg[i]);
      const int32_t id = byte_id[byte];
      if (id < 0) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02X", byte);
        throw Error(std::string("tokenizer: byte ") + hex +
                    " has no token in this vocabulary, so the text cannot be encoded");
      }
      s.ids.push_back(id);
    }
    bpe_merge(merges, s.ids.data(), s.ids.size(), s.bpe, out);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  const size_t bad = utf8::first_invalid(text);
  if (bad != text.size()) {
    throw Error("tokenizer: input is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
  }
  const Impl& m = *impl_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  EncodeScratch s;
  size_t seg_start = 0;
  if (!m.added.empty()) {
    // Leftmost-longest match of the added tokens on the raw text (before NFC), as HF's
    // AddedVocabulary does; the text between matches is encoded on its own.
    for (size_t i = 0; i < text.size();) {
      if (!m.added_first[static_cast<uint8_t>(text[i])]) {
        ++i;
        continue;
      }
      const AddedToken* hit = nullptr;
      for (const AddedToken& a : m.added) {
        if (a.control && !parse_special) continue;
        if (text.compare(i, a.text.size(), a.text) == 0) {
          hit = &a;
          break;
        }
      }
      if (!hit) {
        ++i;
        continue;
      }
      m.encode_plain(text.substr(seg_start, i - seg_start), s, out);
      out.push_back(hit->id);
      i += hit->text.size();
      seg_start = i;
    }
  }
  m.encode_plain(text.substr(seg_start), s, out);
  return out;
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += token_bytes(id);
  return out;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->raw.size()) {
    throw Error("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                std::to_string(impl_->raw.size()) + ")");
  }
  return impl_->raw[static_cast<size_t>(id)];
}

int64_t Tokenizer::n_vocab() const {
  return static_cast<int64_t>(impl_->raw.size());
}

const Vocab& Tokenizer::vocab() const {
  return impl_->vocab;
}

int32_t Tokenizer::token_id(std::string_view token_text) const {
  return impl_->id_of.find(token_text);
}

std::string StreamDecoder::push(int32_t id) {
  pending_ += tok_.token_bytes(id);
  return utf8::release_complete(pending_, pending_.size());
}

std::string StreamDecoder::flush() {
  return utf8::release_all(pending_);
}

}  // namespace invar
