// AVX-512 attention with bf16 dot products (AVX512_BF16's vdpbf16ps: 32 products a
// vector, summed in pairs into 16 float lanes — twice the f32 FMA's products an
// instruction). The algorithm is attention_avx512.cpp's: key tiles of kAttentionTile positions
// from 0, an online softmax in float, a block of 16 positions served to every query of the
// call before the next. What is rounded to bf16 (round to nearest even) and where:
//  - each query, once per call, and each block's K rows (from any cache type) as the block is
//    converted: the scores are sums of exact bf16 products, accumulated in float lanes, then the
//    fixed lane-sum tree (attention_parts.h);
//  - each softmax weight, as the tile's weights are computed; the running sum adds the rounded
//    weights, so numerator and denominator use the same ones;
//  - each block's V rows, paired position by position, so one instruction adds two positions'
//    weighted values to 16 output lanes.
// The accuracy this buys is stated and checked in tests/kernels/attention_bf16_test.cpp
// (against float64 on the same rounded inputs, and the whole output against float64).
//
// Batch invariance: a query's arithmetic never depends on the other queries of its call. It
// takes part in exactly the blocks it sees a position of; in its last block the positions it
// does not see have score -inf, weight exactly 0, and add 0·v = ±0 to its accumulators (the
// rows there, another query's or the repeated last row, are finite), so the bits are those of
// the query alone. Prefill and decode run this same kernel: prefill == decode, bit for bit.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "base/dtype.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/geglu.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c")
#endif

#include "kernels/avx512/attention_parts.h"  // AVX-512 code: after the target pragma
#include "kernels/avx512/bf16_parts.h"
#include "kernels/avx512/vector_exp.h"

namespace tandem::avx512 {
namespace {

using namespace attention_parts;  // NOLINT(google-build-using-namespace): this file is their user
using namespace bf16_parts;       // NOLINT(google-build-using-namespace): likewise

// acc lane l + a[2l]·b[2l] + a[2l+1]·b[2l+1], the bf16 products exact.
[[gnu::always_inline]] inline __m512 dot_pairs(__m512 acc, __m512i a, __m512i b) {
  return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
}

// scores[g] lane p = queries[g] · key row p of the converted block, for 16 positions: per
// position a chain of bf16 dot products over the head's chunks in order, then the lane-sum tree.
template <int kVectors, int kQueries>
[[gnu::always_inline]] inline void score_block_bf16(const __m512i (&queries)[kQueries][kChunks<kVectors>],
                                                    const uint16_t* key_block, __m512 (&scores)[kQueries]) {
  constexpr int chunks = kChunks<kVectors>;
  __m512 quads[kQueries][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    __m512 dots[kQueries][4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const uint16_t* key = key_block + (4 * i + p) * chunks * kChunkHalves;
#pragma GCC unroll 8
      for (int c = 0; c < chunks; ++c) {
        const __m512i k = _mm512_load_si512(key + kChunkHalves * c);
#pragma GCC unroll 2
        for (int g = 0; g < kQueries; ++g)
          dots[g][p] = dot_pairs(c == 0 ? _mm512_setzero_ps() : dots[g][p], queries[g][c], k);
      }
    }
#pragma GCC unroll 2
    for (int g = 0; g < kQueries; ++g) quads[g][i] = quad_sums(dots[g]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g) scores[g] = combine_quads(quads[g]);
}

// kBf16Scores: the scores from bf16 Q and K as well; otherwise in float (attention_parts.h's
// score_block, the f32 kernel's arithmetic), only the weighted values in bf16. kF16: F16 K and
// V read in place, widened as loaded (the floats a converted block holds: the same bits), for
// calls with few queries, where converting a block costs more than the attention on it.
template <int kVectors, bool kBf16Scores, bool kF16>
void attend_queries_bf16(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                         const int32_t* slots) {
  constexpr int64_t head_dim = 16 * kVectors;
  constexpr int chunks = kChunks<kVectors>;
  constexpr int64_t head_halves = chunks * kChunkHalves;
  constexpr int pack = kQueriesPerLoad<kVectors>;
  constexpr int64_t kPairs = kLanes / 2;  // position pairs in a block
  const int64_t n_queries = set.n_queries;
  const int64_t* n_ctx = set.n_ctx;
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(head_dim)));
  const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);

  // Every query rounded to bf16 once.
  alignas(64) uint16_t query_halves[kMaxQueries * head_halves];
  if constexpr (kBf16Scores)
    for (int64_t j = 0; j < n_queries; ++j) head_to_bf16<kVectors>(set.queries[j], query_halves + j * head_halves);
  auto load_queries = [&]<int kQueries>(int64_t j, __m512i(&out)[kQueries][chunks]) {
    for (int g = 0; g < kQueries; ++g)
      for (int c = 0; c < chunks; ++c)
        out[g][c] = _mm512_load_si512(query_halves + (j + g) * head_halves + kChunkHalves * c);
  };

  float running_max[kMaxQueries], correction[kMaxQueries];
  __m512 running_sum[kMaxQueries];
  for (int64_t j = 0; j < n_queries; ++j) {
    running_max[j] = -INFINITY;
    running_sum[j] = _mm512_setzero_ps();
    std::fill_n(set.outs[j], head_dim, 0.0f);
  }
  int64_t rows[kAttentionTile];  // the tile's positions -> their slots
  // One block's rows as floats (types other than F32), then as bf16: K row by row, V in pairs
  // of positions ([pair][head vector][32 halves]).
  alignas(64) float float_block[kLanes * head_dim];
  alignas(64) uint16_t key_halves[kLanes * head_halves];
  alignas(64) uint16_t value_pairs[kPairs * kVectors * kChunkHalves];
  // [n_queries, kAttentionTile]: scores, then softmax weights (float), and the weights as bf16.
  alignas(64) float weights[kMaxQueries * kAttentionTile];
  alignas(64) uint16_t weight_halves[kMaxQueries * kAttentionTile];

  const int64_t longest = n_ctx[n_queries - 1];
  const bool prefetch = n_queries < kPrefetchBelowQueries;
  const int64_t key_offset_bytes = kv_row_offset_bytes(keys.type, kv_offset);
  const int64_t value_offset_bytes = kv_row_offset_bytes(values.type, kv_offset);
  const int64_t key_head_bytes = dtype_row_bytes(keys.type, head_dim);
  const int64_t value_head_bytes = dtype_row_bytes(values.type, head_dim);
  if (prefetch) {
    prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, 0, std::min(longest, kPrefetchBlocks * kLanes));
    prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, 0,
                       std::min(longest, kPrefetchBlocks * kLanes));
  }
  int64_t tile_first = 0;  // the first query that sees the tile; the ones after it do too
  for (int64_t tile = 0; tile < longest; tile += kAttentionTile) {
    while (n_ctx[tile_first] <= tile) ++tile_first;
    const int64_t tile_len = std::min(kAttentionTile, longest - tile);
    const int64_t n_blocks = (tile_len + kLanes - 1) / kLanes;
    for (int64_t p = 0; p < tile_len; ++p) rows[p] = slots[tile + p];
    // Positions past the context in the last block read the last visible row (finite); their
    // scores are masked to -inf, so their weights are exactly 0.
    for (int64_t p = tile_len; p < n_blocks * kLanes; ++p) rows[p] = rows[tile_len - 1];
    int64_t block_first[kAttentionTile / kLanes];  // block b's first query (the later ones see it too)
    for (int64_t b = 0, j = tile_first; b < n_blocks; ++b) {
      while (n_ctx[j] <= tile + b * kLanes) ++j;
      block_first[b] = j;
    }
    auto visible = [&](int64_t j, int64_t b) { return std::min<int64_t>(kLanes, n_ctx[j] - tile - b * kLanes); };

    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      if (prefetch) {
        const int64_t ahead = tile + (b + kPrefetchBlocks) * kLanes, ahead_end = std::min(longest, ahead + kLanes);
        prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, ahead, ahead_end);
        prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, ahead, ahead_end);
      }
      int64_t key_rows[kLanes];
      const auto* key_base =
          block_base<kF16>(keys, kv_offset, rows + b * kLanes, block_len, head_dim, float_block, key_rows);
      if constexpr (kBf16Scores)
        for (int p = 0; p < kLanes; ++p) head_to_bf16<kVectors>(key_base + key_rows[p], key_halves + p * head_halves);
      for_each_query_pack<pack>(block_first[b], n_queries, [&]<int kQueries>(int64_t j) {
        __m512 scores[kQueries];
        if constexpr (kBf16Scores) {
          __m512i query[kQueries][chunks];
          load_queries.template operator()<kQueries>(j, query);
          score_block_bf16<kVectors, kQueries>(query, key_halves, scores);
        } else {
          score_block<kVectors, kQueries>(set.queries + j, key_base, key_rows, scores);
        }
        for (int i = 0; i < kQueries; ++i)
          _mm512_store_ps(
              weights + (j + i) * kAttentionTile + b * kLanes,
              _mm512_mask_mov_ps(minus_infinity, first_lanes(visible(j + i, b)), _mm512_mul_ps(scores[i], scale)));
      });
    }

    // Soft-capping (Gemma 2) on the positions each query sees; the masked ones stay -inf.
    if (set.softcap > 0.0f)
      for (int64_t j = tile_first; j < n_queries; ++j) {
        float* tile_scores = weights + j * kAttentionTile;
        softcap_row(tile_scores, std::min(kAttentionTile, n_ctx[j] - tile), set.softcap, tile_scores);
      }

    // Each query's softmax step over its own blocks; the weights rounded to bf16, and the
    // running sum of the rounded weights.
    for (int64_t j = tile_first; j < n_queries; ++j) {
      const float* tile_scores = weights + j * kAttentionTile;
      const int64_t query_blocks = (std::min(kAttentionTile, n_ctx[j] - tile) + kLanes - 1) / kLanes;
      const Bf16TileWeights step =
          bf16_tile_weights(tile_scores, query_blocks, running_max[j], weight_halves + j * kAttentionTile);
      correction[j] = _mm512_cvtss_f32(step.rescale);
      running_sum[j] = _mm512_fmadd_ps(running_sum[j], step.rescale, step.sum);
    }

    // The weighted values, block by block: each query rescales its output at the tile's first
    // block, then adds the block's 8 position pairs in order.
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      if (block_first[b] >= n_queries) continue;
      int64_t value_rows[kLanes];
      const auto* value_base =
          block_base<kF16>(values, kv_offset, rows + b * kLanes, block_len, head_dim, float_block, value_rows);
      for (int64_t m = 0; m < kPairs; ++m)
#pragma GCC unroll 16
        for (int v = 0; v < kVectors; ++v) {
          const __m512i two_rows = to_bf16(load_vector(value_base + value_rows[2 * m] + 16 * v),
                                           load_vector(value_base + value_rows[2 * m + 1] + 16 * v));
          _mm512_store_si512(value_pairs + (m * kVectors + v) * kChunkHalves, interleave_rows(two_rows));
        }
      for_each_query_pack<pack>(block_first[b], n_queries, [&]<int kQueries>(int64_t j) {
        __m512 acc[kQueries][kVectors];
        for (int g = 0; g < kQueries; ++g) {
          const __m512 rescale = _mm512_set1_ps(correction[j + g]);
#pragma GCC unroll 16
          for (int v = 0; v < kVectors; ++v) {
            acc[g][v] = _mm512_loadu_ps(set.outs[j + g] + 16 * v);
            if (b == 0) acc[g][v] = _mm512_mul_ps(acc[g][v], rescale);
          }
        }
        for (int64_t m = 0; m < kPairs; ++m) {
          __m512i weight[kQueries];
          for (int g = 0; g < kQueries; ++g) {
            int32_t pair;  // the weights of positions 2m and 2m+1, as one 32-bit word
            std::memcpy(&pair, weight_halves + (j + g) * kAttentionTile + b * kLanes + 2 * m, sizeof(pair));
            weight[g] = _mm512_set1_epi32(pair);
          }
#pragma GCC unroll 16
          for (int v = 0; v < kVectors; ++v) {
            const __m512i x = _mm512_load_si512(value_pairs + (m * kVectors + v) * kChunkHalves);
#pragma GCC unroll 2
            for (int g = 0; g < kQueries; ++g) acc[g][v] = dot_pairs(acc[g][v], weight[g], x);
          }
        }
        for (int g = 0; g < kQueries; ++g)
#pragma GCC unroll 16
          for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(set.outs[j + g] + 16 * v, acc[g][v]);
      });
    }
  }
  for (int64_t j = 0; j < n_queries; ++j) {
    const float sum = _mm512_reduce_add_ps(running_sum[j]);
    if (set.partials != nullptr) {
      set.partials[j] = {running_max[j], sum};
      continue;
    }
    const __m512 inverse = _mm512_set1_ps(
        set.sinks != nullptr ? sink_normaliser(running_max[j], sum, set.sinks[j % set.sink_period]) : 1.0f / sum);
    float* acc_out = set.outs[j];
    for (int64_t v = 0; v < kVectors; ++v)
      _mm512_storeu_ps(acc_out + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(acc_out + 16 * v), inverse));
  }
}

template <bool kBf16Scores, bool kF16, size_t... kIndices>
constexpr std::array<QueriesKernel, sizeof...(kIndices)> bf16_kernels(std::index_sequence<kIndices...>) {
  return {&attend_queries_bf16<static_cast<int>(kIndices) + 1, kBf16Scores, kF16>...};
}

// [bf16 scores][F16 read in place], indexed by head_dim / 16 - 1.
using Bf16Kernels = std::array<QueriesKernel, kMaxHeadVectors>;
constexpr Bf16Kernels kBf16Kernels[2][2] = {{bf16_kernels<false, false>(std::make_index_sequence<kMaxHeadVectors>()),
                                             bf16_kernels<false, true>(std::make_index_sequence<kMaxHeadVectors>())},
                                            {bf16_kernels<true, false>(std::make_index_sequence<kMaxHeadVectors>()),
                                             bf16_kernels<true, true>(std::make_index_sequence<kMaxHeadVectors>())}};

// The f32 kernel's choice of F16 in place (kConvertBlocksFrom).
template <bool kBf16Scores>
QueriesKernel bf16_kernel(const KvRows& keys, const KvRows& values, int64_t head_dim, int64_t n_queries) {
  const bool f16 = keys.type == DType::F16 && values.type == DType::F16 && n_queries < kConvertBlocksFrom;
  return kBf16Kernels[kBf16Scores ? 1 : 0][f16 ? 1 : 0][static_cast<size_t>(head_dim / 16 - 1)];
}

}  // namespace

void attention_group_bf16(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                          int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                          float* out, float softcap, const float* sinks, AttentionPartial* partials) {
  attention_parts::attention_group_with(bf16_kernel<true>, queries, n_queries, keys, values, kv_offset, slots, n_ctx,
                                        head_dim, scratch, out, softcap, sinks, partials);
}

void attention_tokens_bf16(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials) {
  attention_parts::attention_tokens_with(bf16_kernel<true>, queries, query_stride, n_tokens, group, positions, keys,
                                         values, kv_offset, slots, head_dim, scratch, out, out_stride, softcap, sinks,
                                         partials);
}

void attention_group_bf16_values(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                                 int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                                 float* scratch, float* out, float softcap, const float* sinks,
                                 AttentionPartial* partials) {
  attention_parts::attention_group_with(bf16_kernel<false>, queries, n_queries, keys, values, kv_offset, slots, n_ctx,
                                        head_dim, scratch, out, softcap, sinks, partials);
}

void attention_tokens_bf16_values(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                                  const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                                  const int32_t* slots, int64_t head_dim, float* scratch, float* out,
                                  int64_t out_stride, float softcap, const float* sinks, AttentionPartial* partials) {
  attention_parts::attention_tokens_with(bf16_kernel<false>, queries, query_stride, n_tokens, group, positions, keys,
                                         values, kv_offset, slots, head_dim, scratch, out, out_stride, softcap, sinks,
                                         partials);
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
