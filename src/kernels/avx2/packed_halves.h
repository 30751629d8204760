// The AVX2 packed GEMMs' one piece of shared work besides the walk (packed/row_groups.h):
// storing a half group's 8 row lanes for the rows the call owns. Include only inside a
// region compiled for AVX2 (a target pragma).
#pragma once

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>

namespace tandem::avx2 {

// Lanes of rows [store_begin, store_end) (group-relative) of the half starting at row
// lane0 to destination[0..8) (destination: row lane0): a range that cuts the half keeps the
// same lanes and writes only the rows asked for.
inline void store_half_rows(__m256 lanes, int64_t lane0, int64_t store_begin, int64_t store_end, float* destination) {
  const int64_t begin = std::max<int64_t>(store_begin, lane0), end = std::min<int64_t>(store_end, lane0 + 8);
  if (begin >= end) return;
  if (begin == lane0 && end == lane0 + 8) {
    _mm256_storeu_ps(destination, lanes);
    return;
  }
  alignas(32) float values[8];
  _mm256_store_ps(values, lanes);
  for (int64_t r = begin; r < end; ++r) destination[r - lane0] = values[r - lane0];
}

}  // namespace tandem::avx2
