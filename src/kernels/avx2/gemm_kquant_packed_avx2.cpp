// The AVX2 level's Q4_K/Q5_K/Q6_K GEMM on the packed layout the SIMD levels share
// (packed/kquant_layout.h): the 32 bytes at k * 64 + 32 h of a sub-block's tile bytes are
// elements 4k..4k+3 of rows 8h..8h+7, one row per 32-bit lane, so a row's sums stay in its
// lane and the per-block work (scales, the float update) runs once per 8 rows instead of
// once per row with a horizontal sum, as the row kernels must.
//
// Integers per lane, exactly the row kernels': maddubs multiplies the unsigned weights
// (Q4_K and Q5_K q, Q6_K q + 32) by a token's 4 activation bytes broadcast into int16
// pairs; pairs add up in int16 while they cannot overflow (Q4_K: a whole sub-block,
// 8 * 2 * 15 * 127 = 30480; Q5_K: half of one, 4 * 2 * 31 * 127 = 31496; Q6_K: two lines,
// 2 * 2 * 63 * 127 = 32004), then madd with the row's sub-block scale in both halves of its
// lane gives scale * dot in int32. Q4_K's and Q5_K's mins and Q6_K's 32-offset
// are madds of the packed scale pairs against the activations' 32- and 16-element sums. The
// float update per super-block repeats finish_k4 / finish_d of kernels/dot_kquants.cpp, each
// product kept from fusing: every result equals the row kernels' (and every other level's)
// bit for bit, whatever the token count, tile or row range.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/packed/kquant_layout.h"
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
using packed::Q4KLayout;
using packed::Q5KLayout;
using packed::Q6KLayout;

// Prefill: tokens per pass over a half group (1-thread 5632x2048x64, GFLOP/s at tiles of
// 3 / 5 tokens: Q4_K 174 / 170, Q6_K 142 / 155; 16 registers).
template <DType kType>
constexpr int kTokenTile = kType == DType::Q6_K ? 5 : 3;
constexpr int64_t kSliceGroups = 4;  // rows per slice whose weights stay in L2: 64

// Keeps a float product from being fused into a neighbouring add (see dot_kquants.cpp).
inline __m256 opaque(__m256 v) {
  asm("" : "+x"(v));
  return v;
}

inline __m256i broadcast4(const int8_t* bytes) {
  int32_t word;
  std::memcpy(&word, bytes, 4);
  return _mm256_set1_epi32(word);
}

inline int32_t word_at(const void* bytes, int i) {
  int32_t word;
  std::memcpy(&word, static_cast<const uint8_t*>(bytes) + 4 * i, 4);
  return word;
}

// 16 packed bytes (8 rows x a pair) as int16 pairs, one row per 32-bit lane.
inline __m256i pairs16(const uint8_t* bytes, bool is_signed) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes));
  return is_signed ? _mm256_cvtepi8_epi16(raw) : _mm256_cvtepu8_epi16(raw);
}

// Member e (0 even, 1 odd) of each lane's pair in both int16 halves of the lane.
inline __m256i duplicate_member(__m256i pairs, int e) {
  return e == 0 ? _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(pairs, 0xa0), 0xa0)
                : _mm256_shufflehi_epi16(_mm256_shufflelo_epi16(pairs, 0xf5), 0xf5);
}

inline __m256 f16_lanes(const uint8_t* bytes) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
}

// (sum of sub-block pair i's activations) as the int16 pair (bs[4i] + bs[4i+1], bs[4i+2] + bs[4i+3]).
inline void q4k_pair_sums(const ActivationBlockQ8K& x, int32_t words[4]) {
  const __m256i sums32 =
      _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.block_sums)), _mm256_set1_epi16(1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(words),
                   _mm_packs_epi32(_mm256_castsi256_si128(sums32), _mm256_extracti128_si256(sums32, 1)));
}

// Q4_K or Q5_K (the same scales, mins and float step; Q5_K's fifth bits as planes after
// each sub-block's nibbles), half h of a super-block, kTokens tokens: acc[t] += finish_k4
// per row lane.
template <DType kType, int kTokens>
inline void k4_block(const uint8_t* block, int h, const ActivationBlockQ8K* const* x, __m256* acc) {
  using Layout = std::conditional_t<kType == DType::Q5_K, Q5KLayout, Q4KLayout>;
  constexpr bool kFifthBits = kType == DType::Q5_K;
  constexpr int kLinePairsPerSum = kFifthBits ? 2 : 4;  // int16 sums cannot overflow (head comment)
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  __m256i sumi[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) sumi[t] = _mm256_setzero_si256();
  for (int j = 0; j < Layout::kSubBlocks; ++j) {
    const uint8_t* tile = block + j * Layout::kSubBlockBytes + 32 * h;
    const __m256i scale = duplicate_member(pairs16(block + Layout::kScales + 32 * (j / 2) + 16 * h, false), j % 2);
    __m256i planes = _mm256_setzero_si256();
    if constexpr (kFifthBits)
      planes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + Q5KLayout::kFifthBits));
    __m256i sums[kTokens];
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + 64 * k));
      __m256i low = _mm256_and_si256(bytes, nibble);                         // line k
      __m256i high = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), nibble);  // line k + 4
      if constexpr (kFifthBits) {  // bit k and bit k + 4 of each plane byte to bit 4
        low = _mm256_or_si256(low, _mm256_and_si256(_mm256_slli_epi16(planes, 4 - k), bit4));
        high = _mm256_or_si256(high, _mm256_and_si256(k == 0 ? planes : _mm256_srli_epi16(planes, k), bit4));
      }
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const int8_t* a = x[t]->quants + 32 * j;
        const __m256i pair = _mm256_add_epi16(_mm256_maddubs_epi16(low, broadcast4(a + 4 * k)),
                                              _mm256_maddubs_epi16(high, broadcast4(a + 16 + 4 * k)));
        sums[t] = k % kLinePairsPerSum == 0 ? pair : _mm256_add_epi16(sums[t], pair);
        if (k % kLinePairsPerSum == kLinePairsPerSum - 1)
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(sums[t], scale));
      }
    }
  }
  const __m256 d = f16_lanes(block + Layout::kD + 16 * h);
  const __m256 dmin = f16_lanes(block + Layout::kDmin + 16 * h);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    int32_t pair_words[4];
    q4k_pair_sums(*x[t], pair_words);
    __m256i summ = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i)
      summ = _mm256_add_epi32(summ, _mm256_madd_epi16(pairs16(block + Layout::kMins + 32 * i + 16 * h, false),
                                                      _mm256_set1_epi32(pair_words[i])));
    const __m256 x_scale = _mm256_set1_ps(x[t]->scale);
    const __m256 scaled = opaque(_mm256_mul_ps(_mm256_mul_ps(x_scale, d), _mm256_cvtepi32_ps(sumi[t])));
    const __m256 offset = opaque(_mm256_mul_ps(_mm256_mul_ps(x_scale, dmin), _mm256_cvtepi32_ps(summ)));
    acc[t] = _mm256_add_ps(acc[t], opaque(_mm256_sub_ps(scaled, offset)));
  }
}

// Q6_K, half h of a super-block, kTokens tokens: acc[t] += finish_d per row lane.
template <int kTokens>
inline void q6k_block(const uint8_t* block, int h, const ActivationBlockQ8K* const* x, __m256* acc) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i top = _mm256_set1_epi8(0x30);
  __m256i sumi[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) sumi[t] = _mm256_setzero_si256();
  for (int j = 0; j < Q6KLayout::kSubBlocks; ++j) {
    const uint8_t* sub_block = block + j * Q6KLayout::kSubBlockBytes;
    const __m256i low0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub_block + 32 * h));
    const __m256i low1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub_block + 64 + 32 * h));
    const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sub_block + 128 + 32 * h));
    // 16-bit shifts carry bits across bytes; the masks keep only each byte's own bits.
    const __m256i lines[4] = {
        _mm256_or_si256(_mm256_and_si256(low0, nibble), _mm256_and_si256(_mm256_slli_epi16(high, 4), top)),
        _mm256_or_si256(_mm256_and_si256(low1, nibble), _mm256_and_si256(_mm256_slli_epi16(high, 2), top)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low0, 4), nibble), _mm256_and_si256(high, top)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(low1, 4), nibble),
                        _mm256_and_si256(_mm256_srli_epi16(high, 2), top)),
    };
    const __m256i scale = duplicate_member(pairs16(block + Q6KLayout::kScales + 32 * (j / 2) + 16 * h, true), j % 2);
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const int8_t* a = x[t]->quants + 16 * j;
      const __m256i first = _mm256_add_epi16(_mm256_maddubs_epi16(lines[0], broadcast4(a)),
                                             _mm256_maddubs_epi16(lines[1], broadcast4(a + 4)));
      const __m256i second = _mm256_add_epi16(_mm256_maddubs_epi16(lines[2], broadcast4(a + 8)),
                                              _mm256_maddubs_epi16(lines[3], broadcast4(a + 12)));
      sumi[t] = _mm256_add_epi32(sumi[t],
                                 _mm256_add_epi32(_mm256_madd_epi16(first, scale), _mm256_madd_epi16(second, scale)));
    }
  }
  const __m256 d = f16_lanes(block + Q6KLayout::kD + 16 * h);
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) {
    __m256i offset = _mm256_setzero_si256();  // sum_j scale_j * (sum of sub-block j's x)
    for (int i = 0; i < 8; ++i)
      offset = _mm256_add_epi32(offset, _mm256_madd_epi16(pairs16(block + Q6KLayout::kScales + 32 * i + 16 * h, true),
                                                          _mm256_set1_epi32(word_at(x[t]->block_sums, i))));
    const __m256i sum = _mm256_sub_epi32(sumi[t], _mm256_slli_epi32(offset, 5));
    const __m256 scaled = opaque(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(x[t]->scale), d), _mm256_cvtepi32_ps(sum)));
    acc[t] = _mm256_add_ps(acc[t], scaled);
  }
}

// Prefetches part `part` of `parts` of a packed super-block, spread over the block's work.
inline void prefetch_part(const uint8_t* block, int64_t bytes, int part, int parts) {
  const int64_t begin = bytes * part / parts / 64 * 64, end = bytes * (part + 1) / parts;
  for (int64_t line = begin; line < end; line += 64)
    _mm_prefetch(reinterpret_cast<const char*>(block + line), _MM_HINT_T0);
}

// One row group x kTokens tokens, halves h_first..h_first + kHalves - 1 (both per block in
// decode, so each line of the stream is used whole; one at a time in prefill, where the
// registers go to more tokens). out: the group's first row of the first token.
template <DType kType, int kTokens, int kHalves>
void group_tokens(const uint8_t* group, int64_t n_blocks, int h_first, const ActivationBlockQ8K* x, bool prefetch,
                  float* out, int64_t out_stride, int64_t store_begin, int64_t store_end) {
  constexpr int64_t kBytes = packed::kquant_group_block_bytes(kType);
  __m256 acc[kHalves][kTokens];
  for (int i = 0; i < kHalves; ++i)
    for (int t = 0; t < kTokens; ++t) acc[i][t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * kBytes;
    const ActivationBlockQ8K* tokens[kTokens];
    for (int t = 0; t < kTokens; ++t) tokens[t] = x + t * n_blocks + b;
    for (int i = 0; i < kHalves; ++i) {
      if (prefetch && b + 1 < n_blocks) prefetch_part(block + kBytes, kBytes, i, kHalves);
      if constexpr (kType == DType::Q6_K)
        q6k_block<kTokens>(block, h_first + i, tokens, acc[i]);
      else
        k4_block<kType, kTokens>(block, h_first + i, tokens, acc[i]);
    }
  }
  for (int i = 0; i < kHalves; ++i)
    for (int t = 0; t < kTokens; ++t)
      store_half_rows(acc[i][t], 8 * (h_first + i), store_begin, store_end, out + t * out_stride + 8 * (h_first + i));
}

template <DType kType>
void gemm_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 256;
  const int64_t group_bytes = n_blocks * packed::kquant_group_block_bytes(kType);
  const bool prefetch = n_tokens < kTokenTile<kType>;  // decode streams the weights once
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile<kType>,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                const uint8_t* group = weight.packed + g * group_bytes;
                                store_begin -= g * kGroupRows;
                                store_end -= g * kGroupRows;
                                if (count == kTokenTile<kType>) {
                                  for (int h = 0; h < 2; ++h)
                                    group_tokens<kType, kTokenTile<kType>, 1>(
                                        group, n_blocks, h, x + token * n_blocks, false,
                                        out + token * out_stride + g * kGroupRows, out_stride, store_begin, store_end);
                                  return;
                                }
                                for (int64_t t = token; t < token + count; ++t)  // decode, and a prefill's last tokens
                                  group_tokens<kType, 1, 2>(group, n_blocks, 0, x + t * n_blocks, prefetch,
                                                            out + t * out_stride + g * kGroupRows, out_stride,
                                                            store_begin, store_end);
                              });
}

}  // namespace

void gemm_kquant_packed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                        int64_t n_tokens, float* out, int64_t out_stride) {
  TANDEM_ASSERT(weight.packed != nullptr && packed::kquant_packable(weight));
  switch (weight.dtype) {
    case DType::Q4_K: return gemm_typed<DType::Q4_K>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_K: return gemm_typed<DType::Q5_K>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q6_K: return gemm_typed<DType::Q6_K>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
