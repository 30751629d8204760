// The AVX2 pieces shared by the k-quant row dot products of both SIMD levels
// (avx2/kquant_rows_avx2.cpp, avx512/kquant_rows_avx512.cpp): horizontal sums, f16 scales,
// the Q4_K/Q5_K mins and the Q6_K offset against the activation sums, the Q3_K scales, the
// pair masks. Each is exact in int32, so every level gets the same sums (kquant_dot_common.h).
#pragma once

#include "kernels/simd_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "kernels/kquant_dot_common.h"

#define TANDEM_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace tandem::avx2::kquant_parts {

TANDEM_TARGET_AVX2 inline int32_t hsum_avx2(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

TANDEM_TARGET_AVX2 inline float f16_avx(uint16_t h) { return _cvtsh_ss(h); }  // exact, as f16_to_f32

// sum_j min[j] * (block_sums[2j] + block_sums[2j+1]) as 4 int32 lanes (pairs summed by a
// madd with ones, fit int16 again: |sum of 32 quants| <= 4064).
TANDEM_TARGET_AVX2 inline __m128i k4_mins_avx2(uint64_t mins, const int16_t block_sums[16]) {
  const __m256i pairs =
      _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_sums)), _mm256_set1_epi16(1));
  const __m128i pairs16 = _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
  return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(mins))), pairs16);
}

// Horizontal sums of two int32 vectors at once: {sum(a), sum(b)}.
TANDEM_TARGET_AVX2 inline void hsum2_avx2(__m256i a, __m128i b, int32_t* sum_a, int32_t* sum_b) {
  const __m128i a4 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i ab = _mm_hadd_epi32(a4, b);  // a0+a1, a2+a3, b0+b1, b2+b3
  const __m128i sums = _mm_hadd_epi32(ab, ab);
  *sum_a = _mm_cvtsi128_si32(sums);
  *sum_b = _mm_extract_epi32(sums, 1);
}

// Q6_K quants are stored +32; sum(scale * (u - 32) * a) = sum(scale * u * a) - 32 * sum(scale
// * block_sum), the second term one madd of the 16 scales against the 16 activation sums.
TANDEM_TARGET_AVX2 inline __m256i q6k_offset_avx2(const int8_t scales[16], const int16_t block_sums[16]) {
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_sums));
  return _mm256_slli_epi32(_mm256_madd_epi16(sc, bs), 5);
}

// kPairMasks.bytes[i]: pshufb control repeating byte 2i eight times, then byte 2i+1 eight
// times: widened to int16 it is the scale vector of the register holding sub-blocks 2i, 2i+1.
struct PairMasks {
  alignas(16) uint8_t bytes[8][16];
  constexpr PairMasks() : bytes{} {
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 16; ++k) bytes[i][k] = static_cast<uint8_t>(2 * i + k / 8);
  }
};
constexpr PairMasks kPairMasks;

TANDEM_TARGET_AVX2 inline __m256i pair_scales_avx2(__m128i scales, int pair, bool is_signed) {
  const __m128i spread =
      _mm_shuffle_epi8(scales, _mm_load_si128(reinterpret_cast<const __m128i*>(kPairMasks.bytes[pair])));
  return is_signed ? _mm256_cvtepi8_epi16(spread) : _mm256_cvtepu8_epi16(spread);
}

// The 16 Q3_K scales (signed, [-32, 31]) of the 12 packed bytes, one per byte: the same
// decoding as unpack_q3k_scales, done on 32-bit words (word w of the result is scales 4w..4w+3).
TANDEM_TARGET_AVX2 inline __m128i q3k_scales_sse(const uint8_t packed[12]) {
  uint32_t w0, w1, w2;
  std::memcpy(&w0, packed, 4);
  std::memcpy(&w1, packed + 4, 4);
  std::memcpy(&w2, packed + 8, 4);
  const uint32_t low = 0x0f0f0f0fu, two = 0x03030303u;
  const uint32_t s0 = (w0 & low) | ((w2 & two) << 4);
  const uint32_t s1 = (w1 & low) | (((w2 >> 2) & two) << 4);
  const uint32_t s2 = ((w0 >> 4) & low) | (((w2 >> 4) & two) << 4);
  const uint32_t s3 = ((w1 >> 4) & low) | (((w2 >> 6) & two) << 4);
  const __m128i biased =
      _mm_setr_epi32(static_cast<int>(s0), static_cast<int>(s1), static_cast<int>(s2), static_cast<int>(s3));
  return _mm_sub_epi8(biased, _mm_set1_epi8(32));
}

// sum_j weights16[j] * block_sums[j] as 8 int32 lanes.
TANDEM_TARGET_AVX2 inline __m256i times_block_sums_avx2(__m256i weights16, const int16_t block_sums[16]) {
  return _mm256_madd_epi16(weights16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_sums)));
}

}  // namespace tandem::avx2::kquant_parts
