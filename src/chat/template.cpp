#include "chat/template.h"

namespace invar::chat {

Template::Template(const std::string& source, const TemplateOptions& opt)
    : body_(parse(lex(source, opt.lex), opt.parse)), opt_(opt) {}

Value value_from_json(const nlohmann::ordered_json& j, int max_depth) {
  if (max_depth <= 0) throw EvalError("JSON input nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& x : j) a.push_back(value_from_json(x, max_depth - 1));
      return Value::array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (const auto& [k, x] : j.items())
        o.set(Value::string(k), value_from_json(x, max_depth - 1));
      return Value::object(std::move(o));
    }
    default:
      throw EvalError("unsupported JSON value");
  }
}

std::string format_time(const std::tm& t, const std::string& format) {
  if (format.empty()) return "";
  std::vector<char> buf(format.size() * 8 + 256);
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &t);
  return std::string(buf.data(), n);
}

std::string Template::render(const nlohmann::ordered_json& context,
                             const std::optional<std::tm>& now) const {
  if (!context.is_object()) throw Error("template context must be a JSON object");
  Object vars;
  try {
    for (const auto& [k, x] : context.items()) vars.set(Value::string(k), value_from_json(x));
  } catch (const EvalError& e) {
    throw TemplateError(TemplateError::Kind::Runtime, e.what(), 0, 0);
  }
  auto strftime = [now](const std::string& fmt) {
    std::tm t{};
    if (now) {
      t = *now;
    } else {
      const std::time_t s = std::time(nullptr);
      localtime_r(&s, &t);
    }
    return format_time(t, fmt);
  };
  Interp in(vars, opt_.render, strftime);
  return in.render(body_);
}

}  // namespace invar::chat
