// Every block scale of a GGUF file is finite (issue 29): a NaN or Inf scale (an F16 d, m or dmin
// field of a quantised block, or a value of an F32/F16/BF16 tensor, whose values are their own
// scales) makes every product with its row NaN, and the logits with it. Such a file is refused
// at load, naming the tensor, the block and the field, instead of serving NaN.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/gguf.h"

namespace invar {

struct NonFiniteScale {
  std::string tensor;
  int64_t block = 0;  // block index in the tensor (element index for F32/F16/BF16)
  std::string field;  // "d", "m" / "dmin", or "value"
  float value = 0;    // the field's value (NaN or ±Inf)
};

// The first non-finite scale of a tensor, scanning its blocks in order. Cost: one read of each
// F16 scale field (2–4 bytes of every 18–210-byte block, which still faults in every page of the
// tensor), and of every element of an F32/F16/BF16 tensor.
std::optional<NonFiniteScale> first_nonfinite_scale(const GgufTensorInfo& t);

// Throws GgufError "tensor 'NAME' block B: scale FIELD is VALUE ..." for the first non-finite
// scale of the file, in tensor order.
void check_finite_scales(const GgufFile& f);

}  // namespace invar
