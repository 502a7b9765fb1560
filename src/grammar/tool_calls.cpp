#include "grammar/tool_calls.h"

#include <algorithm>
#include <string>
#include <vector>

#include "grammar/codepoints.h"
#include "grammar/error.h"
#include "grammar/json_schema.h"

namespace invar::grammar {

using ojson = nlohmann::ordered_json;

ExprId text_without(Builder& b, std::string_view stop) {
  const size_t m = stop.size();
  // KMP: state i = the last i bytes of the text are stop[0..i); a byte that would reach state m
  // completes `stop` and is not allowed there.
  std::vector<size_t> fail(m + 1, 0);
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && stop[i] != stop[k]) k = fail[k];
    if (stop[i] == stop[k]) ++k;
    fail[i + 1] = k;
  }
  for (size_t i = 1; i < m; ++i)
    if (fail[i] != 0) throw Error("text_without: the stop string overlaps itself");
  auto next = [&](size_t i, uint8_t c) {
    while (i > 0 && stop[i] != static_cast<char>(c)) i = fail[i];
    return stop[i] == static_cast<char>(c) ? i + 1 : 0;
  };
  std::vector<RuleId> state(m);
  for (size_t i = 0; i < m; ++i) state[i] = b.fresh_rule("text-" + std::to_string(i));
  CodepointSet non_ascii;
  non_ascii.add(0x80, kMaxCodepoint);
  const ExprId wide = utf8_expr(b, non_ascii);  // a non-ASCII character never extends `stop`
  for (size_t i = 0; i < m; ++i) {
    std::vector<ByteSet> to(m);
    for (int c = 0; c < 0x80; ++c) {
      const size_t j = next(i, static_cast<uint8_t>(c));
      if (j < m) to[j].add(static_cast<uint8_t>(c));
    }
    std::vector<ExprId> alts = {b.empty(), b.seq({wide, b.ref(state[0])})};
    for (size_t j = 0; j < m; ++j)
      if (!to[j].empty()) alts.push_back(b.seq({b.bytes(to[j]), b.ref(state[j])}));
    b.define(state[i], b.alt(std::move(alts)));
  }
  return b.ref(state[0]);
}

namespace {

std::string string_member(const ojson& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_string() || it->get_ref<const std::string&>().empty())
    throw Error("tool_calls: " + where + " needs a non-empty string '" + key + "'");
  return it->get<std::string>();
}

// A property whose value the output parser keeps as raw text (chat/tool_call_values.cpp's
// schema_type: a string type, or no type and no anyOf), not as JSON.
bool raw_value(const ojson& s) {
  if (!s.is_object()) return true;
  auto t = s.find("type");
  if (t == s.end()) return !s.contains("anyOf");
  return t->is_string() && *t == "string";
}

// The raw text of such a value: one of its enum / const values as text, a bounded run of
// characters other than '<' (so that no count of them spells </parameter>) for
// minLength/maxLength, else any text without "</parameter>". pattern and format are not
// enforced on raw values.
ExprId raw_expr(Builder& b, const ojson& s, ExprId text) {
  const auto as_text = [](const ojson& v) {
    return v.is_string() ? v.get<std::string>() : v.dump();
  };
  if (s.is_object() && s.contains("enum") && s["enum"].is_array() && !s["enum"].empty()) {
    std::vector<std::string> values;
    for (const auto& v : s["enum"]) values.push_back(as_text(v));
    return b.literal_set(values);
  }
  if (s.is_object() && s.contains("const")) return b.literal(as_text(s["const"]));
  if (s.is_object() && (s.contains("maxLength") || s.contains("minLength"))) {
    CodepointSet lt;
    lt.add('<');
    const CodepointSet chars = CodepointSet::all().intersect(lt.complement());
    const auto bound = [&](const char* k, int64_t dflt) {
      auto it = s.find(k);
      if (it == s.end()) return dflt;
      if (!it->is_number_unsigned())
        throw Error(std::string(k) + " must be a non-negative integer");
      return it->get<int64_t>();
    };
    return b.repeat(utf8_expr(b, chars), bound("minLength", 0), bound("maxLength", kUnbounded));
  }
  return text;
}

// <parameter=...> blocks of one function (qwen3_xml). text: any value text without
// "</parameter>" (text_without, made once for all the functions).
ExprId xml_parameters(Builder& b, const ojson& params, const std::string& fn, ExprId text) {
  const auto open = [&](const std::string& name) {
    return b.literal("<parameter=" + name + ">\n");
  };
  const ExprId close = b.literal("\n</parameter>\n");
  const auto props = params.is_object() ? params.find("properties") : params.end();
  const bool plain = props != params.end() && props->is_object() && !params.contains("$ref") &&
                     !params.contains("anyOf") && !params.contains("oneOf") &&
                     !params.contains("allOf");
  if (!plain) {
    // Any parameter names (printable ASCII but '<', '=' and '>'), raw values.
    ByteSet name;
    for (uint8_t c = 0x21; c <= 0x7e; ++c)
      if (c != '<' && c != '=' && c != '>') name.add(c);
    return b.star(
        b.seq({b.literal("<parameter="), b.plus(b.bytes(name)), b.literal(">\n"), text, close}));
  }
  std::vector<std::string> required;
  if (auto r = params.find("required"); r != params.end() && r->is_array())
    for (const auto& x : *r)
      if (x.is_string()) required.push_back(x.get<std::string>());
  std::vector<ExprId> parts;
  for (auto it = props->begin(); it != props->end(); ++it) {
    const std::string& p = it.key();
    if (p.empty() || p.find_first_of("<>\n") != std::string::npos)
      throw Error("tool_calls: function '" + fn +
                  "' has a parameter name the XML form cannot "
                  "write: '" +
                  p + "'");
    ExprId value;
    if (raw_value(it.value())) {
      value = raw_expr(b, it.value(), text);
    } else {
      ojson sub = it.value();
      // Local references point into the parameters schema: carry its definitions along.
      for (const char* defs : {"$defs", "definitions"})
        if (params.contains(defs) && sub.is_object() && !sub.contains(defs))
          sub[defs] = params[defs];
      value = b.ref(json_schema_rules(b, sub, "param"));
    }
    const ExprId block = b.seq({open(p), value, close});
    const bool req = std::find(required.begin(), required.end(), p) != required.end();
    parts.push_back(req ? block : b.opt(block));
  }
  return b.seq(std::move(parts));
}

}  // namespace

RuleId tool_calls_rules(Builder& b, const ojson& spec) {
  if (!spec.is_object()) throw Error("tool_calls: the spec must be an object");
  const std::string syntax = string_member(spec, "syntax", "the spec");
  if (syntax != "hermes" && syntax != "qwen3_xml")
    throw Error("tool_calls: syntax must be hermes or qwen3_xml, not '" + syntax + "'");
  const bool parallel = spec.value("parallel", false);
  auto tools = spec.find("tools");
  if (tools == spec.end() || !tools->is_array() || tools->empty())
    throw Error("tool_calls: 'tools' must be a non-empty array");
  std::vector<ExprId> calls;
  const ExprId xml_text = syntax == "qwen3_xml" ? text_without(b, "</parameter>") : -1;
  for (size_t i = 0; i < tools->size(); ++i) {
    const ojson& t = (*tools)[i];
    if (!t.is_object()) throw Error("tool_calls: tools[" + std::to_string(i) + "] is no object");
    const std::string name = string_member(t, "name", "tools[" + std::to_string(i) + "]");
    auto p = t.find("parameters");
    const bool any = p == t.end() || p->is_null();
    try {
      if (syntax == "hermes") {
        // A call's arguments are the listed parameters only unless the schema says otherwise
        // (OpenAI's strict function calling; XGrammar's strict mode): JSON Schema's default of
        // any extra property would let a weak model write keys until max_tokens.
        ojson params = any ? ojson() : *p;
        if (params.is_object() && !params.contains("additionalProperties") &&
            params.contains("properties"))
          params["additionalProperties"] = false;
        const RuleId args = any ? json_object_rules(b) : json_schema_rules(b, params, "arguments");
        calls.push_back(b.seq({b.literal("{\"name\":" + ojson(name).dump() + ",\"arguments\":"),
                               b.ref(args), b.literal("}")}));
      } else {
        if (name.find_first_of("<>\n") != std::string::npos)
          throw Error("the XML form cannot write this function name");
        calls.push_back(b.seq({b.literal("<function=" + name + ">\n"),
                               xml_parameters(b, any ? ojson::object() : *p, name, xml_text),
                               b.literal("</function>")}));
      }
    } catch (const LimitError&) {
      throw;
    } catch (const Error& e) {
      throw Error("tool_calls: function '" + name + "': " + e.what());
    }
  }
  const RuleId call = b.fresh_rule("tool-call");
  b.define(call, b.seq({b.literal("<tool_call>\n"), b.alt(std::move(calls)),
                        b.literal("\n</tool_call>")}));
  const ExprId all =
      parallel ? b.seq({b.ref(call), b.star(b.seq({b.literal("\n"), b.ref(call)}))}) : b.ref(call);
  const RuleId root = b.rule("root");
  // text_first (tool_choice auto with strict tools): any text without the opener, then the
  // calls or nothing, so the model still chooses whether to call; a call it opens parses.
  if (spec.value("text_first", false))
    b.define(root, b.seq({text_without(b, "<tool_call>"), b.opt(all)}));
  else
    b.define(root, all);
  return root;
}

}  // namespace invar::grammar
