// Vocab from a Hugging Face tokenizer.json (+ tokenizer_config.json in the same folder).
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "tokenizer/pre_split.h"
#include "tokenizer/token_types.h"
#include "tokenizer/tokenizer.h"

namespace invar {
namespace {

using nlohmann::json;

json read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error("tokenizer: cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw Error("tokenizer: '" + path + "' is not valid JSON: " + e.what());
  }
}

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
  const json j = read_json(path);
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
      throw Error("tokenizer: " + path + ": split pattern is neither Qwen2's nor Qwen3.5's: " +
                  pattern);
    }

    // Ids: the model vocabulary plus the added tokens; rows no one names become unused
    // padding, as llama.cpp's converter writes them.
    const json& vocab = model.at("vocab");
    int64_t max_id = -1;
    for (const auto& [tok, id] : vocab.items()) max_id = std::max<int64_t>(max_id, id.get<int64_t>());
    for (const json& a : j.at("added_tokens")) max_id = std::max<int64_t>(max_id, a.at("id").get<int64_t>());
    if (max_id < 0 || max_id >= (1ll << 31)) throw Error("tokenizer: " + path + ": bad token ids");
    const size_t n = static_cast<size_t>(max_id) + 1;
    v.tokens.assign(n, std::string());
    v.token_types.assign(n, 0);
    for (const auto& [tok, idj] : vocab.items()) {
      const int64_t id = idj.get<int64_t>();
      if (id < 0 || v.token_types[id] != 0) {
        throw Error("tokenizer: " + path + ": token id " + std::to_string(id) + " is used twice");
      }
      v.tokens[id] = tok;
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
      v.token_types[id] = a.value("special", false) ? token_type::kControl : token_type::kUserDefined;
    }
    for (size_t i = 0; i < n; ++i) {
      if (v.token_types[i] == 0) {
        v.tokens[i] = "[PAD" + std::to_string(i) + "]";
        v.token_types[i] = token_type::kUnused;
      }
    }

    const json& merges = model.at("merges");
    v.merges.reserve(merges.size());
    for (const json& mg : merges) {
      if (mg.is_string()) {
        v.merges.push_back(mg.get<std::string>());
      } else if (mg.is_array() && mg.size() == 2) {
        v.merges.push_back(mg[0].get<std::string>() + " " + mg[1].get<std::string>());
      } else {
        throw Error("tokenizer: " + path + ": a merge is neither \"a b\" nor [a, b]");
      }
    }
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
