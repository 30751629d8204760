// The 512-bit steps shared by the kernels on the packed k-quant layout
// (packed/kquant_layout.h): the AVX-512 dpbusd GEMM (avx512/gemm_kquant_packed.cpp) and the
// AMX tile GEMM (amx/amx_kquant_gemm.cpp) — unpacking a sub-block's tile bytes into 16-row
// lanes, the per-row sub-block scales, and the float update per super-block that repeats
// finish_k4 / finish_d of kernels/dot_kquants.cpp, so every kernel keeps the row kernels' bits.
// Include only inside a region compiled for AVX-512 F/BW/VL/VNNI (a target pragma).
#pragma once

#include "kernels/simd_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "kernels/avx512/fifth_bits.h"
#include "kernels/dot_kquants.h"
#include "kernels/packed/kquant_layout.h"

namespace tandem::avx512::kquant_ops {

using packed::Q4KLayout;
using packed::Q5KLayout;
using packed::Q6KLayout;

// Keeps a float product from being fused into a neighbouring add (the row kernels round
// every product separately; see dot_kquants.cpp).
inline __m512 opaque(__m512 v) {
  asm("" : "+v"(v));
  return v;
}

// ---- Unpacking one sub-block's tile bytes ------------------------------------------------

inline void q4k_tile_rows(const uint8_t* packed, __m512i rows[8]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int i = 0; i < 4; ++i) {
    const __m512i bytes = _mm512_loadu_si512(packed + 64 * i);
    rows[i] = _mm512_and_si512(bytes, nibble);
    rows[i + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), nibble);
  }
}

// Q5_K: Q4_K's nibbles with each line's fifth bit from the sub-block's bit planes.
inline void q5k_tile_rows(const uint8_t* packed, __m512i rows[8]) {
  q4k_tile_rows(packed, rows);
  or_fifth_bits(packed + Q5KLayout::kFifthBits, rows);
}

inline void q6k_tile_rows(const uint8_t* packed, __m512i rows[4]) {
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i top = _mm512_set1_epi8(0x30);
  const __m512i low0 = _mm512_loadu_si512(packed);
  const __m512i low1 = _mm512_loadu_si512(packed + 64);
  const __m512i high = _mm512_loadu_si512(packed + 128);
  // 16-bit shifts carry bits across bytes; the masks keep only each byte's own bits.
  rows[0] = _mm512_or_si512(_mm512_and_si512(low0, nibble), _mm512_and_si512(_mm512_slli_epi16(high, 4), top));
  rows[1] = _mm512_or_si512(_mm512_and_si512(low1, nibble), _mm512_and_si512(_mm512_slli_epi16(high, 2), top));
  rows[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low0, 4), nibble), _mm512_and_si512(high, top));
  rows[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low1, 4), nibble),
                            _mm512_and_si512(_mm512_srli_epi16(high, 2), top));
}

// A pair vector (32-bit lane n = two 16-bit values of row n) from 32 packed bytes.
inline __m512i unsigned_pairs(const uint8_t* bytes) {
  return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}
inline __m512i signed_pairs(const uint8_t* bytes) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}
// The even (low 16 bits) and odd (high 16 bits) member of each pair as int32.
inline __m512i even_of_pairs(__m512i pairs, bool is_signed) {
  return is_signed ? _mm512_srai_epi32(_mm512_slli_epi32(pairs, 16), 16)
                   : _mm512_and_si512(pairs, _mm512_set1_epi32(0xffff));
}
inline __m512i odd_of_pairs(__m512i pairs, bool is_signed) {
  return is_signed ? _mm512_srai_epi32(pairs, 16) : _mm512_srli_epi32(pairs, 16);
}

inline __m512 f16_lanes(const uint8_t* bytes) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bytes)));
}

inline int32_t word_at(const void* bytes, int i) {
  int32_t word;
  std::memcpy(&word, static_cast<const uint8_t*>(bytes) + 4 * i, 4);
  return word;
}

// ---- Per super-block float update (finish_k4 / finish_d of dot_kquants.cpp) --------------

// Q4_K and Q5_K: (x_scale * d) * sumi - (x_scale * dmin) * summ, added to acc.
template <typename Layout>
inline __m512 finish_k4(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
  // summ = sum_j min_j * (block_sums[2j] + block_sums[2j+1]); the 32-element sums fit int16.
  const __m256i sums16 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.block_sums));
  const __m256i sums32 = _mm256_madd_epi16(sums16, _mm256_set1_epi16(1));
  alignas(16) int32_t pair_words[4];
  _mm_store_si128(reinterpret_cast<__m128i*>(pair_words),
                  _mm_packs_epi32(_mm256_castsi256_si128(sums32), _mm256_extracti128_si256(sums32, 1)));
  __m512i summ = _mm512_setzero_si512();
  for (int i = 0; i < 4; ++i)
    summ = _mm512_dpwssd_epi32(summ, unsigned_pairs(block + Layout::kMins + 32 * i), _mm512_set1_epi32(pair_words[i]));
  const __m512 x_scale = _mm512_set1_ps(x.scale);
  const __m512 scaled =
      opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Layout::kD)), _mm512_cvtepi32_ps(sumi)));
  const __m512 offset =
      opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Layout::kDmin)), _mm512_cvtepi32_ps(summ)));
  return _mm512_add_ps(acc, opaque(_mm512_sub_ps(scaled, offset)));
}

// Q6_K: sumi arrives as sum_j scale_j * dot_j over the unsigned (q + 32) weights; remove
// 32 * sum_j scale_j * (sum of sub-block j's x), then (x_scale * d) * sumi added to acc.
inline __m512 finish_q6k(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
  __m512i offset = _mm512_setzero_si512();
  for (int i = 0; i < 8; ++i)
    offset = _mm512_dpwssd_epi32(offset, signed_pairs(block + Q6KLayout::kScales + 32 * i),
                                 _mm512_set1_epi32(word_at(x.block_sums, i)));
  sumi = _mm512_sub_epi32(sumi, _mm512_slli_epi32(offset, 5));
  const __m512 x_scale = _mm512_set1_ps(x.scale);
  const __m512 scaled =
      opaque(_mm512_mul_ps(_mm512_mul_ps(x_scale, f16_lanes(block + Q6KLayout::kD)), _mm512_cvtepi32_ps(sumi)));
  return _mm512_add_ps(acc, scaled);
}

template <DType kType>
struct Format;
template <>
struct Format<DType::Q4_K> {
  using Layout = Q4KLayout;
  static constexpr bool kSignedScales = false;
  static constexpr int kTileRows = 8;  // 64-byte tile rows per sub-block
  static void tile_rows(const uint8_t* packed, __m512i* rows) { q4k_tile_rows(packed, rows); }
  static __m512 finish(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
    return finish_k4<Layout>(acc, block, x, sumi);
  }
};
template <>
struct Format<DType::Q5_K> {
  using Layout = Q5KLayout;
  static constexpr bool kSignedScales = false;
  static constexpr int kTileRows = 8;
  static void tile_rows(const uint8_t* packed, __m512i* rows) { q5k_tile_rows(packed, rows); }
  static __m512 finish(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
    return finish_k4<Layout>(acc, block, x, sumi);
  }
};
template <>
struct Format<DType::Q6_K> {
  using Layout = Q6KLayout;
  static constexpr bool kSignedScales = true;
  static constexpr int kTileRows = 4;
  static void tile_rows(const uint8_t* packed, __m512i* rows) { q6k_tile_rows(packed, rows); }
  static __m512 finish(__m512 acc, const uint8_t* block, const ActivationBlockQ8K& x, __m512i sumi) {
    return finish_q6k(acc, block, x, sumi);
  }
};

// Sub-block j's scale in every row, as int32 lanes.
template <DType kType>
inline __m512i sub_block_scales(const uint8_t* block, int j) {
  using F = Format<kType>;
  const uint8_t* pairs = block + F::Layout::kScales + 32 * (j / 2);
  const __m512i both = F::kSignedScales ? signed_pairs(pairs) : unsigned_pairs(pairs);
  return j % 2 == 0 ? even_of_pairs(both, F::kSignedScales) : odd_of_pairs(both, F::kSignedScales);
}

// Prefetches part `part` of `parts` of a packed super-block: spread over the sub-block
// loop, since a burst of prefetches for a whole block stalls once the fill buffers are full.
inline void prefetch_part(const uint8_t* block, int64_t bytes, int part, int parts) {
  const int64_t begin = bytes * part / parts / 64 * 64, end = bytes * (part + 1) / parts;
  for (int64_t line = begin; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(block + line), _MM_HINT_T0);
}

}  // namespace tandem::avx512::kquant_ops
