// Messages JSON -> ChatMessage list, refusing fields chat_render cannot honour.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace invar {

std::vector<ChatMessage> chat_messages_from_json(std::string_view json_text) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(std::string("messages: invalid JSON: ") + e.what());
  }
  if (j.is_object()) {
    for (const char* key : {"tools", "functions"}) {
      if (j.contains(key) && !j[key].is_null() && !(j[key].is_array() && j[key].empty())) {
        throw Error(std::string("messages: cannot render exactly: '") + key +
                    "' is not supported by invar's chat formatting");
      }
    }
    if (!j.contains("messages")) throw Error("messages: object has no 'messages' array");
    j = j["messages"];
  }
  if (!j.is_array()) throw Error("messages: expected an array of {\"role\", \"content\"}");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& m = j[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) throw Error(where + ": expected an object");
    if (!m.contains("role") || !m["role"].is_string()) {
      throw Error(where + ": 'role' must be a string");
    }
    if (!m.contains("content") || !m["content"].is_string()) {
      throw Error(where +
                  ".content: cannot render exactly: content must be a string "
                  "(content parts and null content are not supported)");
    }
    for (const char* key : {"tool_calls", "reasoning_content", "function_call"}) {
      if (m.contains(key) && !m[key].is_null()) {
        throw Error(where + ": cannot render exactly: '" + key + "' is not supported");
      }
    }
    out.push_back(ChatMessage{m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

}  // namespace invar
