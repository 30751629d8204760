// AVX-512 VNNI GEMM for Q8_0/Q4_0 on the packed layout (packed/q8_layout.h): line k of a
// group-block holds elements 4k..4k+3 of all 16 rows, so dpbusd with a token's 4 activation
// bytes broadcast sums each row's block in its own lane.
//
// dpbusd multiplies unsigned by signed bytes. Weights are made unsigned — Q8_0 by XOR 0x80
// (w + 128), Q4_0 as its nibbles (q + 8) — and the offset's share, 128 or 8 times the
// block's activation sum, starts each lane's sum negated: the exact integer dot, the AMX tile
// multiply's. The float step per block is the AMX kernel's too — acc = fma(float(dot),
// d_row * d_x, acc), blocks in order — so prefill, decode and the AMX level agree bit for bit.
// A group-block's weights are unpacked once per tile of tokens; rows go in slices of a few
// groups whose weights stay in L2 while every token tile passes over them.
#include "kernels/avx512/gemm_packed.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "base/error.h"
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
template <DType kType>
constexpr int64_t kPrefetchBlocks = kType == DType::Q8_0 ? 4 : 8;

inline int32_t word_at(const int8_t* bytes, int i) {
  int32_t word;
  std::memcpy(&word, bytes + 4 * i, 4);
  return word;
}

// The offset each (token, block) lane sum starts from: -(128 or 8) * (sum of the block's x).
template <DType kType>
void block_offsets(const ActivationBlockQ8* x, int64_t n, int32_t* offsets) {
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t i = 0; i < n; ++i) {
    // sum(x) = sum(x + 128) - 32 * 128, the unsigned sum by psadbw against zero.
    const __m256i xq = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].quants)), flip);
    const __m256i sad = _mm256_sad_epu8(xq, _mm256_setzero_si256());
    const __m128i s = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    const int32_t sum = static_cast<int32_t>(_mm_cvtsi128_si64(s) + _mm_extract_epi64(s, 1)) - 32 * 128;
    offsets[i] = (kType == DType::Q8_0 ? -128 : -8) * sum;
  }
}

// One row group x kTokens tokens (x and offsets: the first token's; token t's at + t * n_blocks).
template <DType kType, int kTokens>
void group_tokens(const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8* x, const int32_t* offsets,
                  bool prefetch, float* out, int64_t out_stride, __mmask16 mask) {
  constexpr int64_t kBytes = packed::q8_group_block_bytes(kType);
  constexpr int64_t kScales = kType == DType::Q8_0 ? packed::kScalesOffsetQ8 : packed::kScalesOffsetQ4;
  __m512 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * kBytes;
    if (prefetch)
      for (int64_t line = 0; line < kBytes; line += 64)
        _mm_prefetch(reinterpret_cast<const char*>(block + kPrefetchBlocks<kType> * kBytes + line), _MM_HINT_T0);
    __m512i rows[8];
    if constexpr (kType == DType::Q8_0) {
      const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) rows[k] = _mm512_xor_si512(_mm512_loadu_si512(block + 64 * k), flip);
    } else {
      const __m512i low_mask = _mm512_set1_epi8(0x0f);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i bytes = _mm512_loadu_si512(block + 64 * k);
        rows[k] = _mm512_and_si512(bytes, low_mask);
        rows[k + 4] = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low_mask);
      }
    }
    const __m512 row_scales = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(block + kScales)));
    // Lines outside, tokens inside: the tokens' dpbusd chains interleave, so two can issue
    // every cycle (one token's 8-deep chain alone waits on dpbusd's 5-cycle latency: ~1 a
    // cycle, measured). Integer sums: any order gives the same bits.
    __m512i lanes[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) lanes[t] = _mm512_set1_epi32(offsets[t * n_blocks + b]);
#pragma GCC unroll 8
    for (int k = 0; k < 8; ++k)
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t)
        lanes[t] = _mm512_dpbusd_epi32(lanes[t], rows[k], _mm512_set1_epi32(word_at(x[t * n_blocks + b].quants, k)));
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      const __m512 scale = _mm512_mul_ps(row_scales, _mm512_set1_ps(x[t * n_blocks + b].scale));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes[t]), scale, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) _mm512_mask_storeu_ps(out + t * out_stride, mask, acc[t]);
}

// group_tokens for a count of 1..kMax tokens known only at run time.
template <DType kType, int kMax>
inline void group_tokens_upto(int64_t count, const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8* x,
                              const int32_t* offsets, bool prefetch, float* out, int64_t out_stride, __mmask16 mask) {
  if (count == kMax) return group_tokens<kType, kMax>(group, n_blocks, x, offsets, prefetch, out, out_stride, mask);
  if constexpr (kMax > 1)
    group_tokens_upto<kType, kMax - 1>(count, group, n_blocks, x, offsets, prefetch, out, out_stride, mask);
}

template <DType kType>
void gemm_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 32;
  const int64_t group_bytes = n_blocks * packed::q8_group_block_bytes(kType);
  // Every token's offsets, once per call (the call covers a thread's row range).
  thread_local std::vector<int32_t> offsets;
  if (offsets.size() < static_cast<size_t>(n_tokens * n_blocks))
    offsets.resize(static_cast<size_t>(n_tokens * n_blocks));
  block_offsets<kType>(x, n_tokens * n_blocks, offsets.data());
  const bool prefetch = n_tokens <= kTokenTile;  // decode streams the weights once
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                group_tokens_upto<kType, kTokenTile>(
                                    count, weight.packed + g * group_bytes, n_blocks, x + token * n_blocks,
                                    offsets.data() + token * n_blocks, prefetch,
                                    out + token * out_stride + g * kGroupRows, out_stride,
                                    packed::group_store_mask(g, store_begin, store_end));
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

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
