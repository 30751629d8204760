// Attention with AMX-BF16 tiles (TDPBF16PS: a 16x16 float tile += 16x32 bf16 times 32x16 bf16
// in one instruction, sixteen vdpbf16ps' worth), TANDEM_ATTENTION=bf16 on an AMX CPU. The
// roundings are those of the AVX-512 bf16 kernel (attention_bf16_avx512.cpp): each query once,
// each K row, each softmax weight and each V row to bf16 (round to nearest even), products
// exact, sums in float; the tile instruction only adds the products in its own order, so the
// bounds of tests/kernels/attention_bf16_test.cpp hold for both kernels (their bits differ).
//
// A call's queries (up to kMaxQueries: a prefill block's tokens x GQA group) are the rows of
// tiles, 16 at a time. Per tile of kAttentionTile positions from position 0:
//  - K: the tile's rows as bf16, each block of 16 positions transposed into B tiles (row r of
//    chunk c holds head elements 32c+2r, 32c+2r+1 of each position), so scores = Q·K^T is one
//    tile product per 16 queries, 16 positions and 32 head elements;
//  - the softmax on the 16x64 score rows in AVX-512, as the AVX-512 kernel does it (per query:
//    the tile's max, exp, weights rounded to bf16 and summed as rounded);
//  - V: pairs of positions interleaved (the B layout of weights x V), and out += P·V one tile
//    product per 16 queries, 16 head elements and 32 positions, into float accumulators that
//    are rescaled per query when its running max moves.
//
// Batch invariance: a tile's row is one query's; no arithmetic mixes rows. A query takes part
// in exactly the tiles it sees a position of: in a tile it does not see, its weights are
// written as zeros and its accumulators are not rescaled, so P·V adds exact zeros; in its last
// tile the positions past its context have score -inf and weight 0. The rows there (another
// query's, or the tile's last row repeated) are finite. Decode runs this same kernel with one
// row of 16 used: prefill == decode, bit for bit, for any chunking.
#include "kernels/amx/attention_amx.h"

#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <utility>

#include "base/dtype.h"
#include "kernels/amx/amx_tiles.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/cpu_features.h"
#include "kernels/geglu.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(                                                                        \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512bf16,avx2,fma,f16c,amx-tile,amx-bf16")
#endif

#include "kernels/avx512/attention_parts.h"  // AVX-512 code: after the target pragma
#include "kernels/avx512/bf16_parts.h"
#include "kernels/avx512/vector_exp.h"

namespace tandem::amx {
namespace {

using namespace avx512::attention_parts;  // NOLINT(google-build-using-namespace): this file is their user
using namespace avx512::bf16_parts;       // NOLINT(google-build-using-namespace): likewise
using avx512::exp_nonpositive;
using avx512::first_lanes;

constexpr int64_t kTileRows = 16;                     // queries per row block of a tile
constexpr int64_t kBlocks = kAttentionTile / kLanes;  // blocks of 16 positions in a tile
constexpr int64_t kHalfTile = 2 * kLanes;             // positions in one weights x V product
static_assert(kAttentionTile % kHalfTile == 0 && kMaxQueries % kTileRows == 0);

// rows[i] word j becomes rows[j] word i (16 x 16 32-bit words): 32-bit and 64-bit unpacks
// within 128-bit lanes, then two rounds of 128-bit lane shuffles.
[[gnu::always_inline]] inline void transpose_words(__m512i (&rows)[16]) {
  __m512i pairs[16], quads[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    pairs[2 * i] = _mm512_unpacklo_epi32(rows[2 * i], rows[2 * i + 1]);
    pairs[2 * i + 1] = _mm512_unpackhi_epi32(rows[2 * i], rows[2 * i + 1]);
  }
  // quads[4i + k], lane L: word 4L + k of rows 4i..4i+3.
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    quads[4 * i + 0] = _mm512_unpacklo_epi64(pairs[4 * i + 0], pairs[4 * i + 2]);
    quads[4 * i + 1] = _mm512_unpackhi_epi64(pairs[4 * i + 0], pairs[4 * i + 2]);
    quads[4 * i + 2] = _mm512_unpacklo_epi64(pairs[4 * i + 1], pairs[4 * i + 3]);
    quads[4 * i + 3] = _mm512_unpackhi_epi64(pairs[4 * i + 1], pairs[4 * i + 3]);
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    const __m512i even_low = _mm512_shuffle_i32x4(quads[k], quads[4 + k], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd_low = _mm512_shuffle_i32x4(quads[k], quads[4 + k], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i even_high = _mm512_shuffle_i32x4(quads[8 + k], quads[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512i odd_high = _mm512_shuffle_i32x4(quads[8 + k], quads[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
    rows[k] = _mm512_shuffle_i32x4(even_low, even_high, _MM_SHUFFLE(2, 0, 2, 0));
    rows[8 + k] = _mm512_shuffle_i32x4(even_low, even_high, _MM_SHUFFLE(3, 1, 3, 1));
    rows[4 + k] = _mm512_shuffle_i32x4(odd_low, odd_high, _MM_SHUFFLE(2, 0, 2, 0));
    rows[12 + k] = _mm512_shuffle_i32x4(odd_low, odd_high, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

// A call's working set, off the stack of the call (up to ~330 KB at head_dim 256) and reused:
// one per thread.
template <int kVectors>
struct Workspace {
  static constexpr int64_t head_dim = 16 * kVectors;
  static constexpr int64_t head_halves = kChunks<kVectors> * kChunkHalves;
  alignas(64) uint16_t query_halves[kMaxQueries * head_halves];                // [query][chunk][32], padding rows zero
  alignas(64) float accumulators[kMaxQueries * head_dim];                      // [query][head_dim]
  alignas(64) float float_block[kLanes * head_dim];                            // a block's rows converted to floats
  alignas(64) uint16_t key_halves[kLanes * head_halves];                       // a block's K rows as bf16
  alignas(64) uint32_t key_tiles[kBlocks][kChunks<kVectors>][kTileRows * 16];  // B tiles of K^T
  alignas(64) uint16_t value_pairs[kAttentionTile / 2 * kVectors * kChunkHalves];  // [pair][vector][32]
  alignas(64) float scores[kMaxQueries * kAttentionTile];                          // [query][position]
  alignas(64) uint16_t weight_halves[kMaxQueries * kAttentionTile];                // [query][position]
  float running_max[kMaxQueries], running_sum[kMaxQueries], correction[kMaxQueries];
};

// The tile's K rows, blocks 0..n_blocks-1, as the B tiles of K^T. kF16: F16 rows read in
// place (widened as loaded); otherwise converted to floats a block at a time.
template <int kVectors, bool kF16>
void key_tiles_of(Workspace<kVectors>& w, const KvRows& keys, int64_t kv_offset, const int64_t* rows,
                  int64_t n_blocks) {
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t key_rows[kLanes];
    const auto* base =
        block_base<kF16>(keys, kv_offset, rows + b * kLanes, kLanes, w.head_dim, w.float_block, key_rows);
    for (int p = 0; p < kLanes; ++p) head_to_bf16<kVectors>(base + key_rows[p], w.key_halves + p * head_halves);
    for (int64_t c = 0; c < kChunks<kVectors>; ++c) {
      __m512i words[16];
#pragma GCC unroll 16
      for (int p = 0; p < kLanes; ++p) words[p] = _mm512_load_si512(w.key_halves + p * head_halves + kChunkHalves * c);
      transpose_words(words);
#pragma GCC unroll 16
      for (int r = 0; r < kTileRows; ++r) _mm512_store_si512(w.key_tiles[b][c] + r * 16, words[r]);
    }
  }
}

// The tile's V rows, n_blocks blocks, as pairs of positions interleaved; kF16 as for K.
template <int kVectors, bool kF16>
void value_pairs_of(Workspace<kVectors>& w, const KvRows& values, int64_t kv_offset, const int64_t* rows,
                    int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t value_rows[kLanes];
    const auto* base =
        block_base<kF16>(values, kv_offset, rows + b * kLanes, kLanes, w.head_dim, w.float_block, value_rows);
    for (int64_t m = 0; m < kLanes / 2; ++m)
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) {
        const __m512i two_rows =
            to_bf16(load_vector(base + value_rows[2 * m] + 16 * v), load_vector(base + value_rows[2 * m + 1] + 16 * v));
        _mm512_store_si512(w.value_pairs + ((b * kLanes / 2 + m) * kVectors + v) * kChunkHalves,
                           interleave_rows(two_rows));
      }
  }
}

// Query j's softmax step over the tile's scores (its visible positions; the rest weigh 0):
// its bf16 weights, running max and sum, and the factor its accumulators are rescaled by.
template <int kVectors>
[[gnu::always_inline]] inline void softmax_step(Workspace<kVectors>& w, int64_t j, int64_t visible, __m512 scale,
                                                float softcap) {
  float* tile_scores = w.scores + j * kAttentionTile;
  uint16_t* weights = w.weight_halves + j * kAttentionTile;
  const int64_t query_blocks = (visible + kLanes - 1) / kLanes;
  const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
  for (int64_t b = 0; b < query_blocks; ++b)
    _mm512_store_ps(tile_scores + b * kLanes,
                    _mm512_mask_mov_ps(minus_infinity, first_lanes(std::min<int64_t>(kLanes, visible - b * kLanes)),
                                       _mm512_mul_ps(_mm512_load_ps(tile_scores + b * kLanes), scale)));
  if (softcap > 0.0f) avx512::softcap_row(tile_scores, visible, softcap, tile_scores);
  const Bf16TileWeights step = bf16_tile_weights(tile_scores, query_blocks, w.running_max[j], weights);
  for (int64_t b = query_blocks; b < kBlocks; ++b)
    _mm256_store_si256(reinterpret_cast<__m256i*>(weights + b * kLanes), _mm256_setzero_si256());
  const float rescale = _mm512_cvtss_f32(step.rescale);
  w.running_sum[j] = w.running_sum[j] * rescale + _mm512_reduce_add_ps(step.sum);
  w.correction[j] = rescale;
}

template <int kVectors>
void attend_queries_amx(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                        const int32_t* slots) {
  ensure_tiles_configured();
  thread_local std::unique_ptr<Workspace<kVectors>> workspace;
  if (workspace == nullptr) workspace = std::make_unique<Workspace<kVectors>>();
  Workspace<kVectors>& w = *workspace;
  constexpr int64_t head_dim = Workspace<kVectors>::head_dim;
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  constexpr int64_t chunks = kChunks<kVectors>;
  const int64_t n_queries = set.n_queries;
  const int64_t* n_ctx = set.n_ctx;
  const int64_t n_rows = (n_queries + kTileRows - 1) / kTileRows * kTileRows;
  const __m512 scale = _mm512_set1_ps(1.0f / std::sqrt(static_cast<float>(head_dim)));

  for (int64_t j = 0; j < n_rows; ++j) {
    if (j < n_queries)
      head_to_bf16<kVectors>(set.queries[j], w.query_halves + j * head_halves);
    else
      std::fill_n(w.query_halves + j * head_halves, head_halves, uint16_t{0});
    std::fill_n(w.accumulators + j * head_dim, head_dim, 0.0f);
    w.running_max[j] = -INFINITY;
    w.running_sum[j] = 0.0f;
  }

  int64_t rows[kAttentionTile];  // the tile's positions -> their slots
  const int64_t longest = n_ctx[n_queries - 1];
  // Few queries (decode): the next tile's K/V rows are fetched while this one is computed
  // (kernels/kv_prefetch.h), as the AVX-512 kernels do.
  const bool prefetch = n_queries < kPrefetchBelowQueries;
  const int64_t key_offset_bytes = kv_row_offset_bytes(keys.type, kv_offset);
  const int64_t value_offset_bytes = kv_row_offset_bytes(values.type, kv_offset);
  const int64_t key_head_bytes = dtype_row_bytes(keys.type, head_dim);
  const int64_t value_head_bytes = dtype_row_bytes(values.type, head_dim);
  if (prefetch) {
    prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, 0, std::min(longest, kAttentionTile));
    prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, 0, std::min(longest, kAttentionTile));
  }
  int64_t tile_first = 0;  // the first query that sees the tile; the ones after it do too
  for (int64_t tile = 0; tile < longest; tile += kAttentionTile) {
    while (n_ctx[tile_first] <= tile) ++tile_first;
    if (prefetch && tile + kAttentionTile < longest) {
      const int64_t next_end = std::min(longest, tile + 2 * kAttentionTile);
      prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, tile + kAttentionTile, next_end);
      prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, tile + kAttentionTile, next_end);
    }
    const int64_t first_row = tile_first / kTileRows * kTileRows;
    const int64_t tile_len = std::min(kAttentionTile, longest - tile);
    const int64_t n_blocks = (tile_len + kLanes - 1) / kLanes;
    const int64_t n_halves = (tile_len + kHalfTile - 1) / kHalfTile;
    // Positions past the context read the last visible row (finite); their weights are 0.
    for (int64_t p = 0; p < tile_len; ++p) rows[p] = slots[tile + p];
    for (int64_t p = tile_len; p < kAttentionTile; ++p) rows[p] = rows[tile_len - 1];

    if (keys.type == DType::F16)
      key_tiles_of<kVectors, true>(w, keys, kv_offset, rows, n_blocks);
    else
      key_tiles_of<kVectors, false>(w, keys, kv_offset, rows, n_blocks);
    // scores[j][p] = q_j · k_p for the row blocks that hold a query seeing the tile.
    for (int64_t row = first_row; row < n_rows; row += kTileRows)
      for (int64_t b = 0; b < n_blocks; ++b) {
        _tile_zero(TANDEM_TILE_C);
        for (int64_t c = 0; c < chunks; ++c) {
          _tile_loadd(TANDEM_TILE_A_BF16, w.query_halves + row * head_halves + c * kChunkHalves,
                      head_halves * sizeof(uint16_t));
          _tile_loadd(TANDEM_TILE_B_BF16, w.key_tiles[b][c], 64);
          _tile_dpbf16ps(TANDEM_TILE_C, TANDEM_TILE_A_BF16, TANDEM_TILE_B_BF16);
        }
        _tile_stored(TANDEM_TILE_C, w.scores + row * kAttentionTile + b * kLanes, kAttentionTile * sizeof(float));
      }

    for (int64_t j = first_row; j < n_rows; ++j) {
      if (j < tile_first || j >= n_queries) {
        std::fill_n(w.weight_halves + j * kAttentionTile, kAttentionTile, uint16_t{0});
        continue;
      }
      softmax_step<kVectors>(w, j, std::min(kAttentionTile, n_ctx[j] - tile), scale, set.softcap);
      if (w.correction[j] == 1.0f) continue;  // x·1 == x: skipping it changes no bit
      const __m512 rescale = _mm512_set1_ps(w.correction[j]);
      float* acc = w.accumulators + j * head_dim;
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v)
        _mm512_store_ps(acc + 16 * v, _mm512_mul_ps(_mm512_load_ps(acc + 16 * v), rescale));
    }

    if (values.type == DType::F16)
      value_pairs_of<kVectors, true>(w, values, kv_offset, rows, n_halves * 2);
    else
      value_pairs_of<kVectors, false>(w, values, kv_offset, rows, n_halves * 2);
    // accumulators[j] += Σ_p weight[j][p]·v_p, 32 positions a product.
    for (int64_t row = first_row; row < n_rows; row += kTileRows)
      for (int v = 0; v < kVectors; ++v) {
        float* acc = w.accumulators + row * head_dim + 16 * v;
        _tile_loadd(TANDEM_TILE_C, acc, head_dim * sizeof(float));
        for (int64_t h = 0; h < n_halves; ++h) {
          _tile_loadd(TANDEM_TILE_A_BF16, w.weight_halves + row * kAttentionTile + h * kHalfTile,
                      kAttentionTile * sizeof(uint16_t));
          _tile_loadd(TANDEM_TILE_B_BF16, w.value_pairs + (h * kLanes * kVectors + v) * kChunkHalves,
                      kVectors * kChunkHalves * sizeof(uint16_t));
          _tile_dpbf16ps(TANDEM_TILE_C, TANDEM_TILE_A_BF16, TANDEM_TILE_B_BF16);
        }
        _tile_stored(TANDEM_TILE_C, acc, head_dim * sizeof(float));
      }
  }

  for (int64_t j = 0; j < n_queries; ++j) {
    const float* acc = w.accumulators + j * head_dim;
    float* out = set.outs[j];
    if (set.partials != nullptr) {
      set.partials[j] = {w.running_max[j], w.running_sum[j]};
      std::copy_n(acc, head_dim, out);
      continue;
    }
    const __m512 inverse = _mm512_set1_ps(
        set.sinks != nullptr ? sink_normaliser(w.running_max[j], w.running_sum[j], set.sinks[j % set.sink_period])
                             : 1.0f / w.running_sum[j]);
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v)
      _mm512_storeu_ps(out + 16 * v, _mm512_mul_ps(_mm512_load_ps(acc + 16 * v), inverse));
  }
}

template <size_t... kIndices>
constexpr std::array<QueriesKernel, sizeof...(kIndices)> amx_kernels(std::index_sequence<kIndices...>) {
  return {&attend_queries_amx<static_cast<int>(kIndices) + 1>...};
}

// Indexed by head_dim / 16 - 1.
constexpr std::array<QueriesKernel, kMaxHeadVectors> kAmxKernels =
    amx_kernels(std::make_index_sequence<kMaxHeadVectors>());

QueriesKernel amx_kernel(const KvRows& /*keys*/, const KvRows& /*values*/, int64_t head_dim, int64_t /*n_queries*/) {
  return kAmxKernels[static_cast<size_t>(head_dim / 16 - 1)];
}

}  // namespace

void attention_group_bf16(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                          int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                          float* out, float softcap, const float* sinks, AttentionPartial* partials) {
  attention_group_with(amx_kernel, queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out,
                       softcap, sinks, partials);
}

void attention_tokens_bf16(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials) {
  attention_tokens_with(amx_kernel, queries, query_stride, n_tokens, group, positions, keys, values, kv_offset, slots,
                        head_dim, scratch, out, out_stride, softcap, sinks, partials);
}

}  // namespace tandem::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
