// K-quant dot kernels: a scalar reference, AVX2 and AVX-512 VNNI variants (ISA code confined
// to functions with target attributes so the rest of the build stays generic), chosen by
// active_isa() (kernels/cpu_features.h). Every variant computes the same exact int32
// sums per 256-element block and then the same float update (finish_* below), so all of
// them return identical bits: a row's result depends on neither the machine's ISA nor the batch.
#include "kernels/dot_kquants.h"

#if defined(__x86_64__)
#include "kernels/simd_intrinsics.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "base/half.h"
#include "base/kquants.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/dot_low_bit_kquants.h"
#include "kernels/kernel_table.h"
#include "kernels/kquant_dot_common.h"

namespace tandem {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;
#if defined(__x86_64__)
using kquant_detail::f16_avx;
using kquant_detail::hsum_avx2;
using kquant_detail::hsum_avx512;
#endif

// Sum over sub-blocks of min[j] * (sum of the 32 activations of sub-block j).
inline int32_t mins_dot_sums(const uint8_t mins[8], const int16_t block_sums[16]) {
  int32_t summ = 0;
  for (int j = 0; j < 8; ++j) summ += mins[j] * (block_sums[2 * j] + block_sums[2 * j + 1]);
  return summ;
}

// ---- Scalar reference ------------------------------------------------------------------

float dot_q4k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ4K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t q[256], scales[8], mins[8];
    unpack_q4k_quants(w[b], q);
    unpack_k4_scales(w[b].scales, scales, mins);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t sub = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) sub += q[i] * x[b].quants[i];
      sumi += scales[j] * sub;
    }
    acc += finish_k4(x[b].scale, f16_to_f32(w[b].d_f16), f16_to_f32(w[b].dmin_f16), sumi,
                     mins_dot_sums(mins, x[b].block_sums));
  }
  return acc;
}

float dot_q5k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ5K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t q[256], scales[8], mins[8];
    unpack_q5k_quants(w[b], q);
    unpack_k4_scales(w[b].scales, scales, mins);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t sub = 0;
      for (int i = 32 * j; i < 32 * j + 32; ++i) sub += q[i] * x[b].quants[i];
      sumi += scales[j] * sub;
    }
    acc += finish_k4(x[b].scale, f16_to_f32(w[b].d_f16), f16_to_f32(w[b].dmin_f16), sumi,
                     mins_dot_sums(mins, x[b].block_sums));
  }
  return acc;
}

float dot_q6k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t q[256];
    unpack_q6k_quants(w[b], q);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += w[b].scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

float dot_q8k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ8K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t sumi = 0;
    for (int i = 0; i < 256; ++i) sumi += w[b].qs[i] * x[b].quants[i];
    acc += finish_d(x[b].scale, w[b].d, sumi);
  }
  return acc;
}

#if defined(__x86_64__)

// ---- AVX2 ------------------------------------------------------------------------------
// Weights are non-negative (Q4_K/Q5_K quants, Q6_K quants + 32), so maddubs (u8 x s8 ->
// pairs summed in int16, at most 2*63*127 < 32767: no saturation) then madd with the
// sub-block scale broadcast to int16 gives exact int32 partial sums.

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

TANDEM_TARGET_AVX2 float dot_q4k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ4K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint64_t scales, mins;
    unpack_k4_scale_words(w[b].scales, &scales, &mins);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(packed, nibble);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
      const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 64 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(a));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(a + 1));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(byte_of(scales, 2 * c))));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(byte_of(scales, 2 * c + 1))));
    }
    int32_t sumi, summ;
    hsum2_avx2(sum, k4_mins_avx2(mins, x[b].block_sums), &sumi, &summ);
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

TANDEM_TARGET_AVX2 float dot_q5k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ5K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint64_t scales, mins;
    unpack_k4_scale_words(w[b].scales, &scales, &mins);
    // Chunk c takes bits 2c and 2c+1 of qh; shifting qh right by 2 per chunk brings them to
    // bits 0 and 1, which move to bit 4 of each byte (16-bit shifts, masked per byte).
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh));
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c));
      const __m256i lo =
          _mm256_or_si256(_mm256_and_si256(packed, nibble), _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble),
                                         _mm256_and_si256(_mm256_slli_epi16(high, 3), bit4));
      high = _mm256_srli_epi16(high, 2);
      const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 64 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(a));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(a + 1));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p_lo, _mm256_set1_epi16(byte_of(scales, 2 * c))));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p_hi, _mm256_set1_epi16(byte_of(scales, 2 * c + 1))));
    }
    int32_t sumi, summ;
    hsum2_avx2(sum, k4_mins_avx2(mins, x[b].block_sums), &sumi, &summ);
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

// Q6_K quants are stored +32; sum(scale * (u - 32) * a) = sum(scale * u * a) - 32 * sum(scale
// * block_sum), the second term one madd of the 16 scales against the 16 activation sums.
TANDEM_TARGET_AVX2 inline __m256i q6k_offset_avx2(const int8_t scales[16], const int16_t block_sums[16]) {
  const __m256i sc = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
  const __m256i bs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_sums));
  return _mm256_slli_epi32(_mm256_madd_epi16(sc, bs), 5);
}

// kPairMask[i]: pshufb control repeating byte 2i eight times, then byte 2i+1 eight times;
// sign-extended to int16 it is the scale vector of a register covering sub-blocks 2i, 2i+1.
struct Q6kPairMasks {
  alignas(16) uint8_t bytes[8][16];
  constexpr Q6kPairMasks() : bytes{} {
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 16; ++k) bytes[i][k] = static_cast<uint8_t>(2 * i + k / 8);
  }
};
constexpr Q6kPairMasks kQ6kPairMasks;

TANDEM_TARGET_AVX2 float dot_q6k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
      // Each 2-bit field of qh moved to bits 4-5 of its byte.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int k = 0; k < 4; ++k) {
        const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(kQ6kPairMasks.bytes[4 * h + k]));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, mask));
        const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], _mm256_loadu_si256(a)), scale));
      }
    }
    const int32_t sumi = hsum_avx2(_mm256_sub_epi32(sum, q6k_offset_avx2(w[b].scales, x[b].block_sums)));
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), sumi);
  }
  return acc;
}

// Both sides signed: widen to int16 and madd (|products| <= 127*127, pairs fit int32).
TANDEM_TARGET_AVX2 float dot_q8k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ8K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i sum = _mm256_setzero_si256();
    for (int i = 0; i < 256; i += 16) {
      const __m256i wq = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + i)));
      const __m256i aq = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].quants + i)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(wq, aq));
    }
    acc += finish_d(x[b].scale, w[b].d, hsum_avx2(sum));
  }
  return acc;
}

// ---- AVX-512 VNNI ----------------------------------------------------------------------
// vpdpwssd multiplies maddubs's int16 pairs by the per-lane sub-block scale and accumulates
// in int32 in one step. Q4_K/Q5_K stay 256 bits wide: one sub-block of 32 per register needs
// only a broadcast scale, and measured faster than 512-bit registers needing a permute.

// Zero-extending rather than _mm512_castsi256_si512 / _mm512_reduce_add_epi32, whose
// "undefined" upper halves trip GCC 12's -Wmaybe-uninitialized.
TANDEM_TARGET_AVX512 inline __m512i join_avx512(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

TANDEM_TARGET_AVX512 float dot_q4k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ4K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint64_t scales, mins;
    unpack_k4_scale_words(w[b].scales, &scales, &mins);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c));
      const __m256i lo = _mm256_and_si256(packed, nibble);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
      const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 64 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(a));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(a + 1));
      sum = _mm256_dpwssd_epi32(sum, p_lo, _mm256_set1_epi16(byte_of(scales, 2 * c)));
      sum = _mm256_dpwssd_epi32(sum, p_hi, _mm256_set1_epi16(byte_of(scales, 2 * c + 1)));
    }
    int32_t sumi, summ;
    hsum2_avx2(sum, k4_mins_avx2(mins, x[b].block_sums), &sumi, &summ);
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

TANDEM_TARGET_AVX512 float dot_q5k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ5K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint64_t scales, mins;
    unpack_k4_scale_words(w[b].scales, &scales, &mins);
    // Chunk c takes bits 2c and 2c+1 of qh; shifting qh right by 2 per chunk brings them to
    // bits 0 and 1, which move to bit 4 of each byte (16-bit shifts, masked per byte).
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh));
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * c));
      const __m256i lo =
          _mm256_or_si256(_mm256_and_si256(packed, nibble), _mm256_and_si256(_mm256_slli_epi16(high, 4), bit4));
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble),
                                         _mm256_and_si256(_mm256_slli_epi16(high, 3), bit4));
      high = _mm256_srli_epi16(high, 2);
      const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 64 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(a));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(a + 1));
      sum = _mm256_dpwssd_epi32(sum, p_lo, _mm256_set1_epi16(byte_of(scales, 2 * c)));
      sum = _mm256_dpwssd_epi32(sum, p_hi, _mm256_set1_epi16(byte_of(scales, 2 * c + 1)));
    }
    int32_t sumi, summ;
    hsum2_avx2(sum, k4_mins_avx2(mins, x[b].block_sums), &sumi, &summ);
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

// kScaleIndex[g][lane]: which of the 16 Q6_K scales multiplies int16 lane `lane` of the g-th
// 64-element register (8 lanes = 16 elements = one sub-block).
struct Q6kScaleIndex {
  alignas(64) int16_t lanes[4][32];
  constexpr Q6kScaleIndex() : lanes{} {
    for (int g = 0; g < 4; ++g)
      for (int lane = 0; lane < 32; ++lane) lanes[g][lane] = static_cast<int16_t>(4 * g + lane / 8);
  }
};
constexpr Q6kScaleIndex kQ6kScaleIndex;

TANDEM_TARGET_AVX512 float dot_q6k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  __m512i index[4];
  for (int g = 0; g < 4; ++g) index[g] = _mm512_load_si512(kQ6kScaleIndex.lanes[g]);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m512i sc16 =
        _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales))));
    __m512i sum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      // ql[0..63] holds the low nibbles of elements 0..63 and the high nibbles of 64..127;
      // qh is joined with itself shifted by 2 so its upper half supplies the odd bit pairs.
      const __m512i ql = _mm512_loadu_si512(w[b].ql + 64 * h);
      const __m256i qh256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
      const __m512i qh = join_avx512(qh256, _mm256_srli_epi16(qh256, 2));
      const __m512i q_lo =
          _mm512_or_si512(_mm512_and_si512(ql, nibble), _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45));
      const __m512i q_hi =
          _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), nibble), _mm512_and_si512(qh, bits45));
      const __m512i p_lo = _mm512_maddubs_epi16(q_lo, _mm512_loadu_si512(x[b].quants + 128 * h));
      const __m512i p_hi = _mm512_maddubs_epi16(q_hi, _mm512_loadu_si512(x[b].quants + 128 * h + 64));
      sum = _mm512_dpwssd_epi32(sum, p_lo, _mm512_permutexvar_epi16(index[2 * h], sc16));
      sum = _mm512_dpwssd_epi32(sum, p_hi, _mm512_permutexvar_epi16(index[2 * h + 1], sc16));
    }
    sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(q6k_offset_avx2(w[b].scales, x[b].block_sums)));
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx512(sum));
  }
  return acc;
}

TANDEM_TARGET_AVX512 float dot_q8k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ8K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m512i sum = _mm512_setzero_si512();
    for (int i = 0; i < 256; i += 32) {
      const __m512i wq = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + i)));
      const __m512i aq = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + i)));
      sum = _mm512_dpwssd_epi32(sum, wq, aq);
    }
    acc += finish_d(x[b].scale, w[b].d, hsum_avx512(sum));
  }
  return acc;
}

#endif  // __x86_64__

// ---- Dispatch --------------------------------------------------------------------------

using DotFn = KQuantRowDotFn;

struct KQuantKernels {
  DotFn q4k, q5k, q6k, q8k;
};

constexpr KQuantKernels kScalarKernels{dot_q4k_scalar, dot_q5k_scalar, dot_q6k_scalar, dot_q8k_scalar};

const KQuantKernels& kernels_for(Isa isa) {
#if defined(__x86_64__)
  static constexpr KQuantKernels kAvx2Kernels{dot_q4k_avx2, dot_q5k_avx2, dot_q6k_avx2, dot_q8k_avx2};
  static constexpr KQuantKernels kAvx512Kernels{dot_q4k_avx512, dot_q5k_avx512, dot_q6k_avx512, dot_q8k_avx512};
  switch (isa) {
    case Isa::Amx:  // AMX machines have AVX-512; k-quants use its kernels
    case Isa::Avx512: return kAvx512Kernels;
    case Isa::Avx2: return kAvx2Kernels;
    case Isa::Scalar: break;
  }
#endif
  return kScalarKernels;
}

DotFn kernel_for(const KQuantKernels& kernels, DType type) {
  switch (type) {
    case DType::Q4_K: return kernels.q4k;
    case DType::Q5_K: return kernels.q5k;
    case DType::Q6_K: return kernels.q6k;
    case DType::Q8_K: return kernels.q8k;
    default: TANDEM_ASSERT(false && "dot_q8k_activations: not a k-quant type");
  }
  return nullptr;
}

// Q2_K, Q3_K and IQ4_XS have their own file's kernels; the rest are here.
DotFn row_dot(Isa isa, DType type) {
  if (const DotFn low_bit = low_bit_kquant_row_dot(isa, type)) return low_bit;
  return kernel_for(kernels_for(isa), type);
}

}  // namespace

#if defined(__x86_64__)
namespace avx2 {
// Packed Q4_K/Q6_K (every one the loader packs) to the packed kernel; the rest row by row.
TANDEM_TARGET_AVX2 void gemm_q8k(const TensorView& weight, int64_t row_begin, int64_t row_end,
                                 const ActivationBlockQ8K* x, int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_kquant_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(Isa::Avx2, weight, row_begin, row_end, x, n_tokens, out, out_stride);
}
}  // namespace avx2
#endif

KQuantRowDotFn kquant_row_dot(Isa isa, DType type) {
  TANDEM_ASSERT(static_cast<int>(isa) <= static_cast<int>(detect_isa()));
  return row_dot(isa, type);
}

namespace portable {

void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    float amax = 0.0f;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(xb[i]));
    out[b].scale = amax / 127.0f;
    const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
    for (int j = 0; j < 16; ++j) {
      int sum = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) {
        const int q = std::clamp(static_cast<int>(std::nearbyint(xb[i] * inverse)), -127, 127);
        out[b].quants[i] = static_cast<int8_t>(q);
        sum += q;
      }
      out[b].block_sums[j] = static_cast<int16_t>(sum);
    }
  }
}

}  // namespace portable

#if defined(__x86_64__)
// The same values as the scalar loop: max is exact in any order, and the product, the
// rounding (to nearest, ties to even) and the clamp are the same per element.
namespace avx512 {
TANDEM_TARGET_AVX512 void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  for (int64_t b = 0; b < n / kKQuantBlockSize; ++b) {
    const float* xb = x + b * kKQuantBlockSize;
    __m512 max_abs = _mm512_setzero_ps();
    for (int i = 0; i < 256; i += 16) max_abs = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(xb + i)), max_abs);
    const float amax = _mm512_reduce_max_ps(max_abs);
    out[b].scale = amax / 127.0f;
    const __m512 inverse = _mm512_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (int j = 0; j < 16; ++j) {
      const __m512 scaled = _mm512_mul_ps(_mm512_loadu_ps(xb + 16 * j), inverse);
      __m512i q = _mm512_cvtps_epi32(_mm512_roundscale_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      q = _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16 * j), _mm512_cvtepi32_epi8(q));
      out[b].block_sums[j] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
  }
}
}  // namespace avx512
#endif

void quantize_activations_q8k_isa(Isa isa, const float* x, int64_t n, ActivationBlockQ8K* out) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  kernel_table(isa).quantize_q8k(x, n, out);
}

void quantize_activations_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  kernel_table().quantize_q8k(x, n, out);
}

float dot_q8k_activations_isa(Isa isa, DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  TANDEM_ASSERT(n % kKQuantBlockSize == 0);
  TANDEM_ASSERT(static_cast<int>(isa) <= static_cast<int>(detect_isa()));
  return row_dot(isa, type)(weight_row, x, n / kKQuantBlockSize);
}

float dot_q8k_activations(DType type, const void* weight_row, const ActivationBlockQ8K* x, int64_t n) {
  return kernel_table().dot_q8k(type, weight_row, x, n);
}

}  // namespace tandem
