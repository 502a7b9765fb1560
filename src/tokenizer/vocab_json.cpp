// Vocab from a Hugging Face tokenizer.json (+ tokenizer_config.json in the same folder).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/file_read.h"
#include "tokenizer/pre_split.h"
#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  const std::string text = file_read(path, "tokenizer");
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error("tokenizer: '" + path + "' is not valid JSON: " + e.what());
  }
}

// tokenizer.json holds 151k vocabulary entries and 151k merges: building them as a DOM (a
// std::map per object) dominates loading. This SAX handler builds the DOM for everything else
// and collects model.vocab and model.merges straight into vectors (their DOM slots stay null).
class TokenizerJsonSax {
 public:
  explicit TokenizerJsonSax(json& root) : dom_(root, true) {}

  std::vector<std::pair<std::string, int64_t>> vocab;
  std::vector<std::string> merges;
  bool saw_vocab = false, saw_merges = false;

  bool null() { return mode_ == Mode::dom && dom_.null(); }
  bool boolean(bool v) { return mode_ == Mode::dom && dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) {
    return number(v) || (mode_ == Mode::dom && dom_.number_integer(v));
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::vocab) return number(static_cast<int64_t>(v));
    return mode_ == Mode::dom && dom_.number_unsigned(v);
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return mode_ == Mode::dom && dom_.number_float(v, s);
  }
  bool binary(json::binary_t& v) { return mode_ == Mode::dom && dom_.binary(v); }
  bool string(json::string_t& v) {
    switch (mode_) {
      case Mode::dom:
        return dom_.string(v);
      case Mode::merges:
        merges.push_back(std::move(v));
        return true;
      case Mode::merge_pair:
        pair_.push_back(std::move(v));
        return true;
      default:
        return false;
    }
  }
  bool key(json::string_t& k) {
    if (mode_ == Mode::vocab) {
      pending_ = std::move(k);
      return true;
    }
    if (mode_ != Mode::dom) return false;
    last_key_ = k;
    return dom_.key(k);
  }
  bool start_object(std::size_t n) {
    if (mode_ != Mode::dom) return false;
    if (in_model() && last_key_ == "vocab") {
      mode_ = Mode::vocab;
      saw_vocab = true;
      return true;
    }
    keys_.push_back(last_key_);
    return dom_.start_object(n);
  }
  bool end_object() {
    if (mode_ == Mode::vocab) {
      mode_ = Mode::dom;
      return true;
    }
    if (mode_ != Mode::dom) return false;
    keys_.pop_back();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (mode_ == Mode::merges) {
      mode_ = Mode::merge_pair;
      pair_.clear();
      return true;
    }
    if (mode_ != Mode::dom) return false;
    if (in_model() && last_key_ == "merges") {
      mode_ = Mode::merges;
      saw_merges = true;
      return true;
    }
    keys_.push_back(last_key_);
    last_key_.clear();
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::merge_pair) {
      if (pair_.size() != 2) return false;
      merges.push_back(pair_[0] + " " + pair_[1]);
      mode_ = Mode::merges;
      return true;
    }
    if (mode_ == Mode::merges) {
      mode_ = Mode::dom;
      return true;
    }
    if (mode_ != Mode::dom) return false;
    keys_.pop_back();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& tok, const nlohmann::detail::exception& e) {
    return dom_.parse_error(pos, tok, e);
  }

 private:
  enum class Mode { dom, vocab, merges, merge_pair };
  bool number(int64_t v) {
    if (mode_ != Mode::vocab) return false;
    vocab.emplace_back(std::move(pending_), v);
    return true;
  }
  // Directly inside the top-level "model" object.
  bool in_model() const { return keys_.size() == 2 && keys_[1] == "model"; }

  nlohmann::detail::json_sax_dom_parser<json> dom_;
  Mode mode_ = Mode::dom;
  std::vector<std::string> keys_;  // key of each open container, outermost first
  std::string last_key_, pending_;
  std::vector<std::string> pair_;
};

// The split pattern of a pre_tokenizer that is [Split(Regex, Isolated), ByteLevel(no regex)]
// (Qwen's shape); throws naming what differs.
std::string split_pattern(const json& pre, const std::string& path) {
  const std::string where = "tokenizer: " + path + ": pre_tokenizer";
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers")) {
    throw Error(where + " is not a Sequence (invar implements Qwen's Split + ByteLevel)");
  }
  const json& seq = pre["pretokenizers"];
  if (!seq.is_array() || seq.size() != 2) {
    throw Error(where + ": expected [Split, ByteLevel]");
  }
  const json& split = seq[0];
  const json& bl = seq[1];
  if (split.value("type", "") != "Split" || split.value("behavior", "") != "Isolated" ||
      split.value("invert", false) || !split.contains("pattern") ||
      !split["pattern"].contains("Regex")) {
    throw Error(where + "[0]: expected Split with a Regex pattern, behavior Isolated");
  }
  if (bl.value("type", "") != "ByteLevel" || bl.value("add_prefix_space", false) ||
      bl.value("use_regex", true)) {
    throw Error(where + "[1]: expected ByteLevel with add_prefix_space and use_regex false");
  }
  return split["pattern"]["Regex"].get<std::string>();
}

// A tokenizer_config.json token field: "text", {"content": "text"} or null.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return v["content"].get<std::string>();
  }
  return "";
}

}  // namespace

Vocab vocab_from_tokenizer_json(const std::string& path) {
  const std::string text = file_read(path, "tokenizer");
  json j;
  TokenizerJsonSax sax(j);
  try {
    if (!json::sax_parse(text, &sax) || !sax.saw_vocab || !sax.saw_merges) {
      throw Error("tokenizer: " + path + ": model.vocab or model.merges is missing or malformed");
    }
  } catch (const json::exception& e) {
    throw Error("tokenizer: '" + path + "' is not valid JSON: " + e.what());
  }
  Vocab v;
  try {
    const json& model = j.at("model");
    if (model.value("type", "") != "BPE") {
      throw Error("tokenizer: " + path + ": model.type is not BPE");
    }
    if (model.value("ignore_merges", false)) {
      throw Error("tokenizer: " + path + ": model.ignore_merges is not supported");
    }
    const json& norm = j.at("normalizer");
    if (!norm.is_null() && norm.value("type", "") != "NFC") {
      throw Error("tokenizer: " + path + ": normalizer '" + norm.value("type", "?") +
                  "' is not supported (NFC or none)");
    }
    const std::string pattern = split_pattern(j.at("pre_tokenizer"), path);
    v.pre = pre_name_for_pattern(pattern);
    if (v.pre.empty()) {
      throw Error("tokenizer: " + path +
                  ": split pattern is neither Qwen2's nor Qwen3.5's: " + pattern);
    }

    // Ids: the model vocabulary plus the added tokens; rows no one names become unused
    // padding, as llama.cpp's converter writes them.
    int64_t max_id = -1;
    for (const auto& [tok, id] : sax.vocab) max_id = std::max<int64_t>(max_id, id);
    for (const json& a : j.at("added_tokens"))
      max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
    if (max_id < 0 || max_id >= (1ll << 31)) throw Error("tokenizer: " + path + ": bad token ids");
    const size_t n = static_cast<size_t>(max_id) + 1;
    v.tokens.assign(n, std::string());
    v.token_types.assign(n, 0);
    for (auto& [tok, id] : sax.vocab) {
      if (id < 0 || v.token_types[id] != 0) {
        throw Error("tokenizer: " + path + ": token id " + std::to_string(id) + " is used twice");
      }
      v.tokens[id] = std::move(tok);
      v.token_types[id] = token_type::kNormal;
    }
    for (const json& a : j.at("added_tokens")) {
      const int64_t id = a.at("id").get<int64_t>();
      if (id < 0) throw Error("tokenizer: " + path + ": negative added token id");
      if (a.value("lstrip", false) || a.value("rstrip", false) || a.value("single_word", false)) {
        throw Error("tokenizer: " + path + ": added token '" + a.at("content").get<std::string>() +
                    "' uses lstrip/rstrip/single_word, which invar does not implement");
      }
      v.tokens[id] = a.at("content").get<std::string>();
      v.token_types[id] =
          a.value("special", false) ? token_type::kControl : token_type::kUserDefined;
    }
    for (size_t i = 0; i < n; ++i) {
      if (v.token_types[i] == 0) {
        v.tokens[i] = "[PAD" + std::to_string(i) + "]";
        v.token_types[i] = token_type::kUnused;
      }
    }

    v.merges = std::move(sax.merges);
  } catch (const json::exception& e) {
    throw Error("tokenizer: " + path + ": unexpected structure: " + e.what());
  }

  // Specials and the chat template live in tokenizer_config.json.
  const auto cfg_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const json cfg = read_json(cfg_path.string());
    auto find_id = [&](const char* key) -> int32_t {
      const std::string t = config_token(cfg, key);
      if (t.empty()) return -1;
      for (size_t i = v.tokens.size(); i-- > 0;) {
        if (v.tokens[i] == t) return static_cast<int32_t>(i);
      }
      throw Error("tokenizer: " + cfg_path.string() + ": " + key + " '" + t +
                  "' is not in the vocabulary");
    };
    v.bos_id = find_id("bos_token");
    v.eos_id = find_id("eos_token");
    v.pad_id = find_id("pad_token");
    v.add_bos = cfg.value("add_bos_token", false) && v.bos_id >= 0;
    if (cfg.contains("chat_template")) {
      const json& ct = cfg["chat_template"];
      if (ct.is_string()) {
        v.chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {
        for (const json& e : ct) {
          if (e.value("name", "") == "default") v.chat_template = e.value("template", "");
        }
      }
    }
  }
  return v;
}

}  // namespace invar
