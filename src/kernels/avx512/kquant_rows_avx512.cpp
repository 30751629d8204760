// The AVX-512 VNNI row dot products of the 256-element weight types (Q4_K, Q5_K, Q6_K, Q8_K,
// Q2_K, Q3_K, IQ4_XS; Q4_K and Q5_K are the AVX2 loop of kquant_k4_row.h with vpdpwssd) against
// 8-bit activation blocks; the AMX level uses them too. Each computes the exact int32 sums of
// the scalar reference (kernels/dot_kquants.cpp, dot_low_bit_kquants.cpp) and the same float
// update, so it returns the reference's bits.
#include "kernels/avx2/kquant_row_parts.h"

#include "base/half.h"
#include "base/kquants.h"
#include "base/kquants_low_bit.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/dot_kquants.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")
#endif

#include "kernels/avx2/kquant_k4_row.h"  // AVX2 code compiled for this level: after the target pragma

namespace tandem::avx512 {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;
using kquant_detail::iq4xs_scales;
using namespace avx2::kquant_parts;  // NOLINT(google-build-using-namespace): the shared AVX2 pieces

// ---- AVX-512 VNNI ----------------------------------------------------------------------
// vpdpwssd multiplies maddubs's int16 pairs by the per-lane sub-block scale and accumulates
// in int32 in one step. Q4_K/Q5_K stay 256 bits wide: one sub-block of 32 per register needs
// only a broadcast scale, and measured faster than 512-bit registers needing a permute; they
// are the AVX2 level's loop (kquant_k4_row.h) with this accumulation.

struct Dpwssd {
  static __m256i add(__m256i sum, __m256i pairs, __m256i scale) { return _mm256_dpwssd_epi32(sum, pairs, scale); }
};

// Zero-extending rather than _mm512_castsi256_si512 / _mm512_reduce_add_epi32, whose
// "undefined" upper halves trip GCC 12's -Wmaybe-uninitialized.
inline __m512i join_avx512(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1); }

inline int32_t hsum_avx512(__m512i v) {
  return hsum_avx2(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

// ---- AVX-512 VNNI ----------------------------------------------------------------------
// Q2_K and Q3_K: 64 quants per register (the 32 bytes joined with themselves shifted by 2
// supply shifts k and k+1 at once), maddubs, then vpdpwssd against each int16 lane's
// sub-block scale, picked by a permute from the 16 scales. IQ4_XS: two sub-blocks per
// register, levels stored +128 so vpdpbusd (u8 x s8, exact in int32) applies directly, then
// the per-lane sub-block scale; the +128 comes back off through the activation sums.

// kScaleIndex.lanes[g][lane]: which of the 16 scales (Q6_K, Q2_K, Q3_K) multiplies int16 lane `lane` of the g-th
// 64-element register (8 lanes = 16 elements = one sub-block).
struct ScaleIndex {
  alignas(64) int16_t lanes[4][32];
  constexpr ScaleIndex() : lanes{} {
    for (int g = 0; g < 4; ++g)
      for (int lane = 0; lane < 32; ++lane) lanes[g][lane] = static_cast<int16_t>(4 * g + lane / 8);
  }
};
constexpr ScaleIndex kScaleIndex;

float dot_q6k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i bits45 = _mm512_set1_epi8(0x30);
  __m512i index[4];
  for (int g = 0; g < 4; ++g) index[g] = _mm512_load_si512(kScaleIndex.lanes[g]);
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

float dot_q8k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
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

float dot_q2k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
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

float dot_q3k_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
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

float dot_iq4xs_avx512(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
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

}  // namespace

KQuantRowDotFn kquant_row_dot(DType type) {
  switch (type) {
    case DType::Q4_K: return dot_k4_row<Q4KQuants, Dpwssd>;
    case DType::Q5_K: return dot_k4_row<Q5KQuants, Dpwssd>;
    case DType::Q6_K: return dot_q6k_avx512;
    case DType::Q8_K: return dot_q8k_avx512;
    case DType::Q2_K: return dot_q2k_avx512;
    case DType::Q3_K: return dot_q3k_avx512;
    case DType::IQ4_XS: return dot_iq4xs_avx512;
    default: return nullptr;
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
