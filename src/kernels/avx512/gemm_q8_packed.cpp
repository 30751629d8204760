// AVX-512 VNNI GEMM for the 32-element block formats on the packed layout
// (packed/q8_layout.h): line k of a group-block holds elements 4k..4k+3 of all 16 rows, so
// dpbusd with a token's 4 activation bytes broadcast sums each row's block in its own lane.
//
// dpbusd multiplies unsigned by signed bytes. Every format's weights are brought to unsigned
// codes u = w + o: Q8_0 by XOR 0x80 (o = 128), Q4_0 its nibbles (q + 8, o = 8), Q5_0 its five
// bits (o = 16), Q5_1 likewise (o = 0; its min adds m * d_x * sum(x) per block), IQ4_NL and
// MXFP4 their levels + o by vpshufb from the 16-entry codebook (o = 128 and 12). The offset's
// share, o times the block's activation sum, starts each lane's sum negated: the exact
// integer dot, the AMX tile multiply's. The float step per block is the AMX kernel's too —
// acc = fma(float(dot), d_row * d_x, acc), blocks in order — so prefill, decode and the AMX
// level agree bit for bit. A group-block's weights are unpacked once per tile of tokens; rows
// go in slices of a few groups whose weights stay in L2 while every token tile passes over
// them.
#include "kernels/avx512/gemm_packed.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/quant32.h"
#include "kernels/packed/q8_layout.h"
#include "kernels/packed/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#endif

#include "kernels/avx512/fifth_bits.h"

namespace tandem::avx512 {
namespace {

using packed::kGroupRows;

// Tokens per pass over a group (1-thread 5632x2048x64, GFLOP/s at tiles of 4 / 6 / 8 tokens:
// Q8_0 364 / 370 / 391, Q4_0 389 / 415 / 423, Q4_K 305 / 301-317 / 350-362, Q6_K 240 / 284 / 294).
constexpr int kTokenTile = 8;
constexpr int64_t kSliceGroups = 4;
// Decode prefetch distance in group-blocks, about 2.2 KB ahead for either type (tinyllama
// tg64, 2 threads, AMX level: Q4_0 at 4 / 8 / 12 blocks 43.2 / 47.4 / 40.6 tok/s, Q8_0
// 26.7 / 25.7 / 25.3).
// The other formats: as many group-blocks as make the same ~2.2 KB.
template <DType kType>
constexpr int64_t kPrefetchBlocks = 2304 / packed::q8_group_block_bytes(kType);

inline int32_t word_at(const int8_t* bytes, int i) {
  int32_t word;
  std::memcpy(&word, bytes + 4 * i, 4);
  return word;
}

// Each (token, block)'s activation sum, from which the offset term and Q5_1's min term come.
void block_sums(const ActivationBlockQ8* x, int64_t n, int32_t* sums) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < n; ++i) {
    // sum(x) = sum(x + 128) - 32 * 128, the unsigned sum by psadbw against zero.
    const __m256i xq = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].quants)), flip);
    const __m256i sad = _mm256_sad_epu8(xq, _mm256_setzero_si256());
    const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    sums[i] = static_cast<int32_t>(_mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1)) - 32 * 128;
  }
}

// What each format adds to its weights to make them unsigned codes (see the head comment).
template <DType kType>
constexpr int32_t kCodeOffset = kType == DType::Q8_0 || kType == DType::IQ4_NL ? 128
                                : kType == DType::Q4_0                         ? 8
                                : kType == DType::Q5_0                         ? 16
                                : kType == DType::MXFP4                        ? 12
                                                                               : 0;

// The codebook + offset as unsigned bytes in every 128-bit lane (vpshufb looks up per lane).
inline __m512i codebook(const int8_t (&levels)[16], int32_t offset) {
  const __m128i table =
      _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)), _mm_set1_epi8(static_cast<char>(offset)));
  return _mm512_broadcast_i32x4(table);
}

// The 8 lines of one group-block as unsigned codes.
template <DType kType>
inline void unpack_codes(const uint8_t* block, __m512i table, __m512i* rows) {
  if constexpr (kType == DType::Q8_0) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) rows[k] = _mm512_xor_si512(_mm512_loadu_si512(block + 64 * k), flip);
    return;
  }
  const __m512i low_mask = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i bytes = _mm512_loadu_si512(block + 64 * k);
    rows[k] = _mm512_and_si512(bytes, low_mask);
    rows[k + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_mask);
  }
  if constexpr (kType == DType::Q5_0 || kType == DType::Q5_1) or_fifth_bits(block + packed::kFifthBitsOffset, rows);
  if constexpr (kType == DType::IQ4_NL || kType == DType::MXFP4) {
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k) rows[k] = _mm512_shuffle_epi8(table, rows[k]);
  }
}

// The 16 rows' scales of one group-block as floats: fp16 d, or MXFP4's 2^(e - 128) (exact,
// subnormal for e < 2, as base/quant32.h's mxfp4_half_scale).
template <DType kType>
inline __m512 row_scales(const uint8_t* block) {
  const uint8_t* scales = block + packed::q8_scales_offset(kType);
  if constexpr (kType == DType::MXFP4) {
    const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
    const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
    const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
  } else {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
  }
}

// One row group x kTokens tokens (x and sums: the first token's; token t's at + t * n_blocks).
template <DType kType, int kTokens>
void group_tokens(const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8* x, const int32_t* sums,
                  bool prefetch, float* out, int64_t out_stride, __mmask16 mask) {
  constexpr int64_t kBytes = packed::q8_group_block_bytes(kType);
  __m512i table = _mm512_setzero_si512();
  if constexpr (kType == DType::IQ4_NL) table = codebook(kIq4nlValues, kCodeOffset<kType>);
  if constexpr (kType == DType::MXFP4) table = codebook(kMxfp4Values, kCodeOffset<kType>);
  __m512 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * kBytes;
    if (prefetch)
      for (int64_t line = 0; line < kBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks<kType> * kBytes + line), _MM_HINT_T0);
    __m512i rows[8];
    unpack_codes<kType>(block, table, rows);
    const __m512 scales = row_scales<kType>(block);
    // Lines outside, tokens inside: the tokens' dpbusd chains interleave, so two can issue
    // every cycle (one token's 8-deep chain alone waits on dpbusd's 5-cycle latency: ~1 a
    // cycle, measured). Integer sums: any order gives the same bits.
    __m512i lanes[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) lanes[t] = _mm512_set1_epi32(-kCodeOffset<kType> * sums[t * n_blocks + b]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        lanes[t] = _mm512_dpbusd_epi32(lanes[t], rows[k], _mm512_set1_epi32(word_at(x[t * n_blocks + b].quants, k)));
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const float x_scale = x[t * n_blocks + b].scale;
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes[t]), _mm512_mul_ps(scales, _mm512_set1_ps(x_scale)), acc[t]);
    }
    if constexpr (kType == DType::Q5_1) {  // + m_row * d_x * sum(x)
      const __m512 mins = _mm512_cvtph_ps(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + packed::q8_scales_offset(kType) + 32)));
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) {
        const float x_sum = x[t * n_blocks + b].scale * static_cast<float>(sums[t * n_blocks + b]);
        acc[t] = _mm512_fmadd_ps(mins, _mm512_set1_ps(x_sum), acc[t]);
      }
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) _mm512_mask_storeu_ps(out + t * out_stride, mask, acc[t]);
}

// group_tokens for a count of 1..kMax tokens known only at run time.
template <DType kType, int kMax>
inline void group_tokens_upto(int64_t count, const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8* x,
                              const int32_t* sums, bool prefetch, float* out, int64_t out_stride, __mmask16 mask) {
  if (count == kMax) return group_tokens<kType, kMax>(group, n_blocks, x, sums, prefetch, out, out_stride, mask);
  if constexpr (kMax > 1)
    group_tokens_upto<kType, kMax - 1>(count, group, n_blocks, x, sums, prefetch, out, out_stride, mask);
}

template <DType kType>
void gemm_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t group_bytes = n_blocks * packed::q8_group_block_bytes(kType);
  // Every token's block sums, once per call (the call covers a thread's row range).
  thread_local std::vector<int32_t> sums;
  if (sums.size() < static_cast<size_t>(n_tokens * n_blocks)) sums.resize(static_cast<size_t>(n_tokens * n_blocks));
  block_sums(x, n_tokens * n_blocks, sums.data());
  const bool prefetch = n_tokens <= kTokenTile;  // decode streams the weights once
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                group_tokens_upto<kType, kTokenTile>(
                                    count, weight.packed + g * group_bytes, n_blocks, x + token * n_blocks,
                                    sums.data() + token * n_blocks, prefetch, out + token * out_stride + g * kGroupRows,
                                    out_stride, packed::group_store_mask(g, store_begin, store_end));
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

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
