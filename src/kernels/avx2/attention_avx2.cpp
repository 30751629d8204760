// AVX2 attention_group and attention_tokens: kernels/attention.cpp's algorithm (key tiles of
// kAttentionTile positions from 0, online softmax) 8 positions per vector, as the AVX-512
// kernel (avx512/attention_avx512.cpp) does it 16 at a time — scores by a fixed lane-sum tree,
// a polynomial exp, running sums in float lanes. Head sizes 8..256 in steps of 8 run here; the
// others go to the portable kernel. A query's arithmetic is the same whichever queries share
// its call (they only share loads), so its bits depend on itself, head_dim, n_ctx and the
// cached K/V alone: prefill == decode. With 16 vector registers, the weighted values are added
// a chunk of the head's columns at a time, which changes no element's arithmetic. K/V rows
// stored as F16, BF16, Q8_0 or Q4_0 are converted a block of 8 positions at a time into an L1
// scratch on the stack as the tile is visited (convert_kv_rows, kv_convert_avx2.cpp), so a
// query's bits are those of F32 rows holding the same values.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <utility>

#include "base/dtype.h"
#include "base/error.h"
#include "kernels/attention.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/kernel_contract.h"
#include "kernels/kv_prefetch.h"
#include "kernels/portable_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/attention_tile_walk.h"  // after the AVX2 parts: instantiated with them
#include "kernels/avx2/vector_exp.h"      // AVX2 code: after the target pragma

namespace tandem::avx2 {
namespace {

constexpr int64_t kMaxGroup = 64;     // query heads per KV head
constexpr int64_t kMaxQueries = 128;  // queries in one pass over the tiles (tokens x group)
constexpr int kMaxHeadVectors = 32;   // head_dim <= 256
constexpr int kLanes = 8;             // positions per score vector
constexpr int kPack = 2;              // queries sharing each K/V vector loaded
static_assert(kAttentionTile % kLanes == 0);
// Decode prefetches its K/V rows this many blocks of 8 positions ahead (kernels/kv_prefetch.h):
// the distance of the AVX-512 kernel's 2 blocks of 16.
constexpr int64_t kPrefetchBlocks = 4;

// The lane-sum tree: 8 dot vectors become one vector whose lane p is the sum of the 8 lanes of
// dots[p], by a fixed tree of pairwise adds (8 -> 4 -> 2 -> 1 vectors) instead of 8 horizontal
// reductions. quad_sums folds dots[4i..4i+3] into quads[i] (per 128-bit half h, lane k = half
// h's sum of dots[4i+k]); combine_quads adds the halves. Every lane's order of adds is fixed:
// ((x0+x2)+(x1+x3)) + ((x4+x6)+(x5+x7)).
[[gnu::always_inline]] inline __m256 quad_sums(__m256 d0, __m256 d1, __m256 d2, __m256 d3) {
  // Per 128-bit half: [a0+a2, b0+b2, a1+a3, b1+b3] for the pairs (a, b) = dots (0, 1), (2, 3).
  const __m256d pair_low = _mm256_castps_pd(_mm256_add_ps(_mm256_unpacklo_ps(d0, d1), _mm256_unpackhi_ps(d0, d1)));
  const __m256d pair_high = _mm256_castps_pd(_mm256_add_ps(_mm256_unpacklo_ps(d2, d3), _mm256_unpackhi_ps(d2, d3)));
  return _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(pair_low, pair_high)),
                       _mm256_castpd_ps(_mm256_unpackhi_pd(pair_low, pair_high)));
}

[[gnu::always_inline]] inline __m256 combine_quads(__m256 quad0, __m256 quad1) {
  return _mm256_add_ps(_mm256_permute2f128_ps(quad0, quad1, 0x20), _mm256_permute2f128_ps(quad0, quad1, 0x31));
}

// 8 elements as floats: F32 as they are, F16 K/V rows (uint16_t) widened in the register as
// they are loaded (exact: the same floats convert_kv_rows gives).
[[gnu::always_inline]] inline __m256 load_vector(const float* p) { return _mm256_loadu_ps(p); }
[[gnu::always_inline]] inline __m256 load_vector(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// A loaded vector that two FMAs share: the empty asm makes the compiler keep it in a register
// instead of folding the load into each FMA, which would load it twice.
template <typename Element>
[[gnu::always_inline]] inline __m256 load_once(const Element* p) {
  __m256 x = load_vector(p);
  __asm__ volatile("" : "+x"(x));
  return x;
}

// scores[g] lane p = queries[g] · (key row at rows[p]) for 8 positions: each dot a chain of
// FMAs over the head's vectors in order, then the lane-sum tree. One query takes the 8
// positions at once (8 chains, each query vector loaded once for them); two take 4 at a time
// (the same chains and tree, in two halves, within the 16 registers).
template <int kVectors, int kQueries, typename Element>
[[gnu::always_inline]] inline void score_block(const float* const* queries, const Element* keys, const int64_t* rows,
                                               __m256 (&scores)[kQueries]) {
  constexpr int positions = kQueries == 1 ? 8 : 4;  // per stage
  // The key rows are the same for every query of a block, so the compiler would hoist their
  // loads out of the loop over queries, into far more vectors than there are registers (spilled
  // to the stack); an opaque pointer keeps the loads here.
  __asm__ volatile("" : "+r"(keys));
  __m256 quads[kQueries][2];
#pragma GCC unroll 2
  for (int stage = 0; stage < 8 / positions; ++stage) {
    __m256 dots[kQueries][positions];
#pragma GCC unroll 32
    for (int v = 0; v < kVectors; ++v) {
      __m256 q[kQueries];
#pragma GCC unroll 2
      for (int g = 0; g < kQueries; ++g) q[g] = load_once(queries[g] + 8 * v);
#pragma GCC unroll 8
      for (int p = 0; p < positions; ++p) {
        const Element* key = keys + rows[stage * positions + p] + 8 * v;
        const __m256 k = kQueries > 1 ? load_once(key) : load_vector(key);
#pragma GCC unroll 2
        for (int g = 0; g < kQueries; ++g)
          dots[g][p] = v == 0 ? _mm256_mul_ps(q[g], k) : _mm256_fmadd_ps(q[g], k, dots[g][p]);
      }
    }
#pragma GCC unroll 2
    for (int g = 0; g < kQueries; ++g) {
      if constexpr (positions == 8) {
        quads[g][0] = quad_sums(dots[g][0], dots[g][1], dots[g][2], dots[g][3]);
        quads[g][1] = quad_sums(dots[g][4], dots[g][5], dots[g][6], dots[g][7]);
      } else {
        quads[g][stage] = quad_sums(dots[g][0], dots[g][1], dots[g][2], dots[g][3]);
      }
    }
  }
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g) scores[g] = combine_quads(quads[g][0], quads[g][1]);
}

using attention_walk::kChains;

// Head vectors whose accumulators kQueries queries keep in registers at once: 8 accumulators
// (enough FMAs in flight), leaving room for the weights and the loaded value vector.
template <int kVectors, int kQueries>
constexpr int kChunk = std::max(1, std::min(kVectors, 8 / (kQueries * kChains<kVectors>)));

// For the head's vectors kFirst..kFirst+kCount-1 of kQueries queries: out = out·rescale (when
// rescale is given) + Σ_p weights[g·kAttentionTile + p]·(value row at rows[p]) over the first
// n_positions of a block (a multiple of kChains). Per query the first chain starts from out,
// the others from 0, and the chains are summed at the end in a fixed order.
template <int kVectors, int kQueries, int kFirst, int kCount, typename Element>
[[gnu::always_inline]] inline void add_weighted_chunk(const float* weights, const Element* values, const int64_t* rows,
                                                      int64_t n_positions, float* const* outs, const float* rescale) {
  constexpr int chains = kChains<kVectors>;
  __m256 chain[kQueries][chains][kCount];
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g) {
    const __m256 factor = _mm256_set1_ps(rescale != nullptr ? rescale[g] : 1.0f);
#pragma GCC unroll 8
    for (int v = 0; v < kCount; ++v) {
      chain[g][0][v] = _mm256_loadu_ps(outs[g] + 8 * (kFirst + v));
      if (rescale != nullptr) chain[g][0][v] = _mm256_mul_ps(chain[g][0][v], factor);
#pragma GCC unroll 4
      for (int c = 1; c < chains; ++c) chain[g][c][v] = _mm256_setzero_ps();
    }
  }
  for (int64_t p = 0; p < n_positions; p += chains) {
#pragma GCC unroll 4
    for (int c = 0; c < chains; ++c) {
      const Element* value = values + rows[p + c] + 8 * kFirst;
      __m256 weight[kQueries];
#pragma GCC unroll 2
      for (int g = 0; g < kQueries; ++g) weight[g] = _mm256_broadcast_ss(weights + g * kAttentionTile + p + c);
#pragma GCC unroll 8
      for (int v = 0; v < kCount; ++v) {
        const __m256 x = kQueries > 1 ? load_once(value + 8 * v) : load_vector(value + 8 * v);
#pragma GCC unroll 2
        for (int g = 0; g < kQueries; ++g) chain[g][c][v] = _mm256_fmadd_ps(weight[g], x, chain[g][c][v]);
      }
    }
  }
#pragma GCC unroll 2
  for (int g = 0; g < kQueries; ++g)
#pragma GCC unroll 8
    for (int v = 0; v < kCount; ++v) {
      __m256 sum;
      if constexpr (chains == 4) {
        sum =
            _mm256_add_ps(_mm256_add_ps(chain[g][0][v], chain[g][1][v]), _mm256_add_ps(chain[g][2][v], chain[g][3][v]));
      } else if constexpr (chains == 2) {
        sum = _mm256_add_ps(chain[g][0][v], chain[g][1][v]);
      } else {
        sum = chain[g][0][v];
      }
      _mm256_storeu_ps(outs[g] + 8 * (kFirst + v), sum);
    }
}

// add_weighted_chunk over the whole head, kChunk vectors at a time from kFirst.
template <int kVectors, int kQueries, int kFirst = 0, typename Element>
[[gnu::always_inline]] inline void add_weighted_values(const float* weights, const Element* values, const int64_t* rows,
                                                       int64_t n_positions, float* const* outs, const float* rescale) {
  constexpr int count = std::min(kChunk<kVectors, kQueries>, kVectors - kFirst);
  add_weighted_chunk<kVectors, kQueries, kFirst, count>(weights, values, rows, n_positions, outs, rescale);
  if constexpr (kFirst + count < kVectors)
    add_weighted_values<kVectors, kQueries, kFirst + count>(weights, values, rows, n_positions, outs, rescale);
}

// visit.template operator()<k>(j) for the queries j..j+k-1 of [begin, end): kPack at a time,
// then one by one.
template <typename Visit>
[[gnu::always_inline]] inline void for_each_query_pack(int64_t begin, int64_t end, Visit&& visit) {
  int64_t j = begin;
  for (; j + kPack <= end; j += kPack) visit.template operator()<kPack>(j);
  for (; j < end; ++j) visit.template operator()<1>(j);
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
  avx2::convert_kv_rows(rows, row_offsets, block_len, kv_offset, head_dim, block);
  for (int p = 0; p < kLanes; ++p) out[p] = std::min<int64_t>(p, block_len - 1) * head_dim;
  return block;
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

// All-ones in a block's first n_visible (0..8) lanes.
[[gnu::always_inline]] inline __m256 first_lanes(int64_t n_visible) {
  return _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n_visible)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
}

[[gnu::always_inline]] inline float reduce_max(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// A fixed order: (halves added lane-wise, then lanes (0+2)+(1+3)).
[[gnu::always_inline]] inline float reduce_add(__m256 x) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The queries of one call: query j reads queries[j], writes outs[j] and sees positions
// 0..n_ctx[j]-1, n_ctx ascending (not strictly). A GQA group is n queries with one n_ctx; a
// run of tokens of one sequence is its tokens' groups in order, their n_ctx its positions + 1.
struct QuerySet {
  const float* const* queries;  // [n_queries] -> [head_dim]
  float* const* outs;           // [n_queries] -> [head_dim]
  const int64_t* n_ctx;         // [n_queries]
  int64_t n_queries;            // 1..kMaxQueries
  float softcap = 0.0f;         // > 0: scores soft-capped (softcap_score) before the softmax
  // Null, or query j's sink logit is sinks[j % sink_period] (sink_normaliser; a run of tokens
  // repeats its group's heads).
  const float* sinks = nullptr;
  int64_t sink_period = 1;
  // Null, or the outputs stay accumulators and partials[j] gets query j's max and sum
  // (kernels/attention.h, AttentionPartial; sinks are then the caller's).
  AttentionPartial* partials = nullptr;
};

// The AVX2 vectors of the shared tile walk (kernels/attention_tile_walk.h).
struct F32Vectors {
  using Vec = __m256;
  using QuerySet = avx2::QuerySet;
  static constexpr int kLanes = avx2::kLanes;
  static constexpr int64_t kMaxQueries = avx2::kMaxQueries;
  static constexpr int64_t kPrefetchBlocks = avx2::kPrefetchBlocks;
  template <int kVectors>
  static constexpr int kPack = avx2::kPack;

  [[gnu::always_inline]] static Vec set1(float x) { return _mm256_set1_ps(x); }
  [[gnu::always_inline]] static Vec zero() { return _mm256_setzero_ps(); }
  [[gnu::always_inline]] static Vec load(const float* p) { return _mm256_load_ps(p); }
  [[gnu::always_inline]] static Vec loadu(const float* p) { return _mm256_loadu_ps(p); }
  [[gnu::always_inline]] static void store(float* p, Vec x) { _mm256_store_ps(p, x); }
  [[gnu::always_inline]] static void storeu(float* p, Vec x) { _mm256_storeu_ps(p, x); }
  [[gnu::always_inline]] static Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  [[gnu::always_inline]] static Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  [[gnu::always_inline]] static Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  [[gnu::always_inline]] static Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  [[gnu::always_inline]] static Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  [[gnu::always_inline]] static float reduce_max(Vec x) { return avx2::reduce_max(x); }
  [[gnu::always_inline]] static float reduce_add(Vec x) { return avx2::reduce_add(x); }
  [[gnu::always_inline]] static float lane0(Vec x) { return _mm256_cvtss_f32(x); }
  [[gnu::always_inline]] static Vec masked_scores(Vec fill, Vec scores, int64_t n_visible) {
    return _mm256_blendv_ps(fill, scores, first_lanes(n_visible));
  }
  [[gnu::always_inline]] static Vec exp_nonpositive(Vec x) { return avx2::exp_nonpositive(x); }
  [[gnu::always_inline]] static void softcap_row(const float* x, int64_t n, float cap, float* out) {
    avx2::softcap_row(x, n, cap, out);
  }
  template <int kVectors, int kQueries, typename Element>
  [[gnu::always_inline]] static void score_block(const float* const* queries, const Element* keys, const int64_t* rows,
                                                 Vec (&scores)[kQueries]) {
    avx2::score_block<kVectors, kQueries>(queries, keys, rows, scores);
  }
  template <int kVectors, int kQueries, typename Element>
  [[gnu::always_inline]] static void add_weighted_values(const float* weights, const Element* values,
                                                         const int64_t* rows, int64_t n_positions, float* const* outs,
                                                         const float* rescale) {
    avx2::add_weighted_values<kVectors, kQueries>(weights, values, rows, n_positions, outs, rescale);
  }
  template <bool kF16>
  [[gnu::always_inline]] static auto block_base(const KvRows& rows, int64_t kv_offset, const int64_t* block_slots,
                                                int64_t block_len, int64_t head_dim, float* block,
                                                int64_t (&out)[kLanes]) {
    return avx2::block_base<kF16>(rows, kv_offset, block_slots, block_len, head_dim, block, out);
  }
  template <int kPackSize, typename Visit>
  [[gnu::always_inline]] static void for_each_query_pack(int64_t begin, int64_t end, Visit&& visit) {
    static_assert(kPackSize == avx2::kPack);
    avx2::for_each_query_pack(begin, end, std::forward<Visit>(visit));
  }
};

template <int kVectors, bool kF16>
void attend_queries(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots) {
  attention_walk::attend_queries<F32Vectors, kVectors, kF16>(set, keys, values, kv_offset, slots);
}

using QueriesKernel = void (*)(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                               const int32_t* slots);

template <bool kF16, size_t... kIndices>
constexpr std::array<QueriesKernel, sizeof...(kIndices)> queries_kernels(std::index_sequence<kIndices...>) {
  return {&attend_queries<static_cast<int>(kIndices) + 1, kF16>...};
}

// Indexed by head_dim / 8 - 1: any K/V types (F32 in place, the others converted a block at a
// time), and F16 K and V (the default) read in place, widened in the registers, as the AVX-512
// kernel does (a converted block used by one query costs more to convert than to attend over);
// a prefill block's many queries share each converted block instead (kConvertBlocksFrom).
constexpr std::array<QueriesKernel, kMaxHeadVectors> kQueriesKernels =
    queries_kernels<false>(std::make_index_sequence<kMaxHeadVectors>());
constexpr std::array<QueriesKernel, kMaxHeadVectors> kF16QueriesKernels =
    queries_kernels<true>(std::make_index_sequence<kMaxHeadVectors>());

// From this many queries in a call (a prefill block's tokens x group) a converted block is
// shared by enough queries that converting it once beats widening every load (as at AVX-512).
constexpr int64_t kConvertBlocksFrom = 8;

QueriesKernel queries_kernel(const KvRows& keys, const KvRows& values, int64_t head_dim, int64_t n_queries) {
  const bool f16 = keys.type == DType::F16 && values.type == DType::F16 && n_queries < kConvertBlocksFrom;
  return (f16 ? kF16QueriesKernels : kQueriesKernels)[static_cast<size_t>(head_dim / 8 - 1)];
}

bool vector_kernel_fits(int64_t head_dim) {
  return head_dim % 8 == 0 && head_dim >= 8 && head_dim / 8 <= kMaxHeadVectors;
}

}  // namespace

void attention_group(const float* queries, int64_t n_queries, const KvRows& keys, const KvRows& values,
                     int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim, float* scratch,
                     float* out, float softcap, const float* sinks, AttentionPartial* partials) {
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
  queries_kernel(keys, values, head_dim, n_queries)(
      QuerySet{query_of, out_of, n_ctx_of, n_queries, softcap, sinks, n_queries, partials}, keys, values, kv_offset,
      slots);
}

void attention_tokens(const float* queries, int64_t query_stride, int64_t n_tokens, int64_t group,
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
  const int64_t tokens_per_call = kMaxQueries / group;
  const float* query_of[kMaxQueries];
  float* out_of[kMaxQueries];
  int64_t n_ctx_of[kMaxQueries];
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
    queries_kernel(keys, values, head_dim, n_call * group)(
        QuerySet{query_of, out_of, n_ctx_of, n_call * group, softcap, sinks, group,
                 partials != nullptr ? partials + first * group : nullptr},
        keys, values, kv_offset, slots);
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
