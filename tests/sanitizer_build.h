// Whether this test binary is a sanitizer build (`make test-sanitize`). ASan and TSan keep
// shadow memory and quarantined or delayed frees resident, so a bound on the process's resident
// memory measures the sanitizer there, not the code: such bounds are checked by the release tree
// only (a test whose only check is one is not built in a sanitizer tree, tests/server).
#pragma once

namespace invar::test {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

}  // namespace invar::test
