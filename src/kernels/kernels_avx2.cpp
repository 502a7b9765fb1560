// The AVX2 + FMA kernels: the shared bodies over two 8-lane registers per 16-lane vector.
#include "kernels/kernels_simd.h"
#include "kernels/vec_avx2.h"

namespace invar {

constinit const IsaKernels kIsaKernelsAvx2 = kernels_simd::isa_kernels_over<simd256::V256x2>();

}  // namespace invar
