// The parts the AVX-512 attention kernels share (attention_avx512.cpp: f32 arithmetic;
// attention_bf16_avx512.cpp: bf16 dot products): the lane-sum tree of the scores, a block's
// K/V rows, the decode prefetch, the set of queries of one call, and the two entry points
// that gather a GQA group or a run of tokens into such sets. Include it only from code
// compiled for AVX-512 (inside an avx512/ kernel file's target pragma): the functions are
// inline and use AVX-512 intrinsics.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/avx512/avx512_kernels.h"
#include "kernels/avx512/first_lanes.h"
#include "kernels/kv_prefetch.h"
#include "kernels/portable_kernels.h"
#include "kernels/simd_intrinsics.h"

namespace tandem::avx512::attention_parts {

constexpr int64_t kMaxGroup = 64;     // query heads per KV head
constexpr int64_t kMaxQueries = 128;  // queries in one pass over the tiles (tokens x group)
constexpr int kMaxHeadVectors = 16;   // head_dim <= 256
constexpr int kLanes = 16;            // positions per score vector
static_assert(kAttentionTile % kLanes == 0);

// The lane-sum tree: 16 dot vectors become one vector whose lane p is the sum of the 16
// lanes of dots[p], by a fixed tree of pairwise adds (16 -> 8 -> 4 -> 2 -> 1 vectors, every
// lane of every add useful) instead of 16 horizontal reductions. It runs in two stages so
// that only 4 positions' dots need be live at once: quad_sums folds dots[4i..4i+3] into
// quads[i] (per 128-bit block j, lane k = block j's sum of dots[4i+k]), then combine_quads
// folds the 4 quads.
[[gnu::always_inline]] inline __m512 quad_sums(const __m512 (&dots)[4]) {
  // Per 128-bit block: [a0+a2, b0+b2, a1+a3, b1+b3] for the pairs (a, b) = dots (0, 1), (2, 3).
  const __m512d pair_low =
      _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(dots[0], dots[1]), _mm512_unpackhi_ps(dots[0], dots[1])));
  const __m512d pair_high =
      _mm512_castps_pd(_mm512_add_ps(_mm512_unpacklo_ps(dots[2], dots[3]), _mm512_unpackhi_ps(dots[2], dots[3])));
  return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(pair_low, pair_high)),
                       _mm512_castpd_ps(_mm512_unpackhi_pd(pair_low, pair_high)));
}

[[gnu::always_inline]] inline __m512 combine_quads(const __m512 (&quads)[4]) {
  __m512 halves[2];  // blocks: [quad 2i from blocks 0+1, from 2+3, quad 2i+1 from 0+1, from 2+3]
  for (int i = 0; i < 2; ++i)
    halves[i] = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2 * i], quads[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                              _mm512_shuffle_f32x4(quads[2 * i], quads[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(halves[0], halves[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(halves[0], halves[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// visit.template operator()<k>(j) for the queries j..j+k-1 of [begin, end): kPack at a time,
// then one by one.
template <int kPack, typename Visit>
[[gnu::always_inline]] inline void for_each_query_pack(int64_t begin, int64_t end, Visit&& visit) {
  int64_t j = begin;
  for (; j + kPack <= end; j += kPack) visit.template operator()<kPack>(j);
  for (; j < end; ++j) visit.template operator()<1>(j);
}

// Loads, not FMAs, bound the kernels' loops, so kQueries (1 or 2) adjacent queries share each K/V
// vector loaded; their query vectors and accumulators must then fit in registers together.
template <int kVectors>
constexpr int kQueriesPerLoad = kVectors <= 8 ? 2 : 1;

// 16 K/V elements as floats: F32 rows as they are, F16 rows (uint16_t) widened in the
// register as they are loaded (exact: the same floats convert_kv_rows gives).
[[gnu::always_inline]] inline __m512 load_vector(const float* p) { return _mm512_loadu_ps(p); }
[[gnu::always_inline]] inline __m512 load_vector(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// A loaded vector that two FMAs share: the empty asm makes the compiler keep it in a register
// instead of folding the load into each FMA, which would load it twice.
template <typename Element>
[[gnu::always_inline]] inline __m512 load_once(const Element* p) {
  __m512 x = load_vector(p);
  __asm__("" : "+v"(x));
  return x;
}

// scores[g] lane p = queries[g] · (key row at rows[p]) for 16 positions: each dot a chain of
// FMAs over the head's vectors in order, then the lane-sum tree.
template <int kVectors, int kQueries, typename Element>
[[gnu::always_inline]] inline void score_block(const float* const* queries, const Element* keys, const int64_t* rows,
                                               __m512 (&scores)[kQueries]) {
  __m512 quads[kQueries][4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    __m512 dots[kQueries][4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const Element* key = keys + rows[4 * i + p];
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) {
        const __m512 k = kQueries > 1 ? load_once(key + 16 * v) : load_vector(key + 16 * v);
#pragma GCC unroll 2
        for (int g = 0; g < kQueries; ++g) {
          const __m512 q = _mm512_loadu_ps(queries[g] + 16 * v);
          dots[g][p] = v == 0 ? _mm512_mul_ps(q, k) : _mm512_fmadd_ps(q, k, dots[g][p]);
        }
      }
    }
#pragma GCC unroll 2
    for (int g = 0; g < kQueries; ++g) quads[g][i] = quad_sums(dots[g]);
  }
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g) scores[g] = combine_quads(quads[g]);
}

// A block's K (or V) rows as the kernels read them: float offsets (out[p], p < kLanes) from
// the returned base, for the slots block_slots[0..kLanes) (past block_len they repeat its last
// slot). F32 rows are read in place; other types are converted into `block` (block_len rows
// of head_dim floats), and the lanes past block_len repeat its last row.
[[gnu::always_inline]] inline const float* rows_of_block(const KvRows& rows, int64_t kv_offset,
                                                         const int64_t* block_slots, int64_t block_len,
                                                         int64_t head_dim, float* block, int64_t (&out)[kLanes]) {
  if (rows.type == DType::F32) {
    const int64_t row_floats = rows.row_bytes / static_cast<int64_t>(sizeof(float));
    for (int p = 0; p < kLanes; ++p) out[p] = block_slots[p] * row_floats;
    return reinterpret_cast<const float*>(rows.data) + kv_offset;
  }
  int64_t row_offsets[kLanes];
  for (int64_t p = 0; p < block_len; ++p) row_offsets[p] = block_slots[p] * rows.row_bytes;
  avx512::convert_kv_rows(rows, row_offsets, block_len, kv_offset, head_dim, block);
  for (int p = 0; p < kLanes; ++p) out[p] = std::min<int64_t>(p, block_len - 1) * head_dim;
  return block;
}

// 16 bf16 values to floats: exact, the bits shifted into the high half.
[[gnu::always_inline]] inline __m512 bf16_to_floats(__m256i x) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(x), 16));
}

// rows_of_block for the kernel that reads F16 K and V in place (kF16): element offsets from
// the rows' base, widened to floats as they are loaded; otherwise rows_of_block.
template <bool kF16>
[[gnu::always_inline]] inline const std::conditional_t<kF16, uint16_t, float>* block_base(
    const KvRows& rows, int64_t kv_offset, const int64_t* block_slots, int64_t block_len, int64_t head_dim,
    float* block, int64_t (&out)[kLanes]) {
  if constexpr (kF16) {
    const int64_t row_halves = rows.row_bytes / static_cast<int64_t>(sizeof(uint16_t));
    for (int p = 0; p < kLanes; ++p) out[p] = block_slots[p] * row_halves;
    return reinterpret_cast<const uint16_t*>(rows.data) + kv_offset;
  } else {
    return rows_of_block(rows, kv_offset, block_slots, block_len, head_dim, block, out);
  }
}

// From this many queries in a call (a prefill block's tokens x group) a converted block is
// shared by enough queries that converting it once beats widening every load.
constexpr int64_t kConvertBlocksFrom = 8;

// Decode prefetches its K/V rows kPrefetchBlocks blocks of 16 positions ahead
// (kernels/kv_prefetch.h).
constexpr int64_t kPrefetchBlocks = 2;

// The queries of one call: query j reads queries[j], writes outs[j] and sees positions
// 0..n_ctx[j]-1, n_ctx ascending (not strictly). A GQA group is n queries with one n_ctx; a
// run of tokens of one sequence is its tokens' groups in order, their n_ctx its positions + 1.
struct QuerySet {
  const float* const* queries;  // [n_queries] -> [head_dim]
  float* const* outs;           // [n_queries] -> [head_dim]
  const int64_t* n_ctx;         // [n_queries]
  int64_t n_queries;            // 1..kMaxQueries (the AMX kernel: 1..amx::kMaxQueries)
  float softcap = 0.0f;         // > 0: scores soft-capped (softcap_score) before the softmax
  // Null, or query j's sink logit is sinks[j % sink_period] (sink_normaliser; a run of tokens
  // repeats its group's heads).
  const float* sinks = nullptr;
  int64_t sink_period = 1;
  // Null, or the outputs stay accumulators and partials[j] gets query j's max and sum
  // (kernels/attention.h, AttentionPartial; sinks are then the caller's).
  AttentionPartial* partials = nullptr;
};

// One call's kernel: the queries of `set` against one KV head's rows.
using QueriesKernel = void (*)(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                               const int32_t* slots);

// Head sizes the vector kernels take: 16..256 in steps of 16.
inline bool vector_kernel_fits(int64_t head_dim) {
  return head_dim % 16 == 0 && head_dim >= 16 && head_dim / 16 <= kMaxHeadVectors;
}

// attention_group (kernel_contract.h's AttentionFn) through pick(keys, values, head_dim,
// n_queries), a level's QueriesKernel; the portable kernel for shapes the vector ones do not take.
template <typename PickKernel>
void attention_group_with(PickKernel pick, const float* queries, int64_t n_queries, const KvRows& keys,
                          const KvRows& values, int64_t kv_offset, const int32_t* slots, int64_t n_ctx,
                          int64_t head_dim, float* scratch, float* out, float softcap, const float* sinks,
                          AttentionPartial* partials) {
  if (!vector_kernel_fits(head_dim) || n_queries > kMaxGroup) {
    portable::attention_group(queries, n_queries, keys, values, kv_offset, slots, n_ctx, head_dim, scratch, out,
                              softcap, sinks, partials);
    return;
  }
  const float* query_of[kMaxGroup];
  float* out_of[kMaxGroup];
  int64_t n_ctx_of[kMaxGroup];
  for (int64_t g = 0; g < n_queries; ++g) {
    query_of[g] = queries + g * head_dim;
    out_of[g] = out + g * head_dim;
    n_ctx_of[g] = n_ctx;
  }
  pick(keys, values, head_dim, n_queries)(
      QuerySet{query_of, out_of, n_ctx_of, n_queries, softcap, sinks, n_queries, partials}, keys, values, kv_offset,
      slots);
}

// attention_tokens (kernel_contract.h's AttentionTokensFn) the same way: the tokens' groups in
// calls of up to kCallQueries queries (the kernel's own bound: the AMX kernel takes more, so
// that each K/V row it converts serves more queries).
template <int64_t kCallQueries = kMaxQueries, typename PickKernel>
void attention_tokens_with(PickKernel pick, const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
                           const int32_t* positions, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                           const int32_t* slots, int64_t head_dim, float* scratch, float* out, int64_t out_stride,
                           float softcap, const float* sinks, AttentionPartial* partials) {
  if (!vector_kernel_fits(head_dim) || group > kMaxGroup) {
    for (int64_t t = 0; t < n_tokens; ++t)
      portable::attention_group(queries + t * query_stride, group, keys, values, kv_offset, slots,
                                int64_t{positions[t]} + 1, head_dim, scratch, out + t * out_stride, softcap, sinks,
                                partials != nullptr ? partials + t * group : nullptr);
    return;
  }
  static_assert(kCallQueries >= kMaxGroup);
  const int64_t tokens_per_call = kCallQueries / group;
  const float* query_of[kCallQueries];
  float* out_of[kCallQueries];
  int64_t n_ctx_of[kCallQueries];
  for (int64_t first = 0; first < n_tokens; first += tokens_per_call) {
    const int64_t n_call = std::min(tokens_per_call, n_tokens - first);
    for (int64_t t = 0; t < n_call; ++t) {
      TANDEM_ASSERT(t == 0 || positions[first + t] >= positions[first + t - 1]);
      for (int64_t g = 0; g < group; ++g) {
        query_of[t * group + g] = queries + (first + t) * query_stride + g * head_dim;
        out_of[t * group + g] = out + (first + t) * out_stride + g * head_dim;
        n_ctx_of[t * group + g] = int64_t{positions[first + t]} + 1;
      }
    }
    pick(keys, values, head_dim, n_call * group)(
        QuerySet{query_of, out_of, n_ctx_of, n_call * group, softcap, sinks, group,
                 partials != nullptr ? partials + first * group : nullptr},
        keys, values, kv_offset, slots);
  }
}

}  // namespace tandem::avx512::attention_parts
