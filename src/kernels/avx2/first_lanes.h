// first_lanes: the mask of a vector's first lanes, for the masked row tails (maskload /
// maskstore) of the AVX2 elementwise kernels. Include it only from code compiled for AVX2
// (inside the target pragma of an avx2/ kernel file): the function is inline and uses AVX2.
#pragma once

#include <cstdint>

#include "kernels/simd_intrinsics.h"

namespace tandem::avx2 {

// Lanes [0, count) of a vector of 8 (count in 1..8): maskload/maskstore neither read nor
// write the others (and never fault on them).
inline __m256i first_lanes(int64_t count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

}  // namespace tandem::avx2
