// The q8 profile's AVX-512 kernels: the 256-bit bodies with AVX-512 VNNI's vpdpwssd / vpdpbusd.
#include "kernels/matmul/q8_act_simd.h"

namespace invar {

constinit const Q8Kernels kQ8KernelsAvx512 = {&q8simd::quantize, &q8simd::rows<true>};

}  // namespace invar
