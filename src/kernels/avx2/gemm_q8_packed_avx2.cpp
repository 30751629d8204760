// The AVX2 level's Q8_0/Q4_0 GEMM on the packed layout the SIMD levels share
// (packed/q8_layout.h): a 64-byte line of a group-block holds 4 consecutive elements of 16
// rows, so its two 32-byte halves are 8 rows each, one row per 32-bit lane.
//
// Why: the row-major kernel (gemm_avx2.cpp) ends every block with work per row — a scale
// converted and broadcast, a float multiply-add per row and block, a final horizontal sum —
// about 14 vector ops per row and block for Q4_0 decode, which leaves it compute-bound at
// ~9 GB/s a core. Here 8 rows' scales are one F16C conversion, an activation's 4 bytes are
// one broadcast serving 8 rows, and the float step runs once per 8 rows: decode is bound by
// memory again.
//
// Integers: maddubs multiplies unsigned by signed bytes. Q8_0 moves the weight's sign onto
// the activation (sign(x, w), |w| unsigned: pairs at most 2 * 128 * 127 < 32767); Q4_0's
// nibbles (q + 8) are unsigned, their int16 products of a whole block add up in one register
// (|sum| <= 8 * 2 * 15 * 127 = 30480) and 8 * sum(x) comes off once per token and block.
// Either way each lane holds the exact integer dot, and the float step per block is the
// AVX-512 and AMX kernels' — acc = fma(float(dot), d_row * d_x, acc), blocks in order — so
// this level gives their bits, and a (row, token) pair's result never depends on the tile
// or row range it was computed in.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "base/dtype.h"
#include "base/error.h"
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
constexpr int kTokenTile = kType == DType::Q4_0 ? 3 : 4;
constexpr int64_t kSliceGroups = 4;  // rows per slice whose weights stay in L2: 64
// Decode prefetch distance in group-blocks, about 2.2 KB ahead as at AVX-512 (tinyllama tg64,
// 2 threads: Q4_0 37.8 without prefetch -> 44.8, Q8_0 23.8 -> 24.5 tok/s).
template <DType kType>
constexpr int64_t kPrefetchBlocks = kType == DType::Q8_0 ? 4 : 8;

inline __m256i broadcast4(const int8_t* quants) {
  int32_t four;
  std::memcpy(&four, quants, 4);
  return _mm256_set1_epi32(four);
}

// 8 * (sum of a block's 32 activations): what Q4_0's +8 offset adds to each row's block dot.
inline int32_t q4_0_block_offset(const ActivationBlockQ8& block) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block.quants));
  const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xq), _mm256_set1_epi16(1));
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// The exact integer dots of one block: 8 rows (half h of the group-block) x kTokens tokens.
template <DType kType, int kTokens>
inline void block_dots(const uint8_t* block, int h, const ActivationBlockQ8* const* activations, int64_t b,
                       const int32_t* const* offsets, __m256i* dots) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kType == DType::Q4_0) {
    const __m256i low_mask = _mm256_set1_epi8(0x0f);
    __m256i sums[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) sums[t] = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * k + 32 * h));
      const __m256i low = _mm256_and_si256(bytes, low_mask);                         // elements 4k..4k+3
      const __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low_mask);  // 16+4k..16+4k+3
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const int8_t* xq = activations[t][b].quants;
        sums[t] = _mm256_add_epi16(sums[t], _mm256_maddubs_epi16(low, broadcast4(xq + 4 * k)));
        sums[t] = _mm256_add_epi16(sums[t], _mm256_maddubs_epi16(high, broadcast4(xq + 16 + 4 * k)));
      }
    }
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t)
      dots[t] = _mm256_sub_epi32(_mm256_madd_epi16(sums[t], ones), _mm256_set1_epi32(offsets[t][b]));
  } else {
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) dots[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + 64 * k + 32 * h));
      const __m256i w_abs = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const __m256i products =
            _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(broadcast4(activations[t][b].quants + 4 * k), w));
        dots[t] = _mm256_add_epi32(dots[t], _mm256_madd_epi16(products, ones));
      }
    }
  }
}

// One row group x kTokens tokens, halves [h_begin, h_end) of it (both halves per block in
// decode, so each line of the stream is used whole; one half at a time in prefill, where
// the registers go to more tokens). out: the group's first row of the first token.
template <DType kType, int kTokens, int kHalves>
void group_tokens(const uint8_t* group, int64_t n_blocks, int h_first, const ActivationBlockQ8* x,
                  const int32_t* offsets, float* out, int64_t out_stride, int64_t store_begin, int64_t store_end) {
  constexpr int64_t kBytes = packed::q8_group_block_bytes(kType);
  constexpr int64_t kScales = kType == DType::Q8_0 ? packed::kScalesOffsetQ8 : packed::kScalesOffsetQ4;
  const ActivationBlockQ8* activations[kTokens];
  const int32_t* token_offsets[kTokens];
  for (int t = 0; t < kTokens; ++t) {
    activations[t] = x + t * n_blocks;
    token_offsets[t] = offsets + t * n_blocks;
  }
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
      block_dots<kType, kTokens>(block, h, activations, b, token_offsets, dots);
      const __m256 row_scales =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kScales + 16 * h)));
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        acc[i][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[t]),
                                    _mm256_mul_ps(row_scales, _mm256_set1_ps(activations[t][b].scale)), acc[i][t]);
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
  // Q4_0's offsets, once per call for every token (the call covers a thread's row range).
  thread_local std::vector<int32_t> offsets;
  if constexpr (kType == DType::Q4_0) {
    if (offsets.size() < static_cast<size_t>(n_tokens * n_blocks))
      offsets.resize(static_cast<size_t>(n_tokens * n_blocks));
    for (int64_t i = 0; i < n_tokens * n_blocks; ++i) offsets[i] = q4_0_block_offset(x[i]);
  }
  const int32_t* all_offsets = offsets.data();
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile<kType>,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                const uint8_t* group = weight.packed + g * group_bytes;
                                store_begin -= g * kGroupRows;
                                store_end -= g * kGroupRows;
                                if (count == kTokenTile<kType>) {
                                  for (int h = 0; h < 2; ++h)
                                    group_tokens<kType, kTokenTile<kType>, 1>(
                                        group, n_blocks, h, x + token * n_blocks, all_offsets + token * n_blocks,
                                        out + token * out_stride + g * kGroupRows, out_stride, store_begin, store_end);
                                  return;
                                }
                                for (int64_t t = token; t < token + count; ++t)  // decode, and a prefill's last tokens
                                  group_tokens<kType, 1, 2>(
                                      group, n_blocks, 0, x + t * n_blocks, all_offsets + t * n_blocks,
                                      out + t * out_stride + g * kGroupRows, out_stride, store_begin, store_end);
                              });
}

}  // namespace

void gemm_q8_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && packed::q8_packable(weight));
  if (weight.dtype == DType::Q8_0)
    gemm_typed<DType::Q8_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  else
    gemm_typed<DType::Q4_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
