// `invar make-model` and `invar inspect` through the binary.
#include <gtest/gtest.h>

#include "gguf_test_util.h"

namespace invar {
namespace {

TEST(GgufCli, Placeholder) { SUCCEED(); }

}  // namespace
}  // namespace invar
