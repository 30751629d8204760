// The AVX2 level's GEMM for the 32-element block formats (Q8_0, Q4_0, Q5_0, Q5_1, IQ4_NL,
// MXFP4) on the packed layout the SIMD levels share (packed/q8_layout.h): a 64-byte line of
// a group-block holds 4 consecutive elements of 16 rows, so its two 32-byte halves are 8 rows
// each, one row per 32-bit lane.
//
// Why: the row-major kernels (gemm_avx2.cpp, gemm_q32_avx2.cpp) end every block with work
// per row — a scale converted and broadcast, a float multiply-add per row and block, a final
// horizontal sum — about 14 vector ops per row and block for Q4_0 decode, which leaves them
// compute-bound at ~9 GB/s a core. Here 8 rows' scales are one conversion, an activation's 4
// bytes are one broadcast serving 8 rows, and the float step runs once per 8 rows: decode is
// bound by memory again.
//
// Integers: maddubs multiplies unsigned by signed bytes, and its pair sums saturate at 32767.
// Q8_0 and IQ4_NL (levels up to 127 in magnitude) move the weight's sign onto the activation
// (sign(x, w), |w| unsigned: pairs at most 2 * 127 * 127 < 32767), one 32-bit madd a line.
// The others are unsigned codes u = w + o (Q4_0 q + 8, Q5_0 five bits with o = 16, Q5_1
// o = 0, MXFP4 level + 12) whose int16 products add up in one register over as many lines as
// stay below 32767 (Q4_0 all 8: 8 * 2 * 15 * 127 = 30480; the 5-bit codes 4: 4 * 2 * 31 * 127
// = 31496), and o * sum(x) comes off once per token and block. Either way each lane holds the
// exact integer dot, and the float step per block is the AVX-512 and AMX kernels' —
// acc = fma(float(dot), d_row * d_x, acc), blocks in order, Q5_1's fma(m_row, d_x * sum(x))
// after — so this level gives their bits, and a (row, token) pair's result never depends on
// the tile or row range it was computed in.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
#include "base/quant32.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/packed/q8_layout.h"
#include "kernels/packed/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/packed_halves.h"

namespace tandem::avx2 {

namespace {

using packed::kGroupRows;

// Prefill: tokens per pass over a half group (1-thread 5632x2048x64, GFLOP/s at tiles of
// 3 / 4 / 5 tokens: Q4_0 180 / 163 / 160, Q8_0 116 / 123 / 122; 16 registers).
template <DType kType>
constexpr int kTokenTile = kType == DType::Q8_0 ? 4 : 3;
constexpr int64_t kSliceGroups = 4;  // rows per slice whose weights stay in L2: 64
// Decode prefetch distance in group-blocks, about 2.2 KB ahead as at AVX-512 (tinyllama tg64,
// 2 threads: Q4_0 37.8 without prefetch -> 44.8, Q8_0 23.8 -> 24.5 tok/s).
template <DType kType>
constexpr int64_t kPrefetchBlocks = 2304 / packed::q8_group_block_bytes(kType);

// What the unsigned-code formats add to their weights (see the head comment); Q8_0 and
// IQ4_NL are signed.
template <DType kType>
constexpr int32_t kCodeOffset = kType == DType::Q4_0    ? 8
                                : kType == DType::Q5_0  ? 16
                                : kType == DType::MXFP4 ? 12
                                                        : 0;
template <DType kType>
constexpr bool kSignedCodes = kType == DType::Q8_0 || kType == DType::IQ4_NL;
// Lines whose int16 products one register can add up before the 32-bit madd.
template <DType kType>
constexpr int kLinesPerSum = kType == DType::Q4_0 ? 8 : 4;

inline __m256i broadcast4(const int8_t* quants) {
  int32_t four;
  std::memcpy(&four, quants, 4);
  return _mm256_set1_epi32(four);
}

// The sum of a block's 32 activations (the offset's and Q5_1's min's share).
inline int32_t block_sum(const ActivationBlockQ8& block) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.quants));
  const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq), _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The codebook (+ offset) as bytes in both 128-bit lanes (vpshufb looks up per lane).
template <DType kType>
inline __m256i codebook() {
  const int8_t* levels = kType == DType::IQ4_NL ? kIq4nlValues : kMxfp4Values;
  const __m128i table = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)),
                                     _mm_set1_epi8(static_cast<char>(kCodeOffset<kType>)));
  return _mm256_broadcastsi128_si256(table);
}

// Line m (0..7) of half h of a block as codes (unsigned, or IQ4_NL's signed levels).
template <DType kType>
inline __m256i line_codes(const uint8_t* block, int h, int m, __m256i table) {
  if constexpr (kType == DType::Q8_0)
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * m + 32 * h));
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * (m % 4) + 32 * h));
  __m256i codes = m < 4 ? _mm256_and_si256(bytes, low_mask) : _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);
  if constexpr (kType == DType::Q5_0 || kType == DType::Q5_1) {
    // Bit m of each plane byte to bit 4 (16-bit shifts never carry a neighbour's bit there).
    const __m256i planes =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + packed::kFifthBitsOffset + 32 * h));
    const __m256i moved = m <= 4 ? _mm256_slli_epi16(planes, 4 - m) : _mm256_srli_epi16(planes, m - 4);
    codes = _mm256_or_si256(codes, _mm256_and_si256(moved, _mm256_set1_epi8(0x10)));
  }
  if constexpr (kType == DType::IQ4_NL || kType == DType::MXFP4) codes = _mm256_shuffle_epi8(table, codes);
  return codes;
}

// The exact integer dots of one block: 8 rows (half h of the group-block) x kTokens tokens.
template <DType kType, int kTokens>
inline void block_dots(const uint8_t* block, int h, const ActivationBlockQ8* const* activations, int64_t b,
                       const int32_t* const* sums, __m256i table, __m256i* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) dots[t] = _mm256_setzero_si256();
  if constexpr (kSignedCodes<kType>) {
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const __m256i w = line_codes<kType>(block, h, m, table);
      const __m256i w_abs = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m256i products =
            _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(broadcast4(activations[t][b].quants + 4 * m), w));
        dots[t] = _mm256_add_epi32(dots[t], _mm256_madd_epi16(products, ones));
      }
    }
  } else {
    // Lines in the nibble order: low nibbles of the 4 byte lines (lines 0-3), then the high.
    __m256i products[kTokens];
#pragma GCC unroll 8
    for (int m = 0; m < 8; ++m) {
      const __m256i w = line_codes<kType>(block, h, m, table);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m256i p = _mm256_maddubs_epi16(w, broadcast4(activations[t][b].quants + 4 * m));
        products[t] = m % kLinesPerSum<kType> == 0 ? p : _mm256_add_epi16(products[t], p);
        if (m % kLinesPerSum<kType> == kLinesPerSum<kType> - 1)
          dots[t] = _mm256_add_epi32(dots[t], _mm256_madd_epi16(products[t], ones));
      }
    }
    if constexpr (kCodeOffset<kType> != 0)
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        dots[t] = _mm256_sub_epi32(dots[t], _mm256_set1_epi32(kCodeOffset<kType> * sums[t][b]));
  }
}

// Half h's 8 row scales of a group-block: fp16 d, or MXFP4's exact 2^(e - 128).
template <DType kType>
inline __m256 half_row_scales(const uint8_t* block, int h) {
  const uint8_t* scales = block + packed::q8_scales_offset(kType);
  if constexpr (kType == DType::MXFP4) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales + 8 * h)));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
    const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales + 16 * h)));
  }
}

// One row group x kTokens tokens, halves [h_begin, h_end) of it (both halves per block in
// decode, so each line of the stream is used whole; one half at a time in prefill, where
// the registers go to more tokens). out: the group's first row of the first token.
template <DType kType, int kTokens, int kHalves>
void group_tokens(const uint8_t* group, int64_t n_blocks, int h_first, const ActivationBlockQ8* x, const int32_t* sums,
                  float* out, int64_t out_stride, int64_t store_begin, int64_t store_end) {
  constexpr int64_t kBytes = packed::q8_group_block_bytes(kType);
  const ActivationBlockQ8* activations[kTokens];
  const int32_t* token_sums[kTokens];
  for (int t = 0; t < kTokens; ++t) {
    activations[t] = x + t * n_blocks;
    token_sums[t] = sums + t * n_blocks;
  }
  __m256i table = _mm256_setzero_si256();
  if constexpr (kType == DType::IQ4_NL || kType == DType::MXFP4) table = codebook<kType>();
  __m256 acc[kHalves][kTokens];
#pragma GCC unroll 8
  for (int i = 0; i < kHalves * kTokens; ++i) acc[i / kTokens][i % kTokens] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * kBytes;
    if constexpr (kHalves == 2)  // decode streams the weights once: fetch ahead
      for (int64_t line = 0; line < kBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks<kType> * kBytes + line), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int i = 0; i < kHalves; ++i) {
      const int h = h_first + i;
      __m256i dots[kTokens];
      block_dots<kType, kTokens>(block, h, activations, b, token_sums, table, dots);
      const __m256 row_scales = half_row_scales<kType>(block, h);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[t]),
                                    _mm256_mul_ps(row_scales, _mm256_set1_ps(activations[t][b].scale)), acc[i][t]);
      if constexpr (kType == DType::Q5_1) {  // + m_row * d_x * sum(x)
        const __m256 mins = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + packed::q8_scales_offset(kType) + 32 + 16 * h)));
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t)
          acc[i][t] = _mm256_fmadd_ps(
              mins, _mm256_set1_ps(activations[t][b].scale * static_cast<float>(token_sums[t][b])), acc[i][t]);
      }
    }
  }
  for (int i = 0; i < kHalves; ++i)
    for (int t = 0; t < kTokens; ++t)
      store_half_rows(acc[i][t], 8 * (h_first + i), store_begin, store_end, out + t * out_stride + 8 * (h_first + i));
}

template <DType kType>
void gemm_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t group_bytes = n_blocks * packed::q8_group_block_bytes(kType);
  // The block sums the offsets and Q5_1's mins need, once per call for every token (the call
  // covers a thread's row range).
  thread_local std::vector<int32_t> sums;
  if constexpr (kType != DType::Q8_0 && kType != DType::IQ4_NL) {
    if (sums.size() < static_cast<size_t>(n_tokens * n_blocks)) sums.resize(static_cast<size_t>(n_tokens * n_blocks));
    for (int64_t i = 0; i < n_tokens * n_blocks; ++i) sums[i] = block_sum(x[i]);
  }
  const int32_t* all_sums = sums.data();
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile<kType>,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                const uint8_t* group = weight.packed + g * group_bytes;
                                store_begin -= g * kGroupRows;
                                store_end -= g * kGroupRows;
                                if (count == kTokenTile<kType>) {
                                  for (int h = 0; h < 2; ++h)
                                    group_tokens<kType, kTokenTile<kType>, 1>(
                                        group, n_blocks, h, x + token * n_blocks, all_sums + token * n_blocks,
                                        out + token * out_stride + g * kGroupRows, out_stride, store_begin, store_end);
                                  return;
                                }
                                for (int64_t t = token; t < token + count; ++t)  // decode, and a prefill's last tokens
                                  group_tokens<kType, 1, 2>(
                                      group, n_blocks, 0, x + t * n_blocks, all_sums + t * n_blocks,
                                      out + t * out_stride + g * kGroupRows, out_stride, store_begin, store_end);
                              });
}

}  // namespace

void gemm_q8_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && packed::q8_packable(weight));
  switch (weight.dtype) {
    case DType::Q8_0: return gemm_typed<DType::Q8_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q4_0: return gemm_typed<DType::Q4_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_0: return gemm_typed<DType::Q5_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_1: return gemm_typed<DType::Q5_1>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::IQ4_NL: return gemm_typed<DType::IQ4_NL>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::MXFP4: return gemm_typed<DType::MXFP4>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
