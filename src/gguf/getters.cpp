// Typed metadata lookups: a missing key or a value of the wrong type is a user-facing error
// naming the key, the type found and the type wanted.
#include <limits>

#include "gguf/gguf.h"

namespace invar {

namespace {

bool is_int(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::UINT16:
    case GgufType::INT16:
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::UINT64:
    case GgufType::INT64:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void wrong_type(std::string_view key, const GgufValue& v, const char* wanted) {
  std::string got(gguf_type_name(v.type));
  if (v.type == GgufType::ARRAY) got += " of " + std::string(gguf_type_name(v.elem_type));
  throw GgufError("gguf: key '" + std::string(key) + "' has type " + got + ", expected " + wanted);
}

const GgufValue& must_find(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (!v) throw GgufError("gguf: missing required key '" + std::string(key) + "'");
  return *v;
}

int64_t as_int(std::string_view key, const GgufValue& v) {
  if (!is_int(v.type)) wrong_type(key, v, "an integer");
  if (!gguf_type_is_unsigned(v.type)) return v.i64;
  if (v.u64 > uint64_t(std::numeric_limits<int64_t>::max()))
    throw GgufError("gguf: key '" + std::string(key) + "' = " + std::to_string(v.u64) +
                    " is out of range");
  return int64_t(v.u64);
}
double as_float(std::string_view key, const GgufValue& v) {
  if (!gguf_type_is_float(v.type)) wrong_type(key, v, "float32 or float64");
  return v.f64;
}
bool as_bool(std::string_view key, const GgufValue& v) {
  if (v.type != GgufType::BOOL) wrong_type(key, v, "bool");
  return v.u64 != 0;
}
std::string as_string(std::string_view key, const GgufValue& v) {
  if (v.type != GgufType::STRING) wrong_type(key, v, "string");
  return v.str;
}

}  // namespace

const GgufValue* GgufFile::find(std::string_view key) const {
  for (const auto& kv : kvs_)
    if (kv.key == key) return &kv.value;
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

std::string GgufFile::get_string(std::string_view key) const {
  return as_string(key, must_find(*this, key));
}
int64_t GgufFile::get_int(std::string_view key) const {
  return as_int(key, must_find(*this, key));
}
double GgufFile::get_float(std::string_view key) const {
  return as_float(key, must_find(*this, key));
}
bool GgufFile::get_bool(std::string_view key) const {
  return as_bool(key, must_find(*this, key));
}

std::vector<std::string> GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = must_find(*this, key);
  if (v.type != GgufType::ARRAY || v.elem_type != GgufType::STRING)
    wrong_type(key, v, "array of string");
  return v.arr_str;
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = must_find(*this, key);
  if (v.type != GgufType::ARRAY || !(is_int(v.elem_type) || v.elem_type == GgufType::BOOL))
    wrong_type(key, v, "array of integers");
  return v.arr_int;
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue& v = must_find(*this, key);
  if (v.type != GgufType::ARRAY || !gguf_type_is_float(v.elem_type))
    wrong_type(key, v, "array of float32 or float64");
  return v.arr_float;
}

int64_t GgufFile::get_int_or(std::string_view key, int64_t def) const {
  const GgufValue* v = find(key);
  return v ? as_int(key, *v) : def;
}
double GgufFile::get_float_or(std::string_view key, double def) const {
  const GgufValue* v = find(key);
  return v ? as_float(key, *v) : def;
}
bool GgufFile::get_bool_or(std::string_view key, bool def) const {
  const GgufValue* v = find(key);
  return v ? as_bool(key, *v) : def;
}
std::string GgufFile::get_string_or(std::string_view key, std::string def) const {
  const GgufValue* v = find(key);
  return v ? as_string(key, *v) : def;
}

}  // namespace invar
