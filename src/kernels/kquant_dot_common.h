// What every 256-element row dot product (the scalar references in kernels/dot_kquants.cpp
// and dot_low_bit_kquants.cpp, the levels' in kernels/avx2/ and kernels/avx512/) shares so
// that all its ISA variants return the same bits: the float update applied once per
// super-block to the exact int32 sums, and the scale decodings done on words.
#pragma once

#include <cstdint>
#include <cstring>

#include "base/kquants_low_bit.h"

namespace tandem::kquant_detail {

// GCC contracts a*b + c into an FMA wherever the target has one (C++ mode defaults to
// -ffp-contract=fast), which would make the FMA-enabled variants round differently from the
// scalar one; passing each product through an empty asm makes it opaque, so every variant
// rounds the same way.
inline float opaque(float v) {
#if defined(__x86_64__)
  asm("" : "+x"(v));
#else
  asm("" : "+g"(v));
#endif
  return v;
}
// x_scale * (d * sumi - dmin * summ), the asymmetric types (sumi: scaled quant dots, summ:
// mins times activation sums).
inline float finish_k4(float x_scale, float d, float dmin, int32_t sumi, int32_t summ) {
  return opaque(x_scale * d * static_cast<float>(sumi)) - opaque(x_scale * dmin * static_cast<float>(summ));
}
// x_scale * d * sumi, the symmetric types.
inline float finish_d(float x_scale, float d, int32_t sumi) { return opaque(x_scale * d * static_cast<float>(sumi)); }

// The 6-bit scales and mins of a Q4_K/Q5_K block as two words, byte j = sub-block j: the
// same decoding as unpack_k4_scales (the reference), done on 32-bit words.
inline void unpack_k4_scale_words(const uint8_t packed[12], uint64_t* scales, uint64_t* mins) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, packed, 4);
  std::memcpy(&w1, packed + 4, 4);
  std::memcpy(&w2, packed + 8, 4);
  const uint32_t scales_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
  const uint32_t mins_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
  *scales = (w0 & 0x3f3f3f3fu) | (static_cast<uint64_t>(scales_hi) << 32);
  *mins = (w1 & 0x3f3f3f3fu) | (static_cast<uint64_t>(mins_hi) << 32);
}
inline int16_t byte_of(uint64_t word, int j) { return static_cast<int16_t>((word >> (8 * j)) & 0xff); }

// IQ4_XS's 6-bit sub-block scales minus 32 (the same decoding as unpack_iq4xs_scales).
inline void iq4xs_scales(const BlockIQ4XS& block, int32_t scales[8]) {
  for (int j = 0; j < 8; ++j)
    scales[j] = (((block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((block.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

}  // namespace tandem::kquant_detail
