// Q2_K, Q3_K and IQ4_XS row dot kernels: a scalar reference, AVX2 (maddubs/madd) and
// AVX-512 VNNI (maddubs/vpdpwssd for Q2_K and Q3_K, vpdpbusd for IQ4_XS), ISA code confined to
// functions with target attributes as in dot_kquants.cpp. Each variant computes the same
// exact int32 sums per 256-element block (the sub-block scales applied in integers) and then
// the shared float update of kquant_dot_common.h, so all of them return identical bits.
#include "kernels/dot_low_bit_kquants.h"

#include <cstring>

#include "base/half.h"
#include "base/kquants.h"
#include "base/kquants_low_bit.h"
#include "kernels/kquant_dot_common.h"

namespace tandem {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;

// IQ4_XS's 6-bit sub-block scales minus 32 (the same decoding as unpack_iq4xs_scales).
inline void iq4xs_scales(const BlockIQ4XS& block, int32_t scales[8]) {
  for (int j = 0; j < 8; ++j)
    scales[j] = (((block.scales_l[j / 2] >> (4 * (j % 2))) & 0x0f) | (((block.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// ---- Scalar reference ------------------------------------------------------------------

float dot_q2k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ2K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint8_t q[256];
    unpack_q2k_quants(w[b], q);
    int32_t sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += (w[b].scales[j] & 0x0f) * sub;
      summ += (w[b].scales[j] >> 4) * x[b].block_sums[j];
    }
    acc += finish_k4(x[b].scale, f16_to_f32(w[b].d_f16), f16_to_f32(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

float dot_q3k_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ3K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t q[256], scales[16];
    unpack_q3k_quants(w[b], q);
    unpack_q3k_scales(w[b].scales, scales);
    int32_t sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int32_t sub = 0;
      for (int i = 16 * j; i < 16 * j + 16; ++i) sub += q[i] * x[b].quants[i];
      sumi += scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

float dot_iq4xs_scalar(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockIQ4XS*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int8_t scales[8];
    unpack_iq4xs_scales(w[b], scales);
    int32_t sumi = 0;
    for (int j = 0; j < 8; ++j) {
      const uint8_t* qs = w[b].qs + 16 * j;
      const int8_t* a = x[b].quants + 32 * j;
      int32_t sub = 0;
      for (int i = 0; i < 16; ++i) sub += kIq4NonLinear[qs[i] & 0x0f] * a[i] + kIq4NonLinear[qs[i] >> 4] * a[16 + i];
      sumi += scales[j] * sub;
    }
    acc += finish_d(x[b].scale, f16_to_f32(w[b].d_f16), sumi);
  }
  return acc;
}

#if defined(__x86_64__)

using kquant_detail::f16_avx;
using kquant_detail::hsum_avx2;
using kquant_detail::hsum_avx512;

// ---- AVX2 ------------------------------------------------------------------------------
// Q2_K and Q3_K: a 32-byte register of quants covers two sub-blocks of 16. Weights are made
// non-negative (Q3_K stores q + 4 in three bits), so maddubs (u8 x s8, pairs at most
// 2 * 7 * 127: no saturation) then madd with the pair's two scales as int16 gives exact int32
// partial sums. The Q3_K offset of 4 and the Q2_K mins multiply the 16 activation sums.

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

TANDEM_TARGET_AVX2 float dot_q2k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ2K*>(weight_row);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m128i scales = _mm_and_si128(packed, nibble);
    const __m128i mins = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      // Shift k of the 32 bytes holds elements 128h + 32k .. 128h + 32k + 31.
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int k = 0; k < 4; ++k) {
        const __m256i u = _mm256_and_si256(q, two_bits);
        q = _mm256_srli_epi16(q, 2);
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k));
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), pair_scales_avx2(scales, 4 * h + k, false)));
      }
    }
    const int32_t summ = hsum_avx2(times_block_sums_avx2(_mm256_cvtepu8_epi16(mins), x[b].block_sums));
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), hsum_avx2(sum), summ);
  }
  return acc;
}

TANDEM_TARGET_AVX2 float dot_q3k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ3K*>(weight_row);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m256i bit2 = _mm256_set1_epi8(4);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i scales = q3k_scales_sse(w[b].scales);
    // Register m = 4h + k takes bit m of hmask: shifting right by one per register brings it
    // to bit 0, and a left shift by 2 to bit 2 (16-bit shifts, masked per byte).
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].hmask));
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int k = 0; k < 4; ++k) {
        const __m256i u =
            _mm256_or_si256(_mm256_and_si256(q, two_bits), _mm256_and_si256(_mm256_slli_epi16(high, 2), bit2));
        q = _mm256_srli_epi16(q, 2);
        high = _mm256_srli_epi16(high, 1);
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k));
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), pair_scales_avx2(scales, 4 * h + k, true)));
      }
    }
    // sum(scale * (u - 4) * a) = sum(scale * u * a) - 4 * sum(scale * block_sum).
    const __m256i offset = _mm256_slli_epi32(times_block_sums_avx2(_mm256_cvtepi8_epi16(scales), x[b].block_sums), 2);
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx2(_mm256_sub_epi32(sum, offset)));
  }
  return acc;
}

// IQ4_XS: the 16 levels looked up with pshufb; they are signed, so maddubs takes |level| as
// the unsigned side and the activation with the level's sign (pairs at most 2 * 127 * 127).
TANDEM_TARGET_AVX2 float dot_iq4xs_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockIQ4XS*>(weight_row);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NonLinear)));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t scales[8];
    iq4xs_scales(w[b], scales);
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      // Sub-block j: elements 0..15 the low nibbles of its 16 bytes, 16..31 the high ones.
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * j));
      const __m256i index = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), nibble), _mm_and_si128(q, nibble));
      const __m256i level = _mm256_shuffle_epi8(levels, index);
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 32 * j));
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(level), _mm256_sign_epi8(a, level));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(scales[j]))));
    }
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx2(sum));
  }
  return acc;
}

// ---- AVX-512 VNNI ----------------------------------------------------------------------
// Q2_K and Q3_K: 64 quants per register (the 32 bytes joined with themselves shifted by 2
// supply shifts k and k+1 at once), maddubs, then vpdpwssd against each int16 lane's
// sub-block scale, picked by a permute from the 16 scales. IQ4_XS: two sub-blocks per
// register, levels stored +128 so vpdpbusd (u8 x s8, exact in int32) applies directly, then
// the per-lane sub-block scale; the +128 comes back off through the activation sums.

TANDEM_TARGET_AVX512 inline __m512i join_avx512(__m256i lo, __m256i hi) {
  return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1);
}

// kScaleIndex.lanes[g][lane]: the sub-block (4g + lane / 8) whose scale multiplies int16
// lane `lane` of the g-th 64-element register.
struct ScaleIndex {
  alignas(64) int16_t lanes[4][32];
  constexpr ScaleIndex() : lanes{} {
    for (int g = 0; g < 4; ++g)
      for (int lane = 0; lane < 32; ++lane) lanes[g][lane] = static_cast<int16_t>(4 * g + lane / 8);
  }
};
constexpr ScaleIndex kScaleIndex;

TANDEM_TARGET_AVX512 float dot_q2k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ2K*>(weight_row);
  const __m512i two_bits = _mm512_set1_epi8(3);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  __m512i index[4];
  for (int g = 0; g < 4; ++g) index[g] = _mm512_load_si512(kScaleIndex.lanes[g]);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m512i scales16 = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(packed, nibble)));
    const __m256i mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(packed, 4), nibble));
    __m512i sum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m256i q256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      // Lower half: shift 2 * (2g'), upper half: 2 * (2g' + 1); g' = 0 then 1 after >> 4.
      __m512i q = join_avx512(q256, _mm256_srli_epi16(q256, 2));
      for (int g = 0; g < 2; ++g) {
        const __m512i u = _mm512_and_si512(q, two_bits);
        q = _mm512_srli_epi16(q, 4);
        const __m512i a = _mm512_loadu_si512(x[b].quants + 128 * h + 64 * g);
        sum =
            _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u, a), _mm512_permutexvar_epi16(index[2 * h + g], scales16));
      }
    }
    const int32_t summ = hsum_avx2(times_block_sums_avx2(mins16, x[b].block_sums));
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), hsum_avx512(sum), summ);
  }
  return acc;
}

TANDEM_TARGET_AVX512 float dot_q3k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ3K*>(weight_row);
  const __m512i two_bits = _mm512_set1_epi8(3);
  const __m512i bit2 = _mm512_set1_epi8(4);
  __m512i index[4];
  for (int g = 0; g < 4; ++g) index[g] = _mm512_load_si512(kScaleIndex.lanes[g]);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i scales = q3k_scales_sse(w[b].scales);
    const __m512i scales16 = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(scales));
    // Register (h, g) needs hmask bits 4h + 2g (lower half) and 4h + 2g + 1 (upper half).
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].hmask));
    __m512i sum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m256i q256 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      __m512i q = join_avx512(q256, _mm256_srli_epi16(q256, 2));
      for (int g = 0; g < 2; ++g) {
        const __m512i hbits = join_avx512(high, _mm256_srli_epi16(high, 1));
        high = _mm256_srli_epi16(high, 2);
        const __m512i u =
            _mm512_or_si512(_mm512_and_si512(q, two_bits), _mm512_and_si512(_mm512_slli_epi16(hbits, 2), bit2));
        q = _mm512_srli_epi16(q, 4);
        const __m512i a = _mm512_loadu_si512(x[b].quants + 128 * h + 64 * g);
        sum =
            _mm512_dpwssd_epi32(sum, _mm512_maddubs_epi16(u, a), _mm512_permutexvar_epi16(index[2 * h + g], scales16));
      }
    }
    const __m256i offset = _mm256_slli_epi32(times_block_sums_avx2(_mm256_cvtepi8_epi16(scales), x[b].block_sums), 2);
    sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(offset));
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx512(sum));
  }
  return acc;
}

// The IQ4 levels + 128, as unsigned bytes for vpdpbusd.
struct UnsignedLevels {
  alignas(16) uint8_t bytes[16];
  constexpr UnsignedLevels() : bytes{} {
    for (int i = 0; i < 16; ++i) bytes[i] = static_cast<uint8_t>(kIq4NonLinear[i] + 128);
  }
};
constexpr UnsignedLevels kUnsignedLevels;

TANDEM_TARGET_AVX512 float dot_iq4xs_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockIQ4XS*>(weight_row);
  const __m512i levels =
      _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kUnsignedLevels.bytes)));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  // 32 index bytes of sub-blocks 2p, 2p+1 -> 128-bit lanes {2p low nibbles, 2p high,
  // 2p+1 low, 2p+1 high}: each 16-byte half twice, the second copy shifted right by 4.
  const __m512i duplicate = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
  const __m512i shifts = _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t scales[8];
    iq4xs_scales(w[b], scales);
    __m512i sum = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * p));
      const __m512i index = _mm512_and_si512(
          _mm512_srlv_epi64(_mm512_permutexvar_epi64(duplicate, _mm512_zextsi256_si512(q)), shifts), nibble);
      const __m512i level = _mm512_shuffle_epi8(levels, index);
      const __m512i dots = _mm512_dpbusd_epi32(_mm512_setzero_si512(), level, _mm512_loadu_si512(x[b].quants + 64 * p));
      const __m512i scale = join_avx512(_mm256_set1_epi32(scales[2 * p]), _mm256_set1_epi32(scales[2 * p + 1]));
      sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(dots, scale));
    }
    // sum(scale * (u - 128) * a) = sum(scale * u * a) - 128 * sum(scale * sub-block sum).
    int32_t offset = 0;
    for (int j = 0; j < 8; ++j) offset += scales[j] * (x[b].block_sums[2 * j] + x[b].block_sums[2 * j + 1]);
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx512(sum) - 128 * offset);
  }
  return acc;
}

#endif  // __x86_64__

struct LowBitKernels {
  KQuantRowDotFn q2k, q3k, iq4xs;
};

const LowBitKernels& kernels_for(Isa isa) {
  static constexpr LowBitKernels kScalar{dot_q2k_scalar, dot_q3k_scalar, dot_iq4xs_scalar};
#if defined(__x86_64__)
  static constexpr LowBitKernels kAvx2{dot_q2k_avx2, dot_q3k_avx2, dot_iq4xs_avx2};
  static constexpr LowBitKernels kAvx512{dot_q2k_avx512, dot_q3k_avx512, dot_iq4xs_avx512};
  switch (isa) {
    case Isa::Amx:  // AMX machines have AVX-512; these types use its kernels
    case Isa::Avx512: return kAvx512;
    case Isa::Avx2: return kAvx2;
    case Isa::Scalar: break;
  }
#endif
  return kScalar;
}

}  // namespace

KQuantRowDotFn low_bit_kquant_row_dot(Isa isa, DType type) {
  const LowBitKernels& kernels = kernels_for(isa);
  switch (type) {
    case DType::Q2_K: return kernels.q2k;
    case DType::Q3_K: return kernels.q3k;
    case DType::IQ4_XS: return kernels.iq4xs;
    default: return nullptr;
  }
}

}  // namespace tandem
