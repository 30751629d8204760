// AVX-512 attention_group (same algorithm as kernels/attention.cpp: key tiles of
// kAttentionTile positions from position 0, online softmax). Head sizes that are a multiple
// of 16 run here; others use the portable kernel. A query's operations do not depend on the
// other queries of its group or batch, so prefill and decode agree bit for bit.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/kernel_table.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

namespace tandem::avx512 {
namespace {
constexpr int64_t kMaxGroup = 64;
constexpr int64_t kMaxHeadVectors = 16;  // head_dim <= 256
}  // namespace

void attention_group(const float* queries, int64_t n_queries, const float* keys, const float* values,
                     int64_t kv_width, int64_t kv_offset, const int32_t* slots, int64_t n_ctx, int64_t head_dim,
                     float* scratch, float* out) {
  if (head_dim % 16 != 0 || head_dim / 16 > kMaxHeadVectors || n_queries > kMaxGroup) {
    portable::attention_group(queries, n_queries, keys, values, kv_width, kv_offset, slots, n_ctx, head_dim, scratch,
                              out);
    return;
  }
  const int64_t vectors = head_dim / 16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  float running_max[kMaxGroup];
  double running_sum[kMaxGroup];
  for (int64_t g = 0; g < n_queries; ++g) {
    running_max[g] = -INFINITY;
    running_sum[g] = 0.0;
    std::fill_n(out + g * head_dim, head_dim, 0.0f);
  }
  for (int64_t tile = 0; tile < n_ctx; tile += kAttentionTile) {
    const int64_t tile_len = std::min(kAttentionTile, n_ctx - tile);
    for (int64_t p = 0; p < tile_len; ++p) {
      const float* k = keys + static_cast<int64_t>(slots[tile + p]) * kv_width + kv_offset;
      if (p + 1 < tile_len)
        _mm_prefetch(reinterpret_cast<const char*>(keys + static_cast<int64_t>(slots[tile + p + 1]) * kv_width + kv_offset),
                     _MM_HINT_T0);
      for (int64_t g = 0; g < n_queries; ++g) {
        const float* q = queries + g * head_dim;
        __m512 acc = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(k));
        for (int64_t v = 1; v < vectors; ++v) acc = _mm512_fmadd_ps(_mm512_loadu_ps(q + 16 * v), _mm512_loadu_ps(k + 16 * v), acc);
        scratch[g * kAttentionTile + p] = _mm512_reduce_add_ps(acc) * scale;
      }
    }
    for (int64_t g = 0; g < n_queries; ++g) {
      float* scores = scratch + g * kAttentionTile;
      const float correction = online_softmax_tile(scores, tile_len, running_max[g], running_sum[g]);
      // Rescale the accumulator and add this tile's values in position order, in registers.
      float* acc_out = out + g * head_dim;
      __m512 acc[kMaxHeadVectors];
      const __m512 rescale = _mm512_set1_ps(correction);
      for (int64_t v = 0; v < vectors; ++v) acc[v] = _mm512_mul_ps(_mm512_loadu_ps(acc_out + 16 * v), rescale);
      for (int64_t p = 0; p < tile_len; ++p) {
        const float* value = values + static_cast<int64_t>(slots[tile + p]) * kv_width + kv_offset;
        const __m512 weight = _mm512_set1_ps(scores[p]);
        for (int64_t v = 0; v < vectors; ++v) acc[v] = _mm512_fmadd_ps(weight, _mm512_loadu_ps(value + 16 * v), acc[v]);
      }
      for (int64_t v = 0; v < vectors; ++v) _mm512_storeu_ps(acc_out + 16 * v, acc[v]);
    }
  }
  for (int64_t g = 0; g < n_queries; ++g) {
    const __m512 inverse = _mm512_set1_ps(static_cast<float>(1.0 / running_sum[g]));
    float* acc_out = out + g * head_dim;
    for (int64_t v = 0; v < vectors; ++v) _mm512_storeu_ps(acc_out + 16 * v, _mm512_mul_ps(_mm512_loadu_ps(acc_out + 16 * v), inverse));
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
