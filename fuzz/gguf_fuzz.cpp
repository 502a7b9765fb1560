// libFuzzer target for the GGUF reader and the hyper-parameter validation: any byte string must
// either parse or raise GgufError/Error; a crash, a sanitizer report, an uncaught exception of
// another type (std::bad_alloc from an unchecked count) or an allocation over -malloc_limit_mb
// is a bug.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf.h"
#include "model/hparams.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<invar::GgufFile> f;
  try {
    f = invar::GgufFile::from_memory(data, size);
  } catch (const invar::GgufError&) {
    return 0;
  }
  // Touch the first and last byte of every tensor: the sanitizer checks the bounds the reader
  // promised.
  unsigned sum = 0;
  for (const auto& t : f->tensors()) {
    if (t.n_bytes) sum += t.data[0] + t.data[t.n_bytes - 1];
  }
  try {
    (void)f->get_string_or("general.architecture", "");
    (void)f->get_int_or("general.alignment", 0);
    const invar::Hparams hp = invar::hparams_from_gguf(*f);
    sum += unsigned(invar::hparams_describe(hp).size());
  } catch (const invar::Error&) {
  }
  return sum == 0xdeadbeef ? -1 : 0;  // keeps `sum` observable
}
