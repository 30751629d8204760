// What every 256-element row dot product (kernels/dot_kquants.cpp,
// kernels/dot_low_bit_kquants.cpp) shares so that all its ISA variants return the same bits:
// the float update applied once per super-block to the exact int32 sums, and the target
// attributes and small reductions of the SIMD variants.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include "kernels/simd_intrinsics.h"
#endif

#define TANDEM_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define TANDEM_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")))

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

#if defined(__x86_64__)
TANDEM_TARGET_AVX2 inline int32_t hsum_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

TANDEM_TARGET_AVX2 inline float f16_avx(uint16_t h) { return _cvtsh_ss(h); }  // exact, as f16_to_f32

TANDEM_TARGET_AVX512 inline int32_t hsum_avx512(__m512i v) {
  return hsum_avx2(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}
#endif

}  // namespace tandem::kquant_detail
