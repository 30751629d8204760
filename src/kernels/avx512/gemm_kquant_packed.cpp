// AVX-512 VNNI GEMM for Q4_K/Q5_K/Q6_K on the packed layout (packed/kquant_layout.h). Tile row k
// of a sub-block holds elements 4k..4k+3 of all 16 rows, so dpbusd with a token's 4
// activation bytes broadcast gives each row's integer sum in its own lane — the same
// integers as the row kernels and the AMX tile multiply — and the float update per
// super-block is theirs (avx512/kquant_packed_ops.h): bit for bit the row kernels' results,
// whatever the token count, tile or row range.
//
// A sub-block is unpacked once per tile of tokens; rows go in slices of a few groups whose
// weights stay in L2 while every token tile passes over them (the tile's activations stay
// in L1 across the slice's groups).
#include "kernels/avx512/gemm_packed.h"

#include <algorithm>

#include "base/error.h"
#include "kernels/packed/row_groups.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#endif

#include "kernels/avx512/kquant_packed_ops.h"

namespace tandem::avx512 {
namespace {

using namespace kquant_ops;
using packed::kGroupRows;

// Decode prefetch distance, in super-blocks (tinyllama Q4_K_M tg: none 6.0, 1 block 31.2,
// 2 blocks 28.9 tok/s: the hardware prefetcher does little for these streams here).
constexpr int64_t kPrefetchBlocks = 1;
// Tokens per pass over a group (1-thread 5632x2048x64, GFLOP/s at tiles of 4 / 6 / 8 tokens:
// Q8_0 364 / 370 / 391, Q4_0 389 / 415 / 423, Q4_K 305 / 301-317 / 350-362, Q6_K 240 / 284 / 294).
constexpr int kTokenTile = 8;
constexpr int64_t kSliceGroups = 4;

// One row group x kTokens tokens (x: the first token's blocks; token t's at x + t * n_blocks).
template <DType kType, int kTokens>
void group_tokens(const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8K* x, bool prefetch, float* out,
                  int64_t out_stride, __mmask16 mask) {
  using F = Format<kType>;
  using L = typename F::Layout;
  constexpr int kLength = L::kSubBlockLength;
  __m512 acc[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* block = group + b * L::kBytes;
    __m512i sumi[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) sumi[t] = _mm512_setzero_si512();
    for (int j = 0; j < L::kSubBlocks; ++j) {
      if (prefetch && b + kPrefetchBlocks < n_blocks)
        prefetch_part(block + kPrefetchBlocks * L::kBytes, L::kBytes, j, L::kSubBlocks);
      __m512i rows[F::kTileRows];
      F::tile_rows(block + j * L::kSubBlockBytes, rows);
      const __m512i scales = sub_block_scales<kType>(block, j);
      // Lines outside, tokens inside: the tokens' dpbusd chains interleave (as in
      // gemm_q8_packed.cpp); integer sums, so the order does not change a bit.
      __m512i dots[kTokens];
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) dots[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < F::kTileRows; ++k)
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t)
          dots[t] = _mm512_dpbusd_epi32(dots[t], rows[k],
                                        _mm512_set1_epi32(word_at(x[t * n_blocks + b].quants + kLength * j, k)));
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) sumi[t] = _mm512_add_epi32(sumi[t], _mm512_mullo_epi32(dots[t], scales));
    }
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) acc[t] = F::finish(acc[t], block, x[t * n_blocks + b], sumi[t]);
  }
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) _mm512_mask_storeu_ps(out + t * out_stride, mask, acc[t]);
}

// group_tokens for a count of 1..kMax tokens known only at run time.
template <DType kType, int kMax>
inline void group_tokens_upto(int64_t count, const uint8_t* group, int64_t n_blocks, const ActivationBlockQ8K* x,
                              bool prefetch, float* out, int64_t out_stride, __mmask16 mask) {
  if (count == kMax) return group_tokens<kType, kMax>(group, n_blocks, x, prefetch, out, out_stride, mask);
  if constexpr (kMax > 1)
    group_tokens_upto<kType, kMax - 1>(count, group, n_blocks, x, prefetch, out, out_stride, mask);
}

template <DType kType>
void gemm_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
                int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t n_blocks = weight.row_length() / 256;
  const int64_t group_bytes = n_blocks * packed::kquant_group_block_bytes(kType);
  const bool prefetch = n_tokens <= kTokenTile;  // decode streams the weights once
  packed::for_each_slice_tile(row_begin, row_end, n_tokens, kSliceGroups, kTokenTile,
                              [&](int64_t g, int64_t store_begin, int64_t store_end, int64_t token, int64_t count) {
                                group_tokens_upto<kType, kTokenTile>(
                                    count, weight.packed + g * group_bytes, n_blocks, x + token * n_blocks, prefetch,
                                    out + token * out_stride + g * kGroupRows, out_stride,
                                    packed::group_store_mask(g, store_begin, store_end));
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

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
