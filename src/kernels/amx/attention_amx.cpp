// Attention with AMX-BF16 tiles (TDPBF16PS: a 16x16 float tile += 16x32 bf16 times 32x16 bf16
// in one instruction, sixteen vdpbf16ps' worth), TANDEM_ATTENTION=bf16 on an AMX CPU. The
// roundings are those of the AVX-512 bf16 kernel (attention_bf16_avx512.cpp): each query once,
// each K row, each softmax weight and each V row to bf16 (round to nearest even), products
// exact, sums in float; the tile instruction adds the products in its own order, and the
// weights come from a cheaper exp (exp2_for_bf16, a thousandth of a bf16 step), so the bounds
// of tests/kernels/attention_bf16_test.cpp hold for both kernels (their bits differ).
//
// A call's queries (up to kMaxCallQueries: a prefill block's tokens x GQA group) are the rows of
// tiles, 16 at a time. Per tile of kTilePositions positions from position 0:
//  - K: the tile's rows as bf16, each block of 16 positions transposed into B tiles (row r of
//    chunk c holds head elements 32c+2r, 32c+2r+1 of each position), so scores = Q·K^T is one
//    tile product per 16 queries, 16 positions and 32 head elements, four blocks of positions
//    a query chunk load;
//  - the softmax on the score rows in AVX-512, 16 queries at a time (softmax_rows): per query
//    the tile's max, 2^(score·scale·log2e - max·log2e) rounded to bf16 and summed as rounded;
//    the maxima and sums of the 16 reduced together, vertically;
//  - V: pairs of positions interleaved (the B layout of weights x V), and out += P·V one tile
//    product per 16 queries, 16 head elements and 32 positions, four head vectors a weights
//    load, into float accumulators that are rescaled per query when its running max moves.
// The kernel loads its own tile palette (ensure_attention_tiles_configured: eight 16x64 tiles);
// the GEMM kernels load theirs back when they run next on the thread.
//
// Batch invariance: a tile's row is one query's; no arithmetic mixes rows. A query takes part
// in exactly the tiles it sees a position of: in a tile it does not see, its weights are
// written as zeros and its accumulators are not rescaled, so P·V adds exact zeros; in its last
// tile the positions past its context get weight 0. The rows there (another query's, or the
// tile's last row repeated) are finite. Decode runs this same kernel with one row of 16 used:
// prefill == decode, bit for bit, for any chunking.
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

namespace tandem::amx {
namespace {

using namespace avx512::attention_parts;  // NOLINT(google-build-using-namespace): this file is their user
using namespace avx512::bf16_parts;       // NOLINT(google-build-using-namespace): likewise
using avx512::first_lanes;

constexpr int64_t kTileRows = 16;  // queries per row block of a tile
// Queries in one call (a prefill block's tokens x GQA group): four times the AVX-512 kernels'
// bound, because every call converts each K and V row of its context to bf16 tiles once, and
// at 128 queries a call that conversion was a quarter of the kernel's time. The workspace
// (~0.8 MB at head_dim 128) still fits a core's L2 on the AMX CPUs.
constexpr int64_t kMaxCallQueries = 4 * kMaxQueries;
// Positions per tile: twice the AVX-512 kernels' kAttentionTile, so that each load and store of
// a P·V accumulator tile serves four products instead of two and each query's softmax step
// (its max, rescale and sums) covers twice the positions. Tiles start at multiples of it from
// position 0, so decode and prefill still cut a context the same way.
constexpr int64_t kTilePositions = 2 * kAttentionTile;
static_assert(kAttentionSegment % kTilePositions == 0);

// The tiles of ensure_attention_tiles_configured's palette (macros: the tile intrinsics paste
// the register number into the instruction). Products alternate between two B operands, so a
// load into one does not wait for the product still reading the other.
#define TANDEM_ACC_0 0
#define TANDEM_ACC_1 1
#define TANDEM_ACC_2 2
#define TANDEM_ACC_3 3
#define TANDEM_OPERAND_A 4
#define TANDEM_OPERAND_A2 5
#define TANDEM_OPERAND_B 6
#define TANDEM_OPERAND_B2 7
constexpr int64_t kAccumulators = 4;
// The first `count` (1-4) of four statements, for the accumulators in use.
#define TANDEM_FOR_ACCUMULATORS(count, first, second, third, fourth) \
  do {                                                               \
    first;                                                           \
    if ((count) > 1) second;                                         \
    if ((count) > 2) third;                                          \
    if ((count) > 3) fourth;                                         \
  } while (false)
// accumulator += A x (the B operand loaded from source with stride).
#define TANDEM_PRODUCT(accumulator, operand, source, stride) \
  do {                                                       \
    _tile_loadd(operand, source, stride);                    \
    _tile_dpbf16ps(accumulator, TANDEM_OPERAND_A, operand);  \
  } while (false)
// accumulator += (the A operand loaded from source with stride) x B: decode's K rows times the
// queries' B tile (score_decode_blocks).
#define TANDEM_ROWS_PRODUCT(accumulator, operand, source, stride) \
  do {                                                            \
    _tile_loadd(operand, source, stride);                         \
    _tile_dpbf16ps(accumulator, operand, TANDEM_OPERAND_B);       \
  } while (false)
constexpr int64_t kBlocks = kTilePositions / kLanes;  // blocks of 16 positions in a tile
constexpr int64_t kHalfTile = 2 * kLanes;             // positions in one weights x V product
static_assert(kTilePositions % kHalfTile == 0 && kMaxCallQueries % kTileRows == 0);

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
  alignas(64) uint16_t query_halves[kMaxCallQueries * head_halves];            // [query][chunk][32], padding rows zero
  alignas(64) float accumulators[kMaxCallQueries * head_dim];                  // [query][head_dim]
  alignas(64) float float_block[kLanes * head_dim];                            // a block's rows converted to floats
  alignas(64) uint16_t key_halves[kLanes * head_halves];                       // a block's K rows as bf16
  alignas(64) uint32_t key_tiles[kBlocks][kChunks<kVectors>][kTileRows * 16];  // B tiles of K^T
  // Decode (one row block of queries): the queries as B tiles, and the tile's K rows as bf16.
  alignas(64) uint32_t query_tiles[kChunks<kVectors>][kTileRows * 16];
  alignas(64) uint16_t key_rows[kTilePositions * head_halves];                     // [position][chunk][32]
  alignas(64) float transposed_scores[kAccumulators][kLanes * kTileRows];          // [position][query]
  alignas(64) uint16_t value_pairs[kTilePositions / 2 * kVectors * kChunkHalves];  // [pair][vector][32]
  alignas(64) float scores[kMaxCallQueries * kTilePositions];                      // [query][position]
  alignas(64) uint16_t weight_halves[kMaxCallQueries * kTilePositions];            // [query][position]
  alignas(64) float running_max[kMaxCallQueries], running_sum[kMaxCallQueries], correction[kMaxCallQueries];
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

// Decode: the tile's K rows, blocks 0..n_blocks-1, as bf16 rows, the A operand of
// scores^T = K·Q^T as they are (key_tiles_of's transposes, four a block at head_dim 128,
// were the largest part of a decode step's work with one or two queries).
template <int kVectors, bool kF16>
void key_rows_of(Workspace<kVectors>& w, const KvRows& keys, int64_t kv_offset, const int64_t* rows, int64_t n_blocks) {
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int64_t key_rows[kLanes];
    const auto* base =
        block_base<kF16>(keys, kv_offset, rows + b * kLanes, kLanes, w.head_dim, w.float_block, key_rows);
    for (int p = 0; p < kLanes; ++p)
      head_to_bf16<kVectors>(base + key_rows[p], w.key_rows + (b * kLanes + p) * head_halves);
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

// The 16 vectors' lanes reduced: lane i of the result is the max (or the sum, added in a fixed
// tree order) of vectors[i]'s lanes. The vectors are transposed first, so 16 queries' reductions
// are 15 vertical operations instead of 16 horizontal chains.
template <bool kSum>
[[gnu::always_inline]] inline __m512 reduce_each(__m512i (&vectors)[16]) {
  transpose_words(vectors);
  __m512 level[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    const __m512 a = _mm512_castsi512_ps(vectors[i]), b = _mm512_castsi512_ps(vectors[8 + i]);
    level[i] = kSum ? _mm512_add_ps(a, b) : _mm512_max_ps(a, b);
  }
#pragma GCC unroll 3
  for (int width = 4; width >= 1; width /= 2)
#pragma GCC unroll 4
    for (int i = 0; i < width; ++i)
      level[i] = kSum ? _mm512_add_ps(level[i], level[width + i]) : _mm512_max_ps(level[i], level[width + i]);
  return level[0];
}

// 2^y for y <= 0, for weights that are rounded to bf16 next (8 significant bits): 2^round(y)
// times a degree-4 polynomial of 2^f on |f| <= 1/2 with p(0) = 1 exactly (so a running max
// that does not move rescales by exactly 1), fitted for the least largest relative error:
// 2.8e-6, a thousandth of a bf16 step, about degree-5 Taylor's 2.5e-6 with one FMA fewer;
// nine instructions where the float-exact exp takes fourteen. Below
// 2^-125 it stays at 2^-125 (never subnormal: a subnormal result costs a microcode assist), so
// -inf gives 2^-125, not 0: callers zero the positions a query does not see themselves. A NaN
// stays NaN (the second operand of max), so a NaN score still shows in the output.
[[gnu::always_inline]] inline __m512 exp2_for_bf16(__m512 y) {
  y = _mm512_max_ps(_mm512_set1_ps(-125.0f), y);
  const __m512 n = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT);
  const __m512 f = _mm512_sub_ps(y, n);  // exact
  __m512 p = _mm512_set1_ps(9.582853437979589e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.59064271359262e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402409861937614e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931241931242171e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

constexpr float kLog2e = 1.44269504088896341f;

// The online-softmax step of the 16 queries of the row block at `row` over the tile's scores:
// each query's bf16 weights exp(score·scale - new max) (its visible positions; the rest weigh
// 0), and, for the 16 at once, the new running max (of score·scale), the running sum of the
// rounded weights and the factor the accumulators are rescaled by. A row whose query does not
// see the tile (its context ended before it, or a padding row) gets zero weights and keeps its
// max, sum and accumulators (factor 1). The per-query reductions are vertical (reduce_each), so
// no query waits on a horizontal chain of its own. Each weight is one fused multiply-subtract
// of the raw score (2^(score·scale·log2e - max·log2e)) and exp2_for_bf16: the scores are not
// scaled in place first (only with a soft-cap, which needs the scaled score). The max of the
// scaled scores is the scaled max of the raw ones (rounding is monotonic), bit for bit.
// Returns the mask of rows whose accumulators need the rescale.
template <int kVectors>
__mmask16 softmax_rows(Workspace<kVectors>& w, int64_t row, int64_t tile, const int64_t* n_ctx, int64_t tile_first,
                       int64_t n_queries, float scale, float softcap) {
  const __m512 minus_infinity = _mm512_set1_ps(-INFINITY);
  // With a soft-cap the scores are scaled and capped in place, and then taken as they are.
  const float score_factor = softcap > 0.0f ? 1.0f : scale;
  __mmask16 active = 0;
  int64_t visible_of[kTileRows];
  __m512i maxima[kTileRows];
  for (int i = 0; i < kTileRows; ++i) {
    const int64_t j = row + i;
    maxima[i] = _mm512_castps_si512(minus_infinity);
    visible_of[i] = 0;
    if (j < tile_first || j >= n_queries) continue;
    active |= static_cast<__mmask16>(1u << i);
    float* tile_scores = w.scores + j * kTilePositions;
    const int64_t visible = std::min(kTilePositions, n_ctx[j] - tile);
    visible_of[i] = visible;
    if (softcap > 0.0f) {
      const __m512 scale_vector = _mm512_set1_ps(scale);
      for (int64_t b = 0; b * kLanes < visible; ++b)
        _mm512_store_ps(tile_scores + b * kLanes,
                        _mm512_mul_ps(_mm512_load_ps(tile_scores + b * kLanes), scale_vector));
      avx512::softcap_row(tile_scores, visible, softcap, tile_scores);
    }
    const int64_t full_blocks = visible / kLanes, tail = visible % kLanes;
    __m512 tile_max = minus_infinity;
    for (int64_t b = 0; b < full_blocks; ++b)
      tile_max = _mm512_max_ps(tile_max, _mm512_load_ps(tile_scores + b * kLanes));
    if (tail != 0)
      tile_max =
          _mm512_mask_max_ps(tile_max, first_lanes(tail), tile_max, _mm512_load_ps(tile_scores + full_blocks * kLanes));
    maxima[i] = _mm512_castps_si512(tile_max);
  }
  const __m512 running_max = _mm512_load_ps(w.running_max + row);
  const __m512 tile_max = _mm512_mul_ps(reduce_each<false>(maxima), _mm512_set1_ps(score_factor));
  const __m512 new_max = _mm512_mask_max_ps(running_max, active, running_max, tile_max);
  // 2^-125 for -inf on a query's first tile (its accumulators and sum are zeros then); rows
  // that do not take part keep a factor of 1.
  const __m512 log2e = _mm512_set1_ps(kLog2e);
  const __m512 rescale = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), active,
                                            exp2_for_bf16(_mm512_mul_ps(_mm512_sub_ps(running_max, new_max), log2e)));
  _mm512_store_ps(w.running_max + row, new_max);

  alignas(64) float max_log2[kTileRows];
  _mm512_store_ps(max_log2, _mm512_mul_ps(new_max, log2e));
  const __m512 score_log2 = _mm512_set1_ps(score_factor * kLog2e);
  const __m512i high_words = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512i sums[kTileRows];
  for (int i = 0; i < kTileRows; ++i) {
    const int64_t j = row + i;
    uint16_t* weights = w.weight_halves + j * kTilePositions;
    const float* tile_scores = w.scores + j * kTilePositions;
    const __m512 query_max = _mm512_set1_ps(max_log2[i]);
    const int64_t visible = visible_of[i];
    const int64_t full_blocks = visible / kLanes, tail = visible % kLanes;
    // Two sums (the even and the odd words), so the adds are two chains, not one.
    __m512 sum = _mm512_setzero_ps(), odd_sum = _mm512_setzero_ps();
    int64_t b = 0;
    // Two blocks a conversion: words 0-15 the first block's weights, 16-31 the second's; the
    // 32 rounded weights are summed as the low and high halves of 16 words.
    for (; b + 2 <= full_blocks; b += 2) {
      const __m512 first =
          exp2_for_bf16(_mm512_fmsub_ps(_mm512_load_ps(tile_scores + b * kLanes), score_log2, query_max));
      const __m512 second =
          exp2_for_bf16(_mm512_fmsub_ps(_mm512_load_ps(tile_scores + (b + 1) * kLanes), score_log2, query_max));
      const __m512i rounded = to_bf16(first, second);
      _mm512_store_si512(weights + b * kLanes, rounded);
      sum = _mm512_add_ps(sum, _mm512_castsi512_ps(_mm512_slli_epi32(rounded, 16)));
      odd_sum = _mm512_add_ps(odd_sum, _mm512_castsi512_ps(_mm512_and_si512(rounded, high_words)));
    }
    for (; b * kLanes < visible; ++b) {
      __m512 block_weights =
          exp2_for_bf16(_mm512_fmsub_ps(_mm512_load_ps(tile_scores + b * kLanes), score_log2, query_max));
      if (b == full_blocks) block_weights = _mm512_maskz_mov_ps(first_lanes(tail), block_weights);
      const __m256i rounded = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(block_weights));
      _mm256_store_si256(reinterpret_cast<__m256i*>(weights + b * kLanes), rounded);
      sum = _mm512_add_ps(sum, bf16_to_floats(rounded));
    }
    for (; b < kBlocks; ++b)
      _mm256_store_si256(reinterpret_cast<__m256i*>(weights + b * kLanes), _mm256_setzero_si256());
    sums[i] = _mm512_castps_si512(_mm512_add_ps(sum, odd_sum));
  }
  const __m512 tile_sum = reduce_each<true>(sums);
  const __m512 running_sum = _mm512_load_ps(w.running_sum + row);
  _mm512_store_ps(w.running_sum + row,
                  _mm512_mask_add_ps(running_sum, active, _mm512_mul_ps(running_sum, rescale), tile_sum));
  _mm512_store_ps(w.correction + row, rescale);
  return _mm512_cmp_ps_mask(rescale, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ);
}

// scores[j][p] = q_j · k_p for the 16 queries of the row block at `row` and the tile's n_blocks
// blocks of 16 positions: four blocks at a time, each query chunk loaded once for the four.
template <int kVectors>
void score_row_block(Workspace<kVectors>& w, int64_t row, int64_t n_blocks) {
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  constexpr int64_t chunks = kChunks<kVectors>;
  for (int64_t first_block = 0; first_block < n_blocks; first_block += kAccumulators) {
    const int64_t count = std::min<int64_t>(kAccumulators, n_blocks - first_block);
    const uint16_t* query_chunks = w.query_halves + row * head_halves;
    const uint32_t(*key_tiles)[chunks][kTileRows * 16] = w.key_tiles + first_block;
    TANDEM_FOR_ACCUMULATORS(count, _tile_zero(TANDEM_ACC_0), _tile_zero(TANDEM_ACC_1), _tile_zero(TANDEM_ACC_2),
                            _tile_zero(TANDEM_ACC_3));
    for (int64_t c = 0; c < chunks; ++c) {
      _tile_loadd(TANDEM_OPERAND_A, query_chunks + c * kChunkHalves, head_halves * sizeof(uint16_t));
      TANDEM_FOR_ACCUMULATORS(count, TANDEM_PRODUCT(TANDEM_ACC_0, TANDEM_OPERAND_B, key_tiles[0][c], 64),
                              TANDEM_PRODUCT(TANDEM_ACC_1, TANDEM_OPERAND_B2, key_tiles[1][c], 64),
                              TANDEM_PRODUCT(TANDEM_ACC_2, TANDEM_OPERAND_B, key_tiles[2][c], 64),
                              TANDEM_PRODUCT(TANDEM_ACC_3, TANDEM_OPERAND_B2, key_tiles[3][c], 64));
    }
    float* scores = w.scores + row * kTilePositions + first_block * kLanes;
    constexpr size_t kScoreStride = kTilePositions * sizeof(float);
    TANDEM_FOR_ACCUMULATORS(count, _tile_stored(TANDEM_ACC_0, scores, kScoreStride),
                            _tile_stored(TANDEM_ACC_1, scores + kLanes, kScoreStride),
                            _tile_stored(TANDEM_ACC_2, scores + 2 * kLanes, kScoreStride),
                            _tile_stored(TANDEM_ACC_3, scores + 3 * kLanes, kScoreStride));
  }
}

// Decode's scores (the call's queries are one row block): scores^T = K·Q^T, the tile's K rows
// as the A operand and the queries' B tiles (query_tiles), then each 16x16 block transposed
// into w.scores' rows. Each score is the same sum as score_row_block's, bit for bit: a tile
// element adds the products of its row's and column's bf16 pairs in the order of the pairs,
// whichever operand holds which, and a bf16 product is exact in float.
template <int kVectors>
void score_decode_blocks(Workspace<kVectors>& w, int64_t n_blocks) {
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  constexpr int64_t chunks = kChunks<kVectors>;
  constexpr size_t kRowStride = head_halves * sizeof(uint16_t);
  for (int64_t first_block = 0; first_block < n_blocks; first_block += kAccumulators) {
    const int64_t count = std::min<int64_t>(kAccumulators, n_blocks - first_block);
    const uint16_t* key_rows = w.key_rows + first_block * kLanes * head_halves;
    TANDEM_FOR_ACCUMULATORS(count, _tile_zero(TANDEM_ACC_0), _tile_zero(TANDEM_ACC_1), _tile_zero(TANDEM_ACC_2),
                            _tile_zero(TANDEM_ACC_3));
    for (int64_t c = 0; c < chunks; ++c) {
      _tile_loadd(TANDEM_OPERAND_B, w.query_tiles[c], 64);
      const uint16_t* chunk = key_rows + c * kChunkHalves;
      TANDEM_FOR_ACCUMULATORS(
          count, TANDEM_ROWS_PRODUCT(TANDEM_ACC_0, TANDEM_OPERAND_A, chunk, kRowStride),
          TANDEM_ROWS_PRODUCT(TANDEM_ACC_1, TANDEM_OPERAND_A2, chunk + kLanes * head_halves, kRowStride),
          TANDEM_ROWS_PRODUCT(TANDEM_ACC_2, TANDEM_OPERAND_A, chunk + 2 * kLanes * head_halves, kRowStride),
          TANDEM_ROWS_PRODUCT(TANDEM_ACC_3, TANDEM_OPERAND_A2, chunk + 3 * kLanes * head_halves, kRowStride));
    }
    TANDEM_FOR_ACCUMULATORS(count, _tile_stored(TANDEM_ACC_0, w.transposed_scores[0], 64),
                            _tile_stored(TANDEM_ACC_1, w.transposed_scores[1], 64),
                            _tile_stored(TANDEM_ACC_2, w.transposed_scores[2], 64),
                            _tile_stored(TANDEM_ACC_3, w.transposed_scores[3], 64));
    for (int64_t i = 0; i < count; ++i) {
      __m512i words[16];
#pragma GCC unroll 16
      for (int p = 0; p < kLanes; ++p) words[p] = _mm512_load_si512(w.transposed_scores[i] + p * kTileRows);
      transpose_words(words);
#pragma GCC unroll 16
      for (int j = 0; j < kTileRows; ++j)
        _mm512_store_si512(w.scores + j * kTilePositions + (first_block + i) * kLanes, words[j]);
    }
  }
}

// The row block's softmax step (softmax_rows), and its accumulators rescaled where the running
// max moved.
template <int kVectors>
void softmax_row_block(Workspace<kVectors>& w, int64_t row, int64_t tile, const int64_t* n_ctx, int64_t tile_first,
                       int64_t n_queries, float scale, float softcap) {
  constexpr int64_t head_dim = Workspace<kVectors>::head_dim;
  __mmask16 moved = softmax_rows<kVectors>(w, row, tile, n_ctx, tile_first, n_queries, scale, softcap);
  // x·1 == x: the rows whose factor is 1 are left as they are, which changes no bit.
  for (; moved != 0; moved = static_cast<__mmask16>(moved & (moved - 1))) {
    const int64_t j = row + __builtin_ctz(moved);
    const __m512 rescale = _mm512_set1_ps(w.correction[j]);
    float* acc = w.accumulators + j * head_dim;
#pragma GCC unroll 16
    for (int v = 0; v < kVectors; ++v)
      _mm512_store_ps(acc + 16 * v, _mm512_mul_ps(_mm512_load_ps(acc + 16 * v), rescale));
  }
}

// accumulators[j] += Σ_p weight[j][p]·v_p for the row block's 16 queries, 32 positions a
// product: four vectors of the head at a time, each half of the weights loaded once for the four.
template <int kVectors>
void weigh_values_row_block(Workspace<kVectors>& w, int64_t row, int64_t n_halves) {
  constexpr int64_t head_dim = Workspace<kVectors>::head_dim;
  for (int first_vector = 0; first_vector < kVectors; first_vector += kAccumulators) {
    const int64_t count = std::min<int64_t>(kAccumulators, kVectors - first_vector);
    float* acc = w.accumulators + row * head_dim + 16 * first_vector;
    constexpr size_t kAccStride = head_dim * sizeof(float);
    TANDEM_FOR_ACCUMULATORS(
        count, _tile_loadd(TANDEM_ACC_0, acc, kAccStride), _tile_loadd(TANDEM_ACC_1, acc + 16, kAccStride),
        _tile_loadd(TANDEM_ACC_2, acc + 32, kAccStride), _tile_loadd(TANDEM_ACC_3, acc + 48, kAccStride));
    for (int64_t h = 0; h < n_halves; ++h) {
      _tile_loadd(TANDEM_OPERAND_A, w.weight_halves + row * kTilePositions + h * kHalfTile,
                  kTilePositions * sizeof(uint16_t));
      const uint16_t* pairs = w.value_pairs + (h * kLanes * kVectors + first_vector) * kChunkHalves;
      constexpr size_t kPairStride = kVectors * kChunkHalves * sizeof(uint16_t);
      TANDEM_FOR_ACCUMULATORS(count, TANDEM_PRODUCT(TANDEM_ACC_0, TANDEM_OPERAND_B, pairs, kPairStride),
                              TANDEM_PRODUCT(TANDEM_ACC_1, TANDEM_OPERAND_B2, pairs + kChunkHalves, kPairStride),
                              TANDEM_PRODUCT(TANDEM_ACC_2, TANDEM_OPERAND_B, pairs + 2 * kChunkHalves, kPairStride),
                              TANDEM_PRODUCT(TANDEM_ACC_3, TANDEM_OPERAND_B2, pairs + 3 * kChunkHalves, kPairStride));
    }
    TANDEM_FOR_ACCUMULATORS(
        count, _tile_stored(TANDEM_ACC_0, acc, kAccStride), _tile_stored(TANDEM_ACC_1, acc + 16, kAccStride),
        _tile_stored(TANDEM_ACC_2, acc + 32, kAccStride), _tile_stored(TANDEM_ACC_3, acc + 48, kAccStride));
  }
}

template <int kVectors>
void attend_queries_amx(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                        const int32_t* slots) {
  ensure_attention_tiles_configured();
  thread_local std::unique_ptr<Workspace<kVectors>> workspace;
  if (workspace == nullptr) workspace = std::make_unique<Workspace<kVectors>>();
  Workspace<kVectors>& w = *workspace;
  constexpr int64_t head_dim = Workspace<kVectors>::head_dim;
  constexpr int64_t head_halves = Workspace<kVectors>::head_halves;
  const int64_t n_queries = set.n_queries;
  const int64_t* n_ctx = set.n_ctx;
  const int64_t n_rows = (n_queries + kTileRows - 1) / kTileRows * kTileRows;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));

  for (int64_t j = 0; j < n_rows; ++j) {
    if (j < n_queries)
      head_to_bf16<kVectors>(set.queries[j], w.query_halves + j * head_halves);
    else
      std::fill_n(w.query_halves + j * head_halves, head_halves, uint16_t{0});
    std::fill_n(w.accumulators + j * head_dim, head_dim, 0.0f);
    w.running_max[j] = -INFINITY;
    w.running_sum[j] = 0.0f;
  }

  // One row block (decode, or a short run of tokens): the queries as B tiles, so that the K
  // rows need no transpose (score_decode_blocks).
  const bool one_row_block = n_rows == kTileRows;
  if (one_row_block)
    for (int64_t c = 0; c < kChunks<kVectors>; ++c) {
      __m512i words[16];
#pragma GCC unroll 16
      for (int j = 0; j < kTileRows; ++j)
        words[j] = _mm512_load_si512(w.query_halves + j * head_halves + kChunkHalves * c);
      transpose_words(words);
#pragma GCC unroll 16
      for (int r = 0; r < kTileRows; ++r) _mm512_store_si512(w.query_tiles[c] + r * 16, words[r]);
    }

  int64_t rows[kTilePositions];  // the tile's positions -> their slots
  const int64_t longest = n_ctx[n_queries - 1];
  // Few queries (decode): the next tile's K/V rows are fetched while this one is computed
  // (kernels/kv_prefetch.h), as the AVX-512 kernels do.
  const bool prefetch = n_queries < kPrefetchBelowQueries;
  const int64_t key_offset_bytes = kv_row_offset_bytes(keys.type, kv_offset);
  const int64_t value_offset_bytes = kv_row_offset_bytes(values.type, kv_offset);
  const int64_t key_head_bytes = dtype_row_bytes(keys.type, head_dim);
  const int64_t value_head_bytes = dtype_row_bytes(values.type, head_dim);
  if (prefetch) {
    prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, 0, std::min(longest, kTilePositions));
    prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, 0, std::min(longest, kTilePositions));
  }
  int64_t tile_first = 0;  // the first query that sees the tile; the ones after it do too
  for (int64_t tile = 0; tile < longest; tile += kTilePositions) {
    while (n_ctx[tile_first] <= tile) ++tile_first;
    if (prefetch && tile + kTilePositions < longest) {
      const int64_t next_end = std::min(longest, tile + 2 * kTilePositions);
      prefetch_head_rows(keys, key_offset_bytes, key_head_bytes, slots, tile + kTilePositions, next_end);
      prefetch_head_rows(values, value_offset_bytes, value_head_bytes, slots, tile + kTilePositions, next_end);
    }
    const int64_t first_row = tile_first / kTileRows * kTileRows;
    const int64_t tile_len = std::min(kTilePositions, longest - tile);
    const int64_t n_blocks = (tile_len + kLanes - 1) / kLanes;
    const int64_t n_halves = (tile_len + kHalfTile - 1) / kHalfTile;
    // Positions past the context read the last visible row (finite); their weights are 0.
    for (int64_t p = 0; p < tile_len; ++p) rows[p] = slots[tile + p];
    for (int64_t p = tile_len; p < kTilePositions; ++p) rows[p] = rows[tile_len - 1];

    if (one_row_block) {
      if (keys.type == DType::F16)
        key_rows_of<kVectors, true>(w, keys, kv_offset, rows, n_blocks);
      else
        key_rows_of<kVectors, false>(w, keys, kv_offset, rows, n_blocks);
      score_decode_blocks<kVectors>(w, n_blocks);
    } else {
      if (keys.type == DType::F16)
        key_tiles_of<kVectors, true>(w, keys, kv_offset, rows, n_blocks);
      else
        key_tiles_of<kVectors, false>(w, keys, kv_offset, rows, n_blocks);
      // In phases over the row blocks that hold a query seeing the tile: all scores, all softmax
      // steps, then all weighted values. (Issuing the next block's score products before this
      // block's softmax, to overlap tile and vector units, measured 4-10 % slower.)
      for (int64_t row = first_row; row < n_rows; row += kTileRows) score_row_block<kVectors>(w, row, n_blocks);
    }
    for (int64_t row = first_row; row < n_rows; row += kTileRows)
      softmax_row_block<kVectors>(w, row, tile, n_ctx, tile_first, n_queries, scale, set.softcap);
    if (values.type == DType::F16)
      value_pairs_of<kVectors, true>(w, values, kv_offset, rows, n_halves * 2);
    else
      value_pairs_of<kVectors, false>(w, values, kv_offset, rows, n_halves * 2);
    for (int64_t row = first_row; row < n_rows; row += kTileRows) weigh_values_row_block<kVectors>(w, row, n_halves);
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
  attention_tokens_with<kMaxCallQueries>(amx_kernel, queries, query_stride, n_tokens, group, positions, keys, values,
                                         kv_offset, slots, head_dim, scratch, out, out_stride, softcap, sinks,
                                         partials);
}

}  // namespace tandem::amx

#undef TANDEM_ACC_0
#undef TANDEM_ACC_1
#undef TANDEM_ACC_2
#undef TANDEM_ACC_3
#undef TANDEM_OPERAND_A
#undef TANDEM_OPERAND_A2
#undef TANDEM_OPERAND_B
#undef TANDEM_OPERAND_B2
#undef TANDEM_FOR_ACCUMULATORS
#undef TANDEM_PRODUCT
#undef TANDEM_ROWS_PRODUCT

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
