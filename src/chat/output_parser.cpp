#include "chat/output_parser.h"

#include <initializer_list>
#include <random>

namespace invar::chat {
namespace {

constexpr std::string_view kThinkOpen = "<think>", kThinkClose = "</think>";
constexpr std::string_view kCallOpen = "<tool_call>", kCallClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";
constexpr std::string_view kParamOpen = "<parameter=", kParamClose = "</parameter>";
constexpr size_t kMaxNameBytes = 256;  // a longer <function=…> / <parameter=…> name is not one

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

size_t ws_prefix(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_ws(s[i])) ++i;
  return i;
}

// The length of the longest end of `s` that could be the start of one of `markers`.
size_t held_prefix(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t n = std::min(s.size(), m.size() - 1); n > best; --n) {
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

bool is_proper_prefix_of(std::string_view s, std::string_view marker) {
  return s.size() < marker.size() && marker.substr(0, s.size()) == s;
}

std::string random_call_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char* hex = "0123456789abcdef";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += hex[rng() & 15];
  return id;
}

// The raw text of an XML parameter value: one newline after the tag and one before the closing
// tag belong to the format, not the value.
std::string parameter_raw(std::string_view v) {
  if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
  if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
  return std::string(v);
}

}  // namespace

void OutputDelta::append(OutputDelta&& more) {
  content += more.content;
  reasoning += more.reasoning;
  for (ToolCallDelta& c : more.tool_calls) {
    if (!tool_calls.empty() && tool_calls.back().index == c.index && c.id.empty())
      tool_calls.back().arguments += c.arguments;
    else
      tool_calls.push_back(std::move(c));
  }
}

OutputParser::OutputParser(OutputParserOptions opt) : opt_(std::move(opt)) {
  if (!opt_.make_id) opt_.make_id = [](size_t) { return random_call_id(); };
}

OutputDelta OutputParser::feed(std::string_view text) {
  buf_ += text;
  OutputDelta d;
  while (step(d, false)) {
  }
  record(d);
  return d;
}

OutputDelta OutputParser::finish() {
  OutputDelta d;
  while (step(d, true)) {
  }
  if (calls_.empty() && d.tool_calls.empty()) d.content += content_ws_;
  content_ws_.clear();
  record(d);
  return d;
}

void OutputParser::record(const OutputDelta& d) {
  all_content_ += d.content;
  all_reasoning_ += d.reasoning;
  for (const ToolCallDelta& c : d.tool_calls) {
    if (c.index >= calls_.size()) calls_.resize(c.index + 1);
    if (!c.id.empty()) calls_[c.index].id = c.id, calls_[c.index].name = c.name;
    calls_[c.index].arguments += c.arguments;
  }
}

bool OutputParser::step(OutputDelta& d, bool at_end) {
  switch (state_) {
    case State::start:
      return step_start(at_end);
    case State::reasoning:
      return step_reasoning(d, at_end);
    case State::content:
      return step_content(d, at_end);
    case State::call_open:
      return step_call_open(d, at_end);
    case State::call_json:
      return step_call_json(d, at_end);
    case State::call_xml:
      return step_call_xml(d, at_end);
  }
  return false;
}

bool OutputParser::step_start(bool at_end) {
  if (!opt_.reasoning) {
    state_ = State::content;
    return true;
  }
  if (!at_end && (buf_.empty() || is_proper_prefix_of(buf_, kThinkOpen))) return false;
  bool opened = buf_.starts_with(kThinkOpen);
  if (opened) buf_.erase(0, kThinkOpen.size());
  state_ = opened || opt_.starts_in_reasoning ? State::reasoning : State::content;
  return true;
}

bool OutputParser::step_reasoning(OutputDelta& d, bool at_end) {
  size_t close = buf_.find(kThinkClose), call = buf_.find(kCallOpen);
  if (close != std::string::npos && (call == std::string::npos || close < call)) {
    emit_reasoning(d, std::string_view(buf_).substr(0, close));
    buf_.erase(0, close + kThinkClose.size());
    state_ = State::content;
    skip_ws_ = true;
    return true;
  }
  if (call != std::string::npos) {
    // <tool_call> ends reasoning only when <function follows (a thought may mention the tag).
    std::string_view after = std::string_view(buf_).substr(call + kCallOpen.size());
    after.remove_prefix(ws_prefix(after));
    constexpr std::string_view kFunction = "<function";
    bool confirmed = after.size() > kFunction.size() && after.starts_with(kFunction) &&
                     (after[kFunction.size()] == '=' || is_ws(after[kFunction.size()]));
    bool undecided = !confirmed && (after.size() <= kFunction.size()) &&
                     kFunction.substr(0, after.size()) == after;
    if (confirmed) {
      emit_reasoning(d, std::string_view(buf_).substr(0, call));
      buf_.erase(0, call);
      state_ = State::content;
      return true;
    }
    if (undecided && !at_end) {
      emit_reasoning(d, std::string_view(buf_).substr(0, call));
      buf_.erase(0, call);
      return false;
    }
    emit_reasoning(d, std::string_view(buf_).substr(0, call + kCallOpen.size()));
    buf_.erase(0, call + kCallOpen.size());
    return true;
  }
  size_t keep = at_end ? 0 : held_prefix(buf_, {kThinkClose, kCallOpen});
  emit_reasoning(d, std::string_view(buf_).substr(0, buf_.size() - keep));
  buf_.erase(0, buf_.size() - keep);
  return false;
}

bool OutputParser::step_content(OutputDelta& d, bool at_end) {
  if (opt_.tool_calls == ToolCallSyntax::none) {
    emit_content(d, buf_);
    buf_.clear();
    return false;
  }
  size_t call = buf_.find(kCallOpen);
  if (call != std::string::npos) {
    emit_content(d, std::string_view(buf_).substr(0, call));
    call_text_ = content_ws_ + std::string(kCallOpen);  // restored if the block is no call
    content_ws_.clear();
    buf_.erase(0, call + kCallOpen.size());
    state_ = State::call_open;
    return true;
  }
  size_t keep = at_end ? 0 : held_prefix(buf_, {kCallOpen});
  emit_content(d, std::string_view(buf_).substr(0, buf_.size() - keep));
  buf_.erase(0, buf_.size() - keep);
  return false;
}

bool OutputParser::step_call_open(OutputDelta& d, bool at_end) {
  size_t ws = ws_prefix(buf_);
  call_text_ += buf_.substr(0, ws);
  buf_.erase(0, ws);
  if (buf_.empty()) {
    if (!at_end) return false;
    call_abandon(d);
    return true;
  }
  if (opt_.tool_calls == ToolCallSyntax::hermes) {
    if (buf_[0] != '{') return call_abandon(d), true;
    state_ = State::call_json;
    return true;
  }
  if (!buf_.starts_with(kFunctionOpen)) {
    if (!at_end && is_proper_prefix_of(buf_, kFunctionOpen)) return false;
    return call_abandon(d), true;
  }
  size_t gt = buf_.find('>', kFunctionOpen.size());
  size_t name_len =
      gt == std::string::npos ? buf_.size() - kFunctionOpen.size() : gt - kFunctionOpen.size();
  std::string name = buf_.substr(kFunctionOpen.size(), name_len);
  bool bad_name = name_len > kMaxNameBytes || name.find_first_of("<\n") != std::string::npos;
  if (gt == std::string::npos && !bad_name && !at_end) return false;
  if (gt == std::string::npos || bad_name || name.empty()) return call_abandon(d), true;
  buf_.erase(0, gt + 1);
  call_text_.clear();
  call_begin(d, std::move(name));
  params_any_ = false;
  function_closed_ = false;
  state_ = State::call_xml;
  return true;
}

bool OutputParser::step_call_json(OutputDelta& d, bool at_end) {
  size_t close = buf_.find(kCallClose);
  if (close == std::string::npos && !at_end) return false;
  size_t body_len = close == std::string::npos ? buf_.size() : close;
  size_t used = close == std::string::npos ? buf_.size() : close + kCallClose.size();
  std::string name, arguments;
  bool ok = tool_call_from_json(std::string_view(buf_).substr(0, body_len), &name, &arguments);
  call_text_ += buf_.substr(0, used);
  buf_.erase(0, used);
  if (!ok) return call_abandon(d), true;
  call_text_.clear();
  call_begin(d, std::move(name));
  call_arguments(d, arguments);
  state_ = State::content;
  skip_ws_ = true;
  return true;
}

bool OutputParser::step_call_xml(OutputDelta& d, bool at_end) {
  auto close_function = [&] {
    if (!function_closed_) call_arguments(d, params_any_ ? "}" : "{}");
    function_closed_ = true;
  };
  auto end_call = [&] {
    close_function();
    state_ = State::content;
    skip_ws_ = true;
  };
  if (function_closed_) {  // only </tool_call> matters now
    size_t close = buf_.find(kCallClose);
    if (close != std::string::npos) {
      buf_.erase(0, close + kCallClose.size());
      return end_call(), true;
    }
    if (at_end) return buf_.clear(), end_call(), true;
    buf_.erase(0, buf_.size() - held_prefix(buf_, {kCallClose}));
    return false;
  }
  buf_.erase(0, ws_prefix(buf_));
  if (buf_.starts_with(kParamOpen)) {
    size_t gt = buf_.find('>', kParamOpen.size());
    if (gt == std::string::npos || gt - kParamOpen.size() > kMaxNameBytes) {
      if (at_end || buf_.size() > kParamOpen.size() + kMaxNameBytes) return end_call(), true;
      return false;
    }
    size_t close = buf_.find(kParamClose, gt + 1);
    if (close == std::string::npos && !at_end) return false;
    std::string param = buf_.substr(kParamOpen.size(), gt - kParamOpen.size());
    size_t value_end = close == std::string::npos ? buf_.size() : close;
    std::string raw = parameter_raw(std::string_view(buf_).substr(gt + 1, value_end - gt - 1));
    std::string piece = params_any_ ? "," : "{";
    piece += json_compact(param) + ":" +
             json_compact(tool_parameter_value(opt_.tools, calls_pending_name_, param, raw));
    call_arguments(d, piece);
    params_any_ = true;
    buf_.erase(0, close == std::string::npos ? buf_.size() : close + kParamClose.size());
    return true;
  }
  if (buf_.starts_with(kFunctionClose)) {
    buf_.erase(0, kFunctionClose.size());
    return close_function(), true;
  }
  if (buf_.starts_with(kCallClose)) {  // </function> was left out
    buf_.erase(0, kCallClose.size());
    return end_call(), true;
  }
  if (buf_.empty() || (!at_end && (is_proper_prefix_of(buf_, kParamOpen) ||
                                   is_proper_prefix_of(buf_, kFunctionClose) ||
                                   is_proper_prefix_of(buf_, kCallClose)))) {
    if (at_end) end_call();
    return false;
  }
  // Text that is no part of the format between parameters: skipped.
  size_t next = buf_.find('<', 1);
  buf_.erase(0, next == std::string::npos ? buf_.size() : next);
  return true;
}

void OutputParser::emit_content(OutputDelta& d, std::string_view text) {
  if (skip_ws_) {
    text.remove_prefix(ws_prefix(text));
    if (text.empty()) return;
    skip_ws_ = false;
  }
  if (text.empty()) return;
  size_t end = text.size();
  while (end > 0 && is_ws(text[end - 1])) --end;
  if (end == 0) {
    content_ws_ += text;
    return;
  }
  d.content += content_ws_;
  d.content += text.substr(0, end);
  content_ws_ = std::string(text.substr(end));
}

void OutputParser::emit_reasoning(OutputDelta& d, std::string_view text) {
  d.reasoning += text;
}

void OutputParser::call_begin(OutputDelta& d, std::string name) {
  ToolCallDelta c;
  c.index = calls_.size() + calls_in_delta(d);
  c.id = opt_.make_id(c.index);
  c.name = name;
  calls_pending_name_ = std::move(name);
  d.tool_calls.push_back(std::move(c));
}

void OutputParser::call_arguments(OutputDelta& d, const std::string& piece) {
  ToolCallDelta c;
  c.index = calls_.size() + calls_in_delta(d) - 1;
  c.arguments = piece;
  OutputDelta more;
  more.tool_calls.push_back(std::move(c));
  d.append(std::move(more));
}

size_t OutputParser::calls_in_delta(const OutputDelta& d) const {
  size_t n = 0;
  for (const ToolCallDelta& c : d.tool_calls) n += !c.id.empty();
  return n;
}

void OutputParser::call_abandon(OutputDelta& d) {
  std::string text = std::move(call_text_);
  call_text_.clear();
  state_ = State::content;
  emit_content(d, text);
}

}  // namespace invar::chat
