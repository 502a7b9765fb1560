// The AVX-512 kernels: the shared bodies over one 16-lane register per vector.
#include "kernels/kernels_simd.h"
#include "kernels/vec_avx512.h"

namespace invar {

constinit const IsaKernels kIsaKernelsAvx512 = kernels_simd::isa_kernels_over<simd512::V512>();

}  // namespace invar
