// The fifth bits of 5-bit codes packed as bit planes (packed/q8_layout.h for Q5_0/Q5_1,
// packed/kquant_layout.h for Q5_K): bit m of plane byte p is the fifth bit of tile byte
// 64 m + p, so line m's bits are one shift and mask of the 64 plane bytes. Shared by the
// AVX-512 packed GEMMs; include only inside a region compiled for AVX-512 BW (a target pragma).
#pragma once

#include "kernels/simd_intrinsics.h"

#include <cstdint>

namespace tandem::avx512 {

// Ors each line's fifth bits (bit 4) into rows[0..8), the lines' 4-bit codes. 16-bit shifts
// move bits across bytes, but never into bit 4 from the neighbour; the mask keeps each byte's own.
[[gnu::always_inline]] inline void or_fifth_bits(const uint8_t* planes_bytes, __m512i rows[8]) {
  const __m512i planes = _mm512_loadu_si512(planes_bytes);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  rows[0] = _mm512_or_si512(rows[0], _mm512_and_si512(_mm512_slli_epi16(planes, 4), bit4));
  rows[1] = _mm512_or_si512(rows[1], _mm512_and_si512(_mm512_slli_epi16(planes, 3), bit4));
  rows[2] = _mm512_or_si512(rows[2], _mm512_and_si512(_mm512_slli_epi16(planes, 2), bit4));
  rows[3] = _mm512_or_si512(rows[3], _mm512_and_si512(_mm512_slli_epi16(planes, 1), bit4));
  rows[4] = _mm512_or_si512(rows[4], _mm512_and_si512(planes, bit4));
  rows[5] = _mm512_or_si512(rows[5], _mm512_and_si512(_mm512_srli_epi16(planes, 1), bit4));
  rows[6] = _mm512_or_si512(rows[6], _mm512_and_si512(_mm512_srli_epi16(planes, 2), bit4));
  rows[7] = _mm512_or_si512(rows[7], _mm512_and_si512(_mm512_srli_epi16(planes, 3), bit4));
}

}  // namespace tandem::avx512
