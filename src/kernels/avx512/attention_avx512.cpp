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

#include "kernels/attention_tile_walk.h"     // after the AVX-512 parts: instantiated with them
#include "kernels/avx512/attention_parts.h"  // AVX-512 code: after the target pragma
#include "kernels/avx512/vector_exp.h"

namespace tandem::avx512 {
namespace {

using namespace attention_parts;  // NOLINT(google-build-using-namespace): this file is their user

// acc[g] += Σ_p weights[g·kAttentionTile + p]·(value row at rows[p]) over one block's first
// n_positions (a multiple of kChains), for kQueries queries: per query the first chain
// starts from acc, the others from 0, and the chains are summed at the end in a fixed order.
template <int kVectors, int kQueries, typename Element>
[[gnu::always_inline]] inline void add_weighted_values(const float* weights, const Element* values, const int64_t* rows,
                                                       int64_t n_positions, __m512 (&acc)[kQueries][kVectors]) {
  constexpr int chains = attention_walk::kChains<kVectors>;
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

// The AVX-512 vectors of the shared tile walk (kernels/attention_tile_walk.h).
struct F32Vectors {
  using Vec = __m512;
  using QuerySet = attention_parts::QuerySet;
  static constexpr int kLanes = attention_parts::kLanes;
  static constexpr int64_t kMaxQueries = attention_parts::kMaxQueries;
  static constexpr int64_t kPrefetchBlocks = attention_parts::kPrefetchBlocks;
  template <int kVectors>
  static constexpr int kPack = kQueriesPerLoad<kVectors>;

  [[gnu::always_inline]] static Vec set1(float x) { return _mm512_set1_ps(x); }
  [[gnu::always_inline]] static Vec zero() { return _mm512_setzero_ps(); }
  [[gnu::always_inline]] static Vec load(const float* p) { return _mm512_load_ps(p); }
  [[gnu::always_inline]] static Vec loadu(const float* p) { return _mm512_loadu_ps(p); }
  [[gnu::always_inline]] static void store(float* p, Vec x) { _mm512_store_ps(p, x); }
  [[gnu::always_inline]] static void storeu(float* p, Vec x) { _mm512_storeu_ps(p, x); }
  [[gnu::always_inline]] static Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  [[gnu::always_inline]] static Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  [[gnu::always_inline]] static Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  [[gnu::always_inline]] static Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  [[gnu::always_inline]] static Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  [[gnu::always_inline]] static float reduce_max(Vec x) { return _mm512_reduce_max_ps(x); }
  [[gnu::always_inline]] static float reduce_add(Vec x) { return _mm512_reduce_add_ps(x); }
  [[gnu::always_inline]] static float lane0(Vec x) { return _mm512_cvtss_f32(x); }
  [[gnu::always_inline]] static Vec masked_scores(Vec fill, Vec scores, int64_t n_visible) {
    return _mm512_mask_mov_ps(fill, first_lanes(n_visible), scores);
  }
  [[gnu::always_inline]] static Vec exp_nonpositive(Vec x) { return avx512::exp_nonpositive(x); }
  [[gnu::always_inline]] static void softcap_row(const float* x, int64_t n, float cap, float* out) {
    avx512::softcap_row(x, n, cap, out);
  }
  template <int kVectors, int kQueries, typename Element>
  [[gnu::always_inline]] static void score_block(const float* const* queries, const Element* keys, const int64_t* rows,
                                                 Vec (&scores)[kQueries]) {
    attention_parts::score_block<kVectors, kQueries>(queries, keys, rows, scores);
  }
  // outs[g] = outs[g]·rescale[g] (when rescale is given) + the block's weighted values.
  template <int kVectors, int kQueries, typename Element>
  [[gnu::always_inline]] static void add_weighted_values(const float* weights, const Element* values,
                                                         const int64_t* rows, int64_t n_positions, float* const* outs,
                                                         const float* rescale) {
    Vec acc[kQueries][kVectors];
    for (int i = 0; i < kQueries; ++i) {
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) {
        acc[i][v] = _mm512_loadu_ps(outs[i] + 16 * v);
        if (rescale != nullptr) acc[i][v] = _mm512_mul_ps(acc[i][v], _mm512_set1_ps(rescale[i]));
      }
    }
    avx512::add_weighted_values<kVectors, kQueries>(weights, values, rows, n_positions, acc);
    for (int i = 0; i < kQueries; ++i)
#pragma GCC unroll 16
      for (int v = 0; v < kVectors; ++v) _mm512_storeu_ps(outs[i] + 16 * v, acc[i][v]);
  }
  template <bool kF16>
  [[gnu::always_inline]] static auto block_base(const KvRows& rows, int64_t kv_offset, const int64_t* block_slots,
                                                int64_t block_len, int64_t head_dim, float* block,
                                                int64_t (&out)[kLanes]) {
    return attention_parts::block_base<kF16>(rows, kv_offset, block_slots, block_len, head_dim, block, out);
  }
  template <int kPackSize, typename Visit>
  [[gnu::always_inline]] static void for_each_query_pack(int64_t begin, int64_t end, Visit&& visit) {
    attention_parts::for_each_query_pack<kPackSize>(begin, end, std::forward<Visit>(visit));
  }
};

template <int kVectors, bool kF16>
void attend_queries(const QuerySet& set, const KvRows& keys, const KvRows& values, int64_t kv_offset,
                    const int32_t* slots) {
  attention_walk::attend_queries<F32Vectors, kVectors, kF16>(set, keys, values, kv_offset, slots);
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
