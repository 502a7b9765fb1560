// Tenants: who holds which API key. Each key is a tenant; the prefix cache, the grammar compile
// cache and the image encode cache are namespaced by it, so no tenant can hit, time or count
// another's entries (docs/security.md). With one key, or none, every request is the same tenant
// and shares one cache — as vLLM's `cache_salt`, a salt then isolates only what a client asks.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace invar::server {

struct Tenant {
  std::string name;  // for the log and the caches' namespaces: [A-Za-z0-9._-], ≤ 64
  std::string key;   // the bearer token, never logged
  std::array<unsigned char, 32> digest{};  // SHA-256 of "Bearer " + key (tenants_load)
};

struct Tenants {
  std::vector<Tenant> list;  // empty: no auth
  // The tenant whose key `authorization` ("Bearer KEY", the whole value) presents; null if
  // none does. One hash of the header, then every key's digest compared in constant time, so the
  // time says nothing of which key came close.
  const Tenant* find(std::string_view authorization) const;
};

// --api-key KEY (the tenant "default") and --api-key-file FILE: one tenant per line, `NAME KEY`
// or `KEY` alone (named `key<line>`); blank lines and `#` comments skipped. Throws Error naming
// the line for a malformed one, a duplicate name or key, or a key under 16 bytes in a file.
Tenants tenants_load(const std::string& api_key, const std::string& api_key_file);

// The prefix-cache salt a request computes under: its tenant's namespace, then its own
// cache_salt inside it (length-prefixed: no two (tenant, salt) pairs give one string). Without a
// tenant (no auth), the request's salt alone.
std::string tenant_cache_salt(const Tenant* tenant, const std::string& salt);

}  // namespace invar::server
