// The f32 attention kernels' walk over the key tiles, written once for every vector width: the
// AVX2 kernel (avx2/attention_avx2.cpp, 8 lanes) and the AVX-512 kernel
// (avx512/attention_avx512.cpp, 16 lanes) instantiate it with their vector traits `V`, which
// carry every intrinsic; nothing here depends on the width but through V. Include it only
// inside a level file's target pragma, after the level's parts: the traits' functions are
// inlined into these templates, and each level's instantiations are its own (V differs).
//
// V provides: Vec; kLanes (positions per score vector); kPrefetchBlocks; kPack<kVectors>
// (queries sharing each K/V vector loaded); kMaxQueries; QuerySet; set1, zero, load, store,
// loadu, storeu, max, sub, add, mul, fmadd, reduce_max, reduce_add, lane0; masked_scores(minus_infinity, scores,
// n_visible) (the first n_visible lanes of scores, the rest minus_infinity); exp_nonpositive;
// softcap_row; score_block<kVectors, kQueries>; add_weighted_values<kVectors, kQueries>
// (outs = outs * rescale when given, + the block's weighted values); block_base<kF16>;
// for_each_query_pack<kPack>.
//
// Per tile of kAttentionTile positions from position 0: every query's scores, then each query's
// softmax step, then the weighted values, block by block (kLanes positions): K/V rows a row
// stride apart map to few L1 sets, so a whole tile's rows would not stay in L1 from one query
// to the next, while one block's rows do.
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
//    the same as alone: rows[its last visible position], not those of positions another
//    query sees. Where its rows or position count differ from its pack partner's, it goes alone.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/dtype.h"
#include "kernels/attention.h"
#include "kernels/kv_prefetch.h"

namespace tandem::attention_walk {

// Small heads give too few FMA chains to hide FMA latency, so within a block the positions
// are dealt round-robin to kChains accumulators (per query, summed at the end in a fixed order).
// A function of the head size alone: it sets each output element's order of adds.
template <int kVectors>
constexpr int kChains = kVectors >= 8   ? 1
                        : kVectors >= 4 ? 2
                                        : 4;

// One call's walk: the queries' running softmax state, the current tile's rows and per-block
// first queries, the scores/weights, and the blocks' converted rows. kVectors: the head's
// vectors of V::kLanes floats. Each step is inlined into attend_queries: the split is for
// reading, not calls.
template <typename V, int kVectors, bool kF16>
struct TileWalk {
  using Vec = typename V::Vec;
  static constexpr int64_t kLanes = V::kLanes;
  static constexpr int64_t head_dim = kLanes * kVectors;
  static constexpr int64_t chains = kChains<kVectors>;
  static constexpr int pack = V::template kPack<kVectors>;
  static_assert(kAttentionTile % kLanes == 0);

  const typename V::QuerySet& set;
  const KvRows& keys;
  const KvRows& values;
  int64_t kv_offset;
  const int32_t* slots;
  int64_t longest;  // the last query's context: the tiles end there
  bool prefetch;    // few queries (decode): K/V rows fetched V::kPrefetchBlocks blocks ahead
  int64_t key_offset_bytes, value_offset_bytes, key_head_bytes, value_head_bytes;
  // Per query: the running max, the running sum as kLanes lane sums, and this tile's rescaling.
  float running_max[V::kMaxQueries], correction[V::kMaxQueries];
  Vec running_sum[V::kMaxQueries];
  // The tile: its start and length, its positions -> their slots, and per block its first
  // query (the ones after it see the block too).
  int64_t tile = 0, tile_len = 0, n_blocks = 0;
  int64_t rows[kAttentionTile];
  int64_t block_first[kAttentionTile / kLanes];
  // One block's K and V rows converted to floats (types other than F32): 2 x 16 KiB at most.
  alignas(64) float key_block[kLanes * head_dim];
  alignas(64) float value_block[kLanes * head_dim];
  // [n_queries, kAttentionTile]: scores, then softmax weights, written in whole blocks
  // (past the query's tile length). On the stack, not in the caller's scratch: some callers (a
  // test) size that to n_ctx when it is below a tile.
  alignas(64) float weights[V::kMaxQueries * kAttentionTile];

  TileWalk(const typename V::QuerySet& query_set, const KvRows& k, const KvRows& v, int64_t offset,
           const int32_t* slot_of)
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
      running_sum[j] = V::zero();
      std::fill_n(set.outs[j], head_dim, 0.0f);
    }
  }

  // The positions of block b query j sees (up to kLanes; 0 or less: none).
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

  // Every query's scaled scores for the tile, block by block, each block serving every query
  // before the next.
  [[gnu::always_inline]] void score_tile() {
    const Vec scale = V::set1(1.0f / std::sqrt(static_cast<float>(head_dim)));
    const Vec minus_infinity = V::set1(-INFINITY);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      if (prefetch) {
        const int64_t ahead = tile + (b + V::kPrefetchBlocks) * kLanes;
        prefetch_rows(ahead, std::min(longest, ahead + kLanes));
      }
      int64_t key_rows[kLanes];
      const auto* key_base =
          V::template block_base<kF16>(keys, kv_offset, rows + b * kLanes, block_len, head_dim, key_block, key_rows);
      V::template for_each_query_pack<pack>(block_first[b], set.n_queries, [&]<int kQueries>(int64_t j) {
        Vec scores[kQueries];
        V::template score_block<kVectors, kQueries>(set.queries + j, key_base, key_rows, scores);
        for (int i = 0; i < kQueries; ++i)
          V::store(weights + (j + i) * kAttentionTile + b * kLanes,
                   V::masked_scores(minus_infinity, V::mul(scores[i], scale), visible(j + i, b)));
      });
    }
  }

  // Each query's online-softmax step over its part of the tile (soft-capped first, Gemma 2,
  // on the positions it sees; the masked ones stay -inf): weights in place of the scores, the
  // new running max and sum, and the factor its output is rescaled by.
  [[gnu::always_inline]] void softmax_tile(int64_t tile_first) {
    const Vec minus_infinity = V::set1(-INFINITY);
    if (set.softcap > 0.0f)
      for (int64_t j = tile_first; j < set.n_queries; ++j) {
        float* tile_scores = weights + j * kAttentionTile;
        const int64_t n_visible = std::min(kAttentionTile, set.n_ctx[j] - tile);
        V::softcap_row(tile_scores, n_visible, set.softcap, tile_scores);  // the level's vector tanh
      }
    for (int64_t j = tile_first; j < set.n_queries; ++j) {
      float* tile_weights = weights + j * kAttentionTile;
      const int64_t query_blocks = (std::min(kAttentionTile, set.n_ctx[j] - tile) + kLanes - 1) / kLanes;
      Vec tile_max = minus_infinity;
      for (int64_t b = 0; b < query_blocks; ++b) tile_max = V::max(tile_max, V::load(tile_weights + b * kLanes));
      const float new_max = std::max(running_max[j], V::reduce_max(tile_max));
      const Vec new_max_vector = V::set1(new_max);
      // exp(-inf) = 0 on the first tile.
      const Vec rescale = V::exp_nonpositive(V::sub(V::set1(running_max[j]), new_max_vector));
      running_max[j] = new_max;
      correction[j] = V::lane0(rescale);
      Vec tile_sum = V::zero();
      for (int64_t b = 0; b < query_blocks; ++b) {
        const Vec block_weights = V::exp_nonpositive(V::sub(V::load(tile_weights + b * kLanes), new_max_vector));
        tile_sum = V::add(tile_sum, block_weights);
        V::store(tile_weights + b * kLanes, block_weights);
      }
      running_sum[j] = V::fmadd(running_sum[j], rescale, tile_sum);
    }
  }

  // Per query, whichever way the loops run: the output rescaled (in block 0), then each
  // block's weighted values in turn; in its last block over its own rows and position count
  // where they differ from its pack partner's (the head comment's last rule).
  [[gnu::always_inline]] void weigh_values_tile() {
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t block_len = std::min<int64_t>(kLanes, tile_len - b * kLanes);
      int64_t value_rows[kLanes];
      const auto* value_base = V::template block_base<kF16>(values, kv_offset, rows + b * kLanes, block_len, head_dim,
                                                            value_block, value_rows);
      // Queries j..j+k-1 add block b's values over n_positions positions whose rows are block_rows.
      auto accumulate = [&]<int kQueries>(int64_t j, const int64_t* block_rows, int64_t n_positions) {
        V::template add_weighted_values<kVectors, kQueries>(weights + j * kAttentionTile + b * kLanes, value_base,
                                                            block_rows, n_positions, set.outs + j,
                                                            b == 0 ? correction + j : nullptr);
      };
      // The tile's rows serve query j as they would alone unless it stops inside the block
      // short of the tile and its position count needs rounding up to chains.
      auto own_rows_needed = [&](int64_t n_visible) { return n_visible != block_len && n_visible % chains != 0; };
      auto rounded = [](int64_t n_visible) { return (n_visible + chains - 1) / chains * chains; };
      V::template for_each_query_pack<pack>(block_first[b], set.n_queries, [&]<int kQueries>(int64_t j) {
        const int64_t n_visible = visible(j, b);
        bool together = !own_rows_needed(n_visible);
        for (int i = 1; i < kQueries; ++i) together = together && visible(j + i, b) == n_visible;
        if (together) {
          accumulate.template operator()<kQueries>(j, value_rows, rounded(n_visible));
          return;
        }
        for (int i = 0; i < kQueries; ++i) {
          const int64_t query_visible = visible(j + i, b);
          if (!own_rows_needed(query_visible)) {
            accumulate.template operator()<1>(j + i, value_rows, rounded(query_visible));
            continue;
          }
          int64_t own_rows[kLanes];  // past its context, its last visible row (weight 0), as alone
          for (int64_t p = 0; p < kLanes; ++p) own_rows[p] = value_rows[std::min(p, query_visible - 1)];
          accumulate.template operator()<1>(j + i, own_rows, rounded(query_visible));
        }
      });
    }
  }

  // Each query's output divided by its sum (with its sink), or left as accumulators with its
  // max and sum in partials.
  [[gnu::always_inline]] void finish() {
    for (int64_t j = 0; j < set.n_queries; ++j) {
      const float sum = V::reduce_add(running_sum[j]);
      if (set.partials != nullptr) {
        set.partials[j] = {running_max[j], sum};
        continue;
      }
      const Vec inverse = V::set1(
          set.sinks != nullptr ? sink_normaliser(running_max[j], sum, set.sinks[j % set.sink_period]) : 1.0f / sum);
      float* acc_out = set.outs[j];
      for (int64_t v = 0; v < kVectors; ++v)
        V::storeu(acc_out + kLanes * v, V::mul(V::loadu(acc_out + kLanes * v), inverse));
    }
  }
};

// The kernel: attention for the queries of `set` over the K/V rows at `slots`.
template <typename V, int kVectors, bool kF16>
void attend_queries(const typename V::QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots) {
  TileWalk<V, kVectors, kF16> walk(set, keys, values, kv_offset, slots);
  if (walk.prefetch)  // the first blocks, before the loop's look-ahead reaches them
    walk.prefetch_rows(0, std::min(walk.longest, V::kPrefetchBlocks * V::kLanes));
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

}  // namespace tandem::attention_walk
