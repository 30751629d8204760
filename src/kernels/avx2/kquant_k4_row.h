// The Q4_K and Q5_K row dot products of both SIMD levels, written once: per 32-element
// sub-block, maddubs of the (non-negative) quants against the activations, the int16 pairs
// times the sub-block's 6-bit scale accumulated in int32 by the level's instruction (AVX2: madd
// then add; AVX-512 VNNI: vpdpwssd), the mins through the activation sums. The sums are exact,
// so both levels return the scalar reference's bits (kernels/dot_kquants.cpp). No target of its
// own: include it after the file's target pragma (kernels/avx2/kquant_rows_avx2.cpp,
// kernels/avx512/kquant_rows_avx512.cpp), which compiles it for that level.
#pragma once

#include <cstdint>

#include "base/kquants.h"
#include "kernels/avx2/kquant_row_parts.h"
#include "kernels/dot_kquants.h"
#include "kernels/kquant_dot_common.h"

namespace tandem::avx2::kquant_parts {

// Both 4-bit quants of a Q4_K block's chunk c (sub-blocks 2c and 2c + 1): the low and the
// high nibbles of its 32 bytes.
class Q4KQuants {
 public:
  using Block = BlockQ4K;
  explicit Q4KQuants(const BlockQ4K& block) : block_(block) {}
  void chunk(int c, __m256i* lo, __m256i* hi) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_.qs + 32 * c));
    *lo = _mm256_and_si256(packed, nibble);
    *hi = _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble);
  }

 private:
  const BlockQ4K& block_;
};

// Q5_K: the same nibbles with bit 4 from qh. Chunk c takes bits 2c and 2c+1 of qh; shifting qh
// right by 2 per chunk brings them to bits 0 and 1, which move to bit 4 of each byte (16-bit
// shifts, masked per byte). The chunks are taken in order, 0 to 3.
class Q5KQuants {
 public:
  using Block = BlockQ5K;
  explicit Q5KQuants(const BlockQ5K& block)
      : block_(block), high_(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.qh))) {}
  void chunk(int c, __m256i* lo, __m256i* hi) {
    const __m256i nibble = _mm256_set1_epi8(0x0f);
    const __m256i bit4 = _mm256_set1_epi8(0x10);
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block_.qs + 32 * c));
    *lo = _mm256_or_si256(_mm256_and_si256(packed, nibble), _mm256_and_si256(_mm256_slli_epi16(high_, 4), bit4));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble),
                          _mm256_and_si256(_mm256_slli_epi16(high_, 3), bit4));
    high_ = _mm256_srli_epi16(high_, 2);
  }

 private:
  const BlockQ5K& block_;
  __m256i high_;
};

// KQuantRowDotFn for Quants (Q4KQuants, Q5KQuants); AddScaled::add(sum, pairs, scale) adds the
// int16 pairs times the int16 scale to the int32 sum, with the level's instruction.
template <class Quants, class AddScaled>
float dot_k4_row(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const typename Quants::Block*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    uint64_t scales, mins;
    kquant_detail::unpack_k4_scale_words(w[b].scales, &scales, &mins);
    Quants quants(w[b]);
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      __m256i lo, hi;
      quants.chunk(c, &lo, &hi);
      const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 64 * c);
      const __m256i p_lo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(a));
      const __m256i p_hi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(a + 1));
      sum = AddScaled::add(sum, p_lo, _mm256_set1_epi16(kquant_detail::byte_of(scales, 2 * c)));
      sum = AddScaled::add(sum, p_hi, _mm256_set1_epi16(kquant_detail::byte_of(scales, 2 * c + 1)));
    }
    int32_t sumi, summ;
    hsum2_avx2(sum, k4_mins_avx2(mins, x[b].block_sums), &sumi, &summ);
    acc += kquant_detail::finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), sumi, summ);
  }
  return acc;
}

}  // namespace tandem::avx2::kquant_parts
