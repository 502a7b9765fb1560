// The q8 profile's AVX2 kernels (vpmaddubsw / vpmaddwd).
#include "kernels/matmul/q8_act_simd.h"

namespace invar {

constinit const Q8Kernels kQ8KernelsAvx2 = {&q8simd::quantize, &q8simd::rows<false>};

}  // namespace invar
