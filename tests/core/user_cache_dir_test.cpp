// The user's cache directory follows the XDG rule: $XDG_CACHE_HOME/invar when it is absolute,
// else $HOME/.cache/invar, else none (never a path relative to the working directory).
#include "core/user_cache_dir.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace user_cache_dir_test {

// Sets (or unsets, nullopt) an environment variable for the scope, then restores it.
class EnvScope {
 public:
  EnvScope(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      setenv(name, value->c_str(), 1);
    else
      unsetenv(name);
  }
  ~EnvScope() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(UserCacheDir, FollowsTheXdgRule) {
  {
    EnvScope xdg("XDG_CACHE_HOME", "/x/cache");
    EnvScope home("HOME", "/home/u");
    EXPECT_EQ(invar::user_cache_dir(), "/x/cache/invar");
  }
  {
    EnvScope xdg("XDG_CACHE_HOME", "relative/cache");  // not absolute: ignored, as XDG says
    EnvScope home("HOME", "/home/u");
    EXPECT_EQ(invar::user_cache_dir(), "/home/u/.cache/invar");
  }
  {
    EnvScope xdg("XDG_CACHE_HOME", std::nullopt);
    EnvScope home("HOME", "/home/u");
    EXPECT_EQ(invar::user_cache_dir(), "/home/u/.cache/invar");
  }
  {
    EnvScope xdg("XDG_CACHE_HOME", std::nullopt);
    EnvScope home("HOME", std::nullopt);
    EXPECT_EQ(invar::user_cache_dir(), "");
  }
}

}  // namespace user_cache_dir_test
