#include "chat/content_format.h"

#include <deque>
#include <functional>
#include <set>
#include <vector>

#include "chat/ast.h"
#include "chat/lexer.h"
#include "chat/parser.h"
#include "chat/template_error.h"
#include "core/error.h"

namespace invar::chat {
namespace {

using ojson = nlohmann::ordered_json;

// vLLM's assertion that a target is a plain name: when it fails, its walk ends.
struct WalkStopped {};

// Visits every node below `body` in jinja2's find_all order (depth first, each node before its
// children, children in the order of jinja2's node fields) until `f` returns true; returns
// whether it did.
using Visit = std::function<bool(const Node&)>;
bool each_node(const std::vector<NodePtr>& body, const Visit& f);

bool each_node(const Node& n, const Visit& f) {
  if (f(n)) return true;
  auto kid = [&](const NodePtr& k) { return k && each_node(*k, f); };
  if (n.kind == NodeKind::For)  // jinja2: target, iter, body, else_, test
    return kid(n.kids[0]) || kid(n.kids[1]) || each_node(n.body, f) || each_node(n.orelse, f) ||
           kid(n.kids[2]);
  if (n.kind == NodeKind::FilterBlock)  // jinja2: body, filter
    return each_node(n.body, f) || kid(n.kids[0]);
  for (const NodePtr& k : n.kids)
    if (kid(k)) return true;
  for (const auto& kw : n.kwargs)
    if (kid(kw.second)) return true;
  if (kid(n.star_args) || kid(n.star_kwargs)) return true;
  for (const NodePtr& d : n.defaults)
    if (kid(d)) return true;
  return each_node(n.body, f) || each_node(n.orelse, f);
}

bool each_node(const std::vector<NodePtr>& body, const Visit& f) {
  for (const NodePtr& n : body)
    if (n && each_node(*n, f)) return true;
  return false;
}

bool is_name(const Node* n, const std::string& name) {
  return n && n->kind == NodeKind::Name && n->name == name;
}

// var.key or var['key'].
bool is_attr_access(const Node* n, const std::string& var, const std::string& key) {
  if (!n) return false;
  if (n->kind == NodeKind::Getattr) return is_name(n->kids[0].get(), var) && n->name == key;
  if (n->kind == NodeKind::Getitem) {
    const Node* arg = n->kids[1].get();
    return is_name(n->kids[0].get(), var) && arg && arg->kind == NodeKind::Const &&
           arg->value.is_string() && arg->value.str() == key;
  }
  return false;
}

// var (or var.key), possibly through filters, tests and slices: vLLM's
// _is_var_or_elems_access.
bool is_var_or_elems_access(const Node* n, const std::string& var, const std::string* key) {
  if (!n) return false;
  if (n->kind == NodeKind::Filter || n->kind == NodeKind::Test)
    return is_var_or_elems_access(n->kids[0].get(), var, key);
  if (n->kind == NodeKind::Getitem && n->kids[1] && n->kids[1]->kind == NodeKind::Slice)
    return is_var_or_elems_access(n->kids[0].get(), var, key);
  return key ? is_attr_access(n, var, *key) : is_name(n, var);
}

const std::string& target_name(const Node& target) {
  if (target.kind != NodeKind::Name) throw WalkStopped{};
  return target.name;
}

// `messages` and the names assigned from a message list, breadth first as vLLM's walk.
std::vector<std::string> message_list_names(const std::vector<NodePtr>& body) {
  std::vector<std::string> names = {"messages"};
  std::deque<std::string> pending = {"messages"};
  std::set<std::string> queued = {"messages"};  // vLLM loops for ever on a = b; b = a
  while (!pending.empty()) {
    const std::string from = pending.front();
    pending.pop_front();
    each_node(body, [&](const Node& n) {
      if (n.kind != NodeKind::Set || !is_var_or_elems_access(n.kids[1].get(), from, nullptr))
        return false;
      const std::string& to = target_name(*n.kids[0]);
      names.push_back(to);
      if (to != from && queued.insert(to).second) pending.push_back(to);
      return false;
    });
  }
  return names;
}

// The targets of the loops over a message list.
std::vector<std::string> message_names(const std::vector<NodePtr>& body) {
  const std::vector<std::string> lists = message_list_names(body);
  std::vector<std::string> names;
  each_node(body, [&](const Node& n) {
    if (n.kind != NodeKind::For) return false;
    for (const std::string& list : lists) {
      if (is_var_or_elems_access(n.kids[1].get(), list, nullptr)) {
        names.push_back(target_name(*n.kids[0]));
        break;
      }
    }
    return false;
  });
  return names;
}

// Whether a loop iterates a message's content parts (the first such loop ends the walk).
bool iterates_content(const std::vector<NodePtr>& body) {
  const std::vector<std::string> messages = message_names(body);
  const std::string content = "content";
  return each_node(body, [&](const Node& n) {
    if (n.kind != NodeKind::For) return false;
    bool found = is_name(n.kids[1].get(), content);
    for (const std::string& m : messages)
      found = found || is_var_or_elems_access(n.kids[1].get(), m, &content);
    if (found) target_name(*n.kids[0]);
    return found;
  });
}

// The text a part adds to the joined string: a text part's text, or a bare string.
const std::string* part_text(const ojson& part) {
  if (part.is_string()) return &part.get_ref<const std::string&>();
  if (part.is_object()) {
    auto it = part.find("text");
    if (it != part.end() && it->is_string()) return &it->get_ref<const std::string&>();
  }
  return nullptr;
}

}  // namespace

ContentFormat content_format_detect(const std::string& source) {
  std::vector<NodePtr> body;
  try {
    body = parse(lex(source));
  } catch (const TemplateError&) {
    return ContentFormat::string;
  }
  try {
    return iterates_content(body) ? ContentFormat::openai : ContentFormat::string;
  } catch (const WalkStopped&) {
    return ContentFormat::string;
  }
}

std::optional<ContentFormat> content_format_parse(const std::string& name) {
  if (name == "auto") return std::nullopt;
  if (name == "string") return ContentFormat::string;
  if (name == "openai") return ContentFormat::openai;
  throw Error("--chat-template-content-format must be auto, string or openai, not '" + name + "'");
}

const char* content_format_name(ContentFormat f) {
  return f == ContentFormat::openai ? "openai" : "string";
}

void content_format_apply(ContentFormat f, ojson& messages) {
  if (!messages.is_array()) return;
  for (ojson& m : messages) {
    if (!m.is_object()) continue;
    auto it = m.find("content");
    if (it == m.end() || it->is_null()) {
      m["content"] = f == ContentFormat::string ? ojson("") : ojson::array();
    } else if (f == ContentFormat::string && it->is_array()) {
      std::string text;
      bool first = true;
      for (const ojson& part : *it) {
        const std::string* t = part_text(part);
        if (!t) continue;
        if (!first) text += "\n";
        first = false;
        text += *t;
      }
      *it = text;
    }
  }
}

}  // namespace invar::chat
