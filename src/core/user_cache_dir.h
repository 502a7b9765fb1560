// Where invar keeps what it makes for the user between runs (the model SHA-256 cache, the demo
// model of `invar serve` without --model): the XDG base-directory rule, never the working
// directory.
#pragma once

#include <string>

namespace invar {

// $XDG_CACHE_HOME/invar, else $HOME/.cache/invar (absolute paths only, as the XDG rule asks);
// "" when neither is set.
std::string user_cache_dir();

}  // namespace invar
