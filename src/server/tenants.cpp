#include "server/tenants.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <set>

#include "core/error.h"

namespace invar::server {

namespace {

bool name_valid(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (const char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

}  // namespace

namespace {

std::array<unsigned char, 32> sha256_of(std::string_view s) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d.data());
  return d;
}

}  // namespace

const Tenant* Tenants::find(std::string_view authorization) const {
  const auto d = sha256_of(authorization);
  const Tenant* found = nullptr;
  for (const Tenant& t : list)
    if (CRYPTO_memcmp(d.data(), t.digest.data(), d.size()) == 0 && !found) found = &t;
  return found;
}

Tenants tenants_load(const std::string& api_key, const std::string& api_key_file) {
  Tenants t;
  if (!api_key.empty()) t.list.push_back({"default", api_key, sha256_of("Bearer " + api_key)});
  if (api_key_file.empty()) return t;
  std::ifstream in(api_key_file);
  if (!in) throw Error("--api-key-file " + api_key_file + ": cannot open");
  std::set<std::string> names, keys;
  for (const Tenant& d : t.list) {
    names.insert(d.name);
    keys.insert(d.key);
  }
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    const std::string where = "--api-key-file " + api_key_file + " line " + std::to_string(n);
    Tenant tenant;
    if (const auto sp = line.find_first_of(" \t"); sp != std::string::npos) {
      tenant.name = line.substr(0, sp);
      tenant.key = line.substr(line.find_first_not_of(" \t", sp));
    } else {
      tenant.name = "key" + std::to_string(n);
      tenant.key = line;
    }
    if (!name_valid(tenant.name)) throw Error(where + ": a tenant name is 1-64 of [A-Za-z0-9._-]");
    if (tenant.key.size() < 16 || tenant.key.find_first_of(" \t") != std::string::npos)
      throw Error(where + ": a key is at least 16 characters without blanks");
    if (!names.insert(tenant.name).second)
      throw Error(where + ": tenant " + tenant.name + " twice");
    if (!keys.insert(tenant.key).second) throw Error(where + ": a key given twice");
    tenant.digest = sha256_of("Bearer " + tenant.key);
    t.list.push_back(std::move(tenant));
  }
  if (t.list.empty()) throw Error("--api-key-file " + api_key_file + ": no key in it");
  return t;
}

std::string tenant_cache_salt(const Tenant* tenant, const std::string& salt) {
  if (!tenant) return salt;
  return "tenant:" + std::to_string(tenant->name.size()) + ":" + tenant->name + ":" + salt;
}

}  // namespace invar::server
