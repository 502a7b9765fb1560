// Which vector ISA the kernels use. All levels give the same bits (DESIGN C7); the choice is
// made once at start-up (`--simd off|avx2|avx512`, default: the best the CPU has).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace invar {

enum class SimdLevel { scalar = 0, avx2 = 1, avx512 = 2 };

// The best level this CPU (and OS) supports.
SimdLevel simd_detect();
// The level kernels dispatch on now. Defaults to simd_detect().
SimdLevel simd_active();
// Selects a level; throws invar::Error if the CPU lacks it.
void simd_set(SimdLevel level);
// "off"/"scalar", "avx2", "avx512"; nullopt otherwise.
std::optional<SimdLevel> simd_parse(std::string_view s);
std::string_view simd_name(SimdLevel level);

// Kernel calls dispatched at each level: the kernels' dispatchers (isa_kernels(), q8_kernels(),
// the sampler's lanes) count one per call, not per row, so a test that iterates the levels can
// prove each level's kernels ran rather than trust simd_set. Each thread counts in its own
// counters (no shared cache line on the kernels' path); simd_calls sums them over every thread,
// exited ones included, since the process started.
void simd_count(SimdLevel level);
uint64_t simd_calls(SimdLevel level);

}  // namespace invar
