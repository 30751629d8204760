// The bf16 row parts the bf16 attention kernels share (avx512/attention_bf16_avx512.cpp: vdpbf16ps;
// amx/attention_amx.cpp: AMX tiles): rounding floats to bf16, a head as rows of 32 bf16, and two
// rows interleaved position by position (the pair layout both instructions multiply). Include
// it only from code compiled for AVX-512 with AVX512_BF16 (after a kernel file's target pragma):
// the functions are inline and use its intrinsics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/avx512/attention_parts.h"
#include "kernels/avx512/vector_exp.h"
#include "kernels/simd_intrinsics.h"

namespace tandem::avx512::bf16_parts {

constexpr int kChunkHalves = 32;  // bf16 elements in one vector (a 64-byte tile row)

// A head of 16·kVectors floats as bf16 chunks of 32 elements, the last one zero-padded when
// kVectors is odd (zeros add exact zeros to the dot products).
template <int kVectors>
constexpr int kChunks = (kVectors + 1) / 2;

// 32 bf16 (round to nearest even): low's 16 floats, then high's.
[[gnu::always_inline]] inline __m512i to_bf16(__m512 low, __m512 high) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(high, low));
}

// One head's floats (F32, or F16 widened as loaded: the same floats) as kChunks<kVectors>
// chunks of 32 bf16 at out (aligned).
template <int kVectors, typename Element>
[[gnu::always_inline]] inline void head_to_bf16(const Element* head, uint16_t* out) {
#pragma GCC unroll 8
  for (int c = 0; c < kChunks<kVectors>; ++c) {
    const __m512 low = attention_parts::load_vector(head + 32 * c);
    const __m512 high = 2 * c + 1 < kVectors ? attention_parts::load_vector(head + 32 * c + 16) : _mm512_setzero_ps();
    _mm512_store_si512(out + kChunkHalves * c, to_bf16(low, high));
  }
}

// Interleaves two rows' 16 bf16 (words 0..15 and 16..31 of the input) position by position:
// word 2i is the first row's element i, word 2i+1 the second's.
[[gnu::always_inline]] inline __m512i interleave_rows(__m512i two_rows) {
  alignas(64) static constexpr uint16_t kOrder[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_permutexvar_epi16(_mm512_load_si512(kOrder), two_rows);
}

// One query's online-softmax step over a tile's scores (query_blocks blocks of 16, the masked
// ones -inf): the weights exp(score - new max) rounded to bf16 into weights, running_max moved
// to the new max. Returns the factor earlier accumulators are rescaled by (every lane) and the
// per-lane sum of the rounded weights, so numerator and denominator use the same weights.
struct Bf16TileWeights {
  __m512 rescale;
  __m512 sum;
};
[[gnu::always_inline]] inline Bf16TileWeights bf16_tile_weights(const float* tile_scores, int64_t query_blocks,
                                                                float& running_max, uint16_t* weights) {
  __m512 tile_max = _mm512_set1_ps(-INFINITY);
  for (int64_t b = 0; b < query_blocks; ++b)
    tile_max = _mm512_max_ps(tile_max, _mm512_load_ps(tile_scores + b * attention_parts::kLanes));
  const float new_max = std::max(running_max, _mm512_reduce_max_ps(tile_max));
  const __m512 new_max_vector = _mm512_set1_ps(new_max);
  const __m512 rescale = exp_nonpositive(_mm512_sub_ps(_mm512_set1_ps(running_max), new_max_vector));
  running_max = new_max;
  __m512 sum = _mm512_setzero_ps();
  for (int64_t b = 0; b < query_blocks; ++b) {
    const __m512 block_weights =
        exp_nonpositive(_mm512_sub_ps(_mm512_load_ps(tile_scores + b * attention_parts::kLanes), new_max_vector));
    const __m256i rounded = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(block_weights));
    _mm256_store_si256(reinterpret_cast<__m256i*>(weights + b * attention_parts::kLanes), rounded);
    sum = _mm512_add_ps(sum, attention_parts::bf16_to_floats(rounded));
  }
  return {rescale, sum};
}

}  // namespace tandem::avx512::bf16_parts
