// AVX-512 attention_group and attention_tokens: kernels/attention.cpp's algorithm (key tiles of
// kAttentionTile positions from 0, online softmax) 16 positions per vector — scores by a fixed
// lane-sum tree, a polynomial exp, running sums in float lanes. Head sizes 16..256 in steps of
// 16 run here. One kernel serves a token's GQA group and a run of tokens of one sequence (their
// groups, each token seeing its own context length). A query's arithmetic is the same whichever
// queries share its call (they only share loads), so its bits depend on itself, head_dim, n_ctx
// and the cached K/V alone: prefill == decode. K/V rows stored as F16, BF16, Q8_0 or Q4_0 are
// converted a block of 16 positions at a time into an L1 scratch on the stack as the tile is
// visited (convert_kv_rows below), so a query's bits are those of F32 rows holding the same values.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"
#include "base/half.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/geglu.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

#include "kernels/avx512/attention_parts.h"  // AVX-512 code: after the target pragma
#include "kernels/avx512/vector_exp.h"

namespace tandem::avx512 {
namespace {

using namespace attention_parts;  // NOLINT(google-build-using-namespace): this file is their user

// Small heads give too few FMA chains to hide FMA latency, so within a block the positions
// are dealt round-robin to kChains accumulators.
template <int kVectors>
constexpr int kChains = kVectors >= 8   ? 1
                        : kVectors >= 4 ? 2
                                        : 4;

// acc[g] += Σ_p weights[g·kAttentionTile + p]·(value row at rows[p]) over one block's first
// n_positions (a multiple of kChains), for kQueries queries: per query the first chain
// starts from acc, the others from 0, and the chains are summed at the end in a fixed order.
template <int kVectors, int kQueries, typename Element>
[[gnu::always_inline]] inline void add_weighted_values(const float* weights, const Element* values, const int64_t* rows,
                                                       int64_t n_positions, __m512 (&acc)[kQueries][kVectors]) {
  constexpr int chains = kChains<kVectors>;
  __m512 chain[kQueries][chains][kVectors];
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) {
      chain[g][0][v] = acc[g][v];
#pragma GCC unroll 4
      for (int c = 1; c < chains; ++c) chain[g][c][v] = _mm512_setzero_ps();
    }
  for (int64_t p = 0; p < n_positions; p += chains) {
#pragma GCC unroll 4
    for (int c = 0; c < chains; ++c) {
      const Element* value = values + rows[p + c];
      __m512 weight[kQueries];
#pragma GCC unroll 2
      for (int g = 0; g < kQueries; ++g) weight[g] = _mm512_set1_ps(weights[g * kAttentionTile + p + c]);
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) {
        const __m512 x = kQueries > 1 ? load_once(value + 16 * v) : load_vector(value + 16 * v);
#pragma GCC unroll 2
        for (int g = 0; g < kQueries; ++g) chain[g][c][v] = _mm512_fmadd_ps(weight[g], x, chain[g][c][v]);
      }
    }
  }
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v) {
      if constexpr (chains == 4) {
        acc[g][v] =
            _mm512_add_ps(_mm512_add_ps(chain[g][0][v], chain[g][1][v]), _mm512_add_ps(chain[g][2][v], chain[g][3][v]));
      } else if constexpr (chains == 2) {
        acc[g][v] = _mm512_add_ps(chain[g][0][v], chain[g][1][v]);
      } else {
        acc[g][v] = chain[g][0][v];
      }
    }
}

// One call's walk over the tiles (attend_queries below): the queries' running softmax state,
// the current tile's rows and per-block first queries, the scores/weights, and the blocks'
// converted rows. Each step is inlined into the kernel: the split is for reading, not calls.
template <int kVectors, bool kF16>
struct TileWalk {
  static constexpr int64_t head_dim = 16 * kVectors;
  static constexpr int64_t chains = kChains<kVectors>;
  // Queries sharing each K/V vector loaded. 4 were tried on converted blocks (scores: 16 dot
  // chains, a group of 4 positions at a time; values: the head in slices of 4 x 4
  // accumulators): pp2048 297 against 317 tok/s (scores), no difference (values) on
  // qwen3-0.6b, Zen 4, so 2 it stays.
  static constexpr int pack = kQueriesPerLoad<kVectors>;

  const QuerySet& set;
  const KvRows& keys;
  const KvRows& values;
  int64_t kv_offset;
  const int32_t* slots;
  int64_t longest;  // the last query's context: the tiles end there
  bool prefetch;    // few queries (decode): K/V rows fetched kPrefetchBlocks blocks ahead
  int64_t key_offset_bytes, value_offset_bytes, key_head_bytes, value_head_bytes;
  // Per query: the running max, the running sum as 16 lane sums, and this tile's rescaling.
  float running_max[kMaxQueries], correction[kMaxQueries];
  __m512 running_sum[kMaxQueries];
  // The tile: its start and length, its positions -> their slots, and per block its first
  // query (the ones after it see the block too).
  int64_t tile = 0, tile_len = 0, n_blocks = 0;
  int64_t rows[kAttentionTile];
  int64_t block_first[kAttentionTile / kLanes];
  // One block's K and V rows converted to floats (types other than F32): 2 x 16 KiB at most.
  alignas(64) float key_block[kLanes * head_dim];
  alignas(64) float value_block[kLanes * head_dim];
  // [n_queries, kAttentionTile]: scores, then softmax weights, written in whole blocks of 16
  // (past the query's tile length). On the stack, not in the caller's scratch: some callers (a
  // test) size that to n_ctx when it is below a tile.
  alignas(64) float weights[kMaxQueries * kAttentionTile];

  TileWalk(const QuerySet& query_set, const KvRows& k, const KvRows& v, int64_t offset, const int32_t* slot_of)
      : set(query_set),
        keys(k),
        values(v),
        kv_offset(offset),
        slots(slot_of),
        longest(query_set.n_ctx[query_set.n_queries - 1]),
        prefetch(query_set.n_queries < kPrefetchBelowQueries),
        key_offset_bytes(kv_row_offset_bytes(k.type, offset)),
        value_offset_bytes(kv_row_offset_bytes(v.type, offset)),
        key_head_bytes(dtype_row_bytes(k.type, head_dim)),
        value_head_bytes(dtype_row_bytes(v.type, head_dim)) {
    for (int64_t j = 0; j < set.n_queries; ++j) {
      running_max[j] = -INFINITY;
      running_sum[j] = _mm512_setzero_ps();
      std::fill_n(set.outs[j], head_dim, 0.0f);
    }
  }

  // The positions of block b query j sees (up to 16; 0 or less: none).
  [[gnu::always_inline]] int64_t visible(int64_t j, int64_t b) const {
    return std::min<int64_t>(kLanes, set.n_ctx[j] - tile - b * kLanes);
  }

  [[gnu::always_inline]] void prefetch_rows(int64_t first, int64_t end) const {
    prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, first, end);
    prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, first, end);
  }

  // The tile at `first_position` seen from query tile_first on: its rows (positions past the
  // context in the last block read the last visible row; their scores are masked to -inf, so
  // their weights are exactly 0) and each block's first query.
  [[gnu::always_inline]] void start_tile(int64_t first_position, int64_t tile_first) {
    tile = first_position;
    tile_len = std::min(kAttentionTile, longest - tile);
    n_blocks = (tile_len + kLanes - 1) / kLanes;
    for (int64_t p = 0; p < tile_len; ++p) rows[p] = slots[tile + p];
    for (int64_t p = tile_len; p < n_blocks * kLanes; ++p) rows[p] = rows[tile_len - 1];
    for (int64_t b = 0, j = tile_first; b < n_blocks; ++b) {
      while (set.n_ctx[j] <= tile + b * kLanes) ++j;
      block_first[b] = j;
    }
  }

  // Every query's scaled scores for the tile's blocks, block by block (each block serving
  // every query before the next: K/V rows a row stride apart map to few L1 sets, so a whole
  // tile's rows would not stay in L1 from one query to the next, while one block's rows do).
  [[gnu::always_inline]] void score_tile() {
    const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(head_dim)));
    const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      if (prefetch) {
        const int64_t ahead = tile + (b + kPrefetchBlocks) * kLanes;
        prefetch_rows(ahead, std::min(longest, ahead + kLanes));
      }
      int64_t key_rows[kLanes];
      const auto* key_base =
          block_base<kF16>(keys, kv_offset, rows + b * kLanes, block_len, head_dim, key_block, key_rows);
      for_each_query_pack<pack>(block_first[b], set.n_queries, [&]<int kQueries>(int64_t j) {
        __m512 scores[kQueries];
        score_block<kVectors, kQueries>(set.queries + j, key_base, key_rows, scores);
        for (int i = 0; i < kQueries; ++i)
          _mm512_store_ps(
              weights + (j + i) * kAttentionTile + b * kLanes,
              _mm512_mask_mov_ps(minus_infinity, first_lanes(visible(j + i, b)), _mm512_mul_ps(scores[i], scale)));
      });
    }
  }

  // Each query's online-softmax step over its part of the tile (soft-capped first, Gemma 2,
  // on the positions it sees; the masked ones stay -inf): weights in place of the scores, the
  // new running max and sum, and the factor its output is rescaled by.
  [[gnu::always_inline]] void softmax_tile(int64_t tile_first) {
    const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
    if (set.softcap > 0.0f)
      for (int64_t j = tile_first; j < set.n_queries; ++j) {
        float* tile_scores = weights + j * kAttentionTile;
        const int64_t n_visible = std::min(kAttentionTile, set.n_ctx[j] - tile);
        softcap_row(tile_scores, n_visible, set.softcap, tile_scores);  // the level's vector tanh
      }
    for (int64_t j = tile_first; j < set.n_queries; ++j) {
      float* tile_weights = weights + j * kAttentionTile;
      const int64_t query_blocks = (std::min(kAttentionTile, set.n_ctx[j] - tile) + kLanes - 1) / kLanes;
      __m512 tile_max = minus_infinity;
      for (int64_t b = 0; b < query_blocks; ++b)
        tile_max = _mm512_max_ps(tile_max, _mm512_load_ps(tile_weights + b * kLanes));
      const float new_max = std::max(running_max[j], _mm512_reduce_max_ps(tile_max));
      const __m512 new_max_vector = _mm512_set1_ps(new_max);
      // exp(-inf) = 0 on the first tile.
      const __m512 rescale = exp_nonpositive(_mm512_sub_ps(_mm512_set1_ps(running_max[j]), new_max_vector));
      running_max[j] = new_max;
      correction[j] = _mm512_cvtss_f32(rescale);
      __m512 tile_sum = _mm512_setzero_ps();
      for (int64_t b = 0; b < query_blocks; ++b) {
        const __m512 block_weights =
            exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(tile_weights + b * kLanes), new_max_vector));
        tile_sum = _mm512_add_ps(tile_sum, block_weights);
        _mm512_store_ps(tile_weights + b * kLanes, block_weights);
      }
      running_sum[j] = _mm512_fmadd_ps(running_sum[j], rescale, tile_sum);
    }
  }

  // Queries j..j+kQueries-1 add block b's values over n_positions positions whose rows are
  // block_rows (their outputs rescaled first, in block 0).
  template <int kQueries>
  [[gnu::always_inline]] void accumulate(int64_t b, int64_t j, const auto* value_base, const int64_t* block_rows,
                                         int64_t n_positions) {
    __m512 acc[kQueries][kVectors];
    for (int i = 0; i < kQueries; ++i) {
      const __m512 rescale = _mm512_set1_ps(correction[j + i]);
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) {
        acc[i][v] = _mm512_loadu_ps(set.outs[j + i] + 16 * v);
        if (b == 0) acc[i][v] = _mm512_mul_ps(acc[i][v], rescale);
      }
    }
    add_weighted_values<kVectors, kQueries>(weights + j * kAttentionTile + b * kLanes, value_base, block_rows,
                                            n_positions, acc);
    for (int i = 0; i < kQueries; ++i)
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(set.outs[j + i] + 16 * v, acc[i][v]);
  }

  // Per query, whichever way the loops run: the output rescaled, then each block's weighted
  // values in turn. In its last block a query runs over the same positions, rounded up to the
  // same multiple of chains, as alone, and the rows of the rounding positions (weight 0) are
  // the same as alone: where its rows or position count differ from its pack partner's, it
  // goes alone.
  [[gnu::always_inline]] void weigh_values_tile() {
    // The tile's rows serve a query as they would alone unless it stops inside the block
    // short of the tile and its position count needs rounding up to chains.
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      int64_t value_rows[kLanes];
      const auto* value_base =
          block_base<kF16>(values, kv_offset, rows + b * kLanes, block_len, head_dim, value_block, value_rows);
      auto own_rows_needed = [&](int64_t n_visible) { return n_visible != block_len && n_visible % chains != 0; };
      auto rounded = [](int64_t n_visible) { return (n_visible + chains - 1) / chains * chains; };
      for_each_query_pack<pack>(block_first[b], set.n_queries, [&]<int kQueries>(int64_t j) {
        const int64_t n_visible = visible(j, b);
        bool together = !own_rows_needed(n_visible);
        for (int i = 1; i < kQueries; ++i) together = together && visible(j + i, b) == n_visible;
        if (together) {
          accumulate<kQueries>(b, j, value_base, value_rows, rounded(n_visible));
          return;
        }
        for (int i = 0; i < kQueries; ++i) {
          const int64_t query_visible = visible(j + i, b);
          if (!own_rows_needed(query_visible)) {
            accumulate<1>(b, j + i, value_base, value_rows, rounded(query_visible));
            continue;
          }
          int64_t own_rows[kLanes];  // past its context, its last visible row (weight 0), as alone
          for (int64_t p = 0; p < kLanes; ++p) own_rows[p] = value_rows[std::min(p, query_visible - 1)];
          accumulate<1>(b, j + i, value_base, own_rows, rounded(query_visible));
        }
      });
    }
  }

  // Each query's output divided by its sum (with its sink), or left as accumulators with its
  // max and sum in partials.
  [[gnu::always_inline]] void finish() {
    for (int64_t j = 0; j < set.n_queries; ++j) {
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
};

// Per tile: every query's scores, then each query's softmax step, then the weighted values.
//
// Queries with different n_ctx share the tiles and blocks they both see; each query's
// arithmetic is still exactly that of the query alone (its bits depend on itself, head_dim,
// its n_ctx and the cached K/V only):
//  - it takes part in the blocks it sees at least one position of, no others;
//  - its scores for positions it does not see are masked to -inf (a lane of the lane-sum tree
//    depends on its own position's row only, so the other lanes' rows do not matter);
//  - its softmax step runs over its own tile length;
//  - in its last block the weighted values run over the same positions, rounded up to the
//    same multiple of chains, as alone, and the rows of the rounding positions (weight 0) are
//    the same as alone (TileWalk::weigh_values_tile).
template <int kVectors, bool kF16>
void attend_queries(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots) {
  TileWalk<kVectors, kF16> walk(set, keys, values, kv_offset, slots);
  if (walk.prefetch)  // the first blocks, before the loop's look-ahead reaches them
    walk.prefetch_rows(0, std::min(walk.longest, kPrefetchBlocks * kLanes));
  int64_t tile_first = 0;  // the first query that sees the tile; the ones after it do too
  for (int64_t tile = 0; tile < walk.longest; tile += kAttentionTile) {
    while (set.n_ctx[tile_first] <= tile) ++tile_first;
    walk.start_tile(tile, tile_first);
    walk.score_tile();
    walk.softmax_tile(tile_first);
    walk.weigh_values_tile();
  }
  walk.finish();
}

template <bool kF16, size_t... kIndices>
constexpr std::array<QueriesKernel, sizeof...(kIndices)> queries_kernels(std::index_sequence<kIndices...>) {
  return {&attend_queries<static_cast<int>(kIndices) + 1, kF16>...};
}

// Indexed by head_dim / 16 - 1: any K/V types (F32 in place, the others converted a block at a
// time), and F16 K and V (the default) read in place, widened in the registers: with one query
// per K/V row (multi-head attention) a converted block is used once, and converting it cost
// more than the attention on it (llama-160m decode: 20 % of the time against 15 % for f32).
// A prefill block's many queries share each converted block instead (kConvertBlocksFrom):
// widening every load for every pair of queries was a third of the FMA pipes' issue slots.
constexpr std::array<QueriesKernel, kMaxHeadVectors> kQueriesKernels =
    queries_kernels<false>(std::make_index_sequence<kMaxHeadVectors>());
constexpr std::array<QueriesKernel, kMaxHeadVectors> kF16QueriesKernels =
    queries_kernels<true>(std::make_index_sequence<kMaxHeadVectors>());

QueriesKernel queries_kernel(const KvRows& keys, const KvRows& values, int64_t head_dim, int64_t n_queries) {
  const bool f16 = keys.type == DType::F16 && values.type == DType::F16 && n_queries < kConvertBlocksFrom;
  return (f16 ? kF16QueriesKernels : kQueriesKernels)[static_cast<size_t>(head_dim / 16 - 1)];
}

}  // namespace

void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials) {
  attention_parts::attention_group_with(queries_kernel, queries, n_queries, keys, values, kv_offset, slots, n_ctx,
                                        head_dim, scratch, out, softcap, sinks, partials);
}

void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                      const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                      const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                      float softcap, const float* sinks, AttentionPartial* partials) {
  attention_parts::attention_tokens_with(queries_kernel, queries, query_stride, n_tokens, group, positions, keys,
                                         values, kv_offset, slots, head_dim, scratch, out, out_stride, softcap, sinks,
                                         partials);
}

void convert_kv_rows(const KvRows& rows, const int64_t* row_offsets, int64_t n_rows, int64_t element_offset, int64_t n,
                     float* out) {
  const int64_t offset_bytes = kv_row_offset_bytes(rows.type, element_offset);
  // Masked tails for the 16-bit types (any n); the block types take whole blocks of 32.
  const int64_t tail = n % kLanes;
  const __mmask16 tail_mask = first_lanes(tail);
  for (int64_t r = 0; r < n_rows; ++r) {
    const uint8_t* src = rows.data + row_offsets[r] + offset_bytes;
    float* dst = out + r * n;
    switch (rows.type) {
      case DType::F32: std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); break;
      case DType::F16: {
        const auto* halves = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes)
          _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves + i))));
        if (tail != 0)
          _mm512_mask_storeu_ps(dst + i, tail_mask, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask, halves + i)));
        break;
      }
      case DType::BF16: {
        const auto* halves = reinterpret_cast<const uint16_t*>(src);
        int64_t i = 0;
        for (; i + kLanes <= n; i += kLanes)
          _mm512_storeu_ps(dst + i, bf16_to_floats(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(halves + i))));
        if (tail != 0)
          _mm512_mask_storeu_ps(dst + i, tail_mask, bf16_to_floats(_mm256_maskz_loadu_epi16(tail_mask, halves + i)));
        break;
      }
      case DType::Q8_0: {
        TANDEM_ASSERT(n % kQ8_0BlockSize == 0);
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(src);
        for (int64_t b = 0; b < n / kQ8_0BlockSize; ++b) {
          const __m512 scale = _mm512_set1_ps(f16_to_f32(blocks[b].scale_f16));
          for (int h = 0; h < 2; ++h) {
            const __m128i quants = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].quants + 16 * h));
            _mm512_storeu_ps(dst + b * kQ8_0BlockSize + 16 * h,
                             _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(quants))));
          }
        }
        break;
      }
      case DType::Q4_0: {
        TANDEM_ASSERT(n % kQ4_0BlockSize == 0);
        const auto* blocks = reinterpret_cast<const BlockQ4_0*>(src);
        const __m512i low_nibble = _mm512_set1_epi32(0x0f), eight = _mm512_set1_epi32(8);
        for (int64_t b = 0; b < n / kQ4_0BlockSize; ++b) {
          const __m512 scale = _mm512_set1_ps(f16_to_f32(blocks[b].scale_f16));
          const __m512i bytes =
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blocks[b].nibbles)));
          const __m512i low = _mm512_sub_epi32(_mm512_and_si512(bytes, low_nibble), eight);
          const __m512i high = _mm512_sub_epi32(_mm512_srli_epi32(bytes, 4), eight);
          _mm512_storeu_ps(dst + b * kQ4_0BlockSize, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(low)));
          _mm512_storeu_ps(dst + b * kQ4_0BlockSize + 16, _mm512_mul_ps(scale, _mm512_cvtepi32_ps(high)));
        }
        break;
      }
      default: TANDEM_ASSERT(false && "convert_kv_rows: not a KV cache type");
    }
  }
}

void attention_exp(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(out + i, exp_nonpositive(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, mask, exp_nonpositive(_mm512_maskz_loadu_ps(mask, x + i)));
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
