// first_lanes: the write/read mask of a vector's first lanes, for the masked row tails of the
// AVX-512 elementwise kernels (nothing read or written past a row).
#pragma once

#include <cstdint>

#include "kernels/simd_intrinsics.h"

namespace tandem::avx512 {

// Lanes [0, count) of a vector of 16 (count in 0..16).
inline __mmask16 first_lanes(int64_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

}  // namespace tandem::avx512
