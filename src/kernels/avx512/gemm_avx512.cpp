// AVX-512 (F/BW/VL/VNNI) matrix-product kernels. A tile of ROWS weight rows x TOKENS
// activation rows is computed together so every weight byte loaded serves TOKENS products
// (prefill) and several rows stream at once (decode). Batch invariance: each (row, token)
// pair runs the same instruction sequence with its own accumulator whatever the tile shape,
// and the final horizontal sum is one fixed function, so a row's result does not depend on
// how many tokens or rows shared its tile.
//
// 8-bit path: two 32-element blocks per 512-bit register. dpbusd multiplies unsigned by
// signed bytes, so activations are offset to unsigned (x + 128, an XOR with 0x80) and the
// offset's contribution, 128 * sum(w) per 4-byte lane, is subtracted by starting the
// accumulation from its negation. Integer lanes are exact, then scaled by d_w * d_x in float.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "kernels/avx512/avx512_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")
#endif

namespace tandem::avx512 {
namespace {

// ---- 8-bit blocks ------------------------------------------------------------------------

// Signed weight bytes of blocks b and b+1 (b+1 may be past the row: zeros), and their scales.
struct WeightPair {
  __m512i quants;
  __m512 scales;       // [d_b x 8 | d_b+1 x 8]
  __m512i neg_offset;  // -(128 * sum of each 4-byte lane)
};

inline __m512 pair_scales(float low, float high) {
  const __m512d low_half = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(low)));
  return _mm512_castpd_ps(_mm512_insertf64x4(low_half, _mm256_castps_pd(_mm256_set1_ps(high)), 1));
}

inline __m512i join(__m256i low, __m256i high) { return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1); }

inline __m256i q4_0_unpack(const BlockQ4_0& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.nibbles));
  const __m128i low_mask = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_and_si128(packed, low_mask);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(packed, 4), low_mask);
  const __m256i nibbles = _mm256_inserti128_si256(_mm256_castsi128_si256(low), high, 1);
  return _mm256_sub_epi8(nibbles, _mm256_set1_epi8(8));
}

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

template <DType kType>
inline __m256i block_quants(const void* row, int64_t b) {
  if constexpr (kType == DType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const BlockQ8_0*>(row)[b].quants));
  } else {
    return q4_0_unpack(static_cast<const BlockQ4_0*>(row)[b]);
  }
}

template <DType kType>
inline float block_scale(const void* row, int64_t b) {
  if constexpr (kType == DType::Q8_0) {
    return half_to_float(static_cast<const BlockQ8_0*>(row)[b].scale_f16);
  } else {
    return half_to_float(static_cast<const BlockQ4_0*>(row)[b].scale_f16);
  }
}

template <DType kType>
inline WeightPair load_weight_pair(const void* row, int64_t b, int64_t n_blocks) {
  WeightPair pair;
  const bool has_second = b + 1 < n_blocks;
  const __m256i low = block_quants<kType>(row, b);
  const __m256i high = has_second ? block_quants<kType>(row, b + 1) : _mm256_setzero_si256();
  pair.quants = join(low, high);
  pair.scales = pair_scales(block_scale<kType>(row, b), has_second ? block_scale<kType>(row, b + 1) : 0.0f);
  const __m512i offset =
      _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), pair.quants);
  pair.neg_offset = _mm512_sub_epi32(_mm512_setzero_si512(), offset);
  return pair;
}

struct ActivationPair {
  __m512i unsigned_quants;  // x + 128
  __m512 scales;
};

inline ActivationPair load_activation_pair(const ActivationBlockQ8* x, int64_t b, int64_t n_blocks) {
  const bool has_second = b + 1 < n_blocks;
  const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants));
  const __m256i high =
      has_second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].quants)) : _mm256_setzero_si256();
  ActivationPair pair;
  pair.unsigned_quants = _mm512_xor_si512(join(low, high), _mm512_set1_epi8(static_cast<char>(0x80)));
  pair.scales = pair_scales(x[b].scale, has_second ? x[b + 1].scale : 0.0f);
  return pair;
}

// The one horizontal sum every path uses.
inline float reduce(__m512 acc) { return _mm512_reduce_add_ps(acc); }

template <DType kType, int kRows, int kTokens>
inline void q8_tile(const TensorView& weight, int64_t row, const ActivationBlockQ8* x, int64_t token,
                    int64_t blocks_per_row, float* out, int64_t out_stride) {
  // Loops over rows/tokens unrolled early so the accumulators stay in registers (see float_tile).
  __m512 acc[kRows][kTokens];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_ps();
  const void* rows[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) rows[r] = weight.row(row + r);
  constexpr int64_t kPrefetchBytes = 512;  // ahead of the loads: hides DRAM latency per stream
  const int64_t block_bytes = kType == DType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);
  for (int64_t b = 0; b < blocks_per_row; b += 2) {
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r)
      _mm_prefetch(static_cast<const char*>(rows[r]) + b * block_bytes + kPrefetchBytes, _MM_HINT_T0);
    WeightPair w[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) w[r] = load_weight_pair<kType>(rows[r], b, blocks_per_row);
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) {
      const ActivationPair a = load_activation_pair(x + (token + t) * blocks_per_row, b, blocks_per_row);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const __m512i lanes = _mm512_dpbusd_epi32(w[r].neg_offset, a.unsigned_quants, w[r].quants);
        const __m512 scale = _mm512_mul_ps(w[r].scales, a.scales);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), scale, acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) out[(token + t) * out_stride + row + r] = reduce(acc[r][t]);
}

template <DType kType>
void gemm_q8_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                   int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t blocks_per_row = weight.row_length() / 32;
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 4;
  int64_t row = row_begin;
  for (; row + kRowTile <= row_end; row += kRowTile) {
    int64_t token = 0;
    for (; token + kTokenTile <= n_tokens; token += kTokenTile)
      q8_tile<kType, kRowTile, kTokenTile>(weight, row, x, token, blocks_per_row, out, out_stride);
    for (; token < n_tokens; ++token)
      q8_tile<kType, kRowTile, 1>(weight, row, x, token, blocks_per_row, out, out_stride);
  }
  for (; row < row_end; ++row) {
    int64_t token = 0;
    for (; token + kTokenTile <= n_tokens; token += kTokenTile)
      q8_tile<kType, 1, kTokenTile>(weight, row, x, token, blocks_per_row, out, out_stride);
    for (; token < n_tokens; ++token) q8_tile<kType, 1, 1>(weight, row, x, token, blocks_per_row, out, out_stride);
  }
}

// ---- float weights (F32, F16, BF16) against f32 activations --------------------------------

template <DType kType>
inline __m512 load_weights16(const void* row, int64_t i, __mmask16 mask) {
  if constexpr (kType == DType::F32) {
    return _mm512_maskz_loadu_ps(mask, static_cast<const float*>(row) + i);
  } else if constexpr (kType == DType::F16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + i));
  } else {
    const __m256i bits = _mm256_maskz_loadu_epi16(mask, static_cast<const uint16_t*>(row) + i);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
}

template <DType kType, int kRows, int kTokens>
inline void float_tile(const TensorView& weight, int64_t row, const float* x, int64_t token, int64_t n_in, float* out,
                       int64_t out_stride) {
  // Every loop over rows/tokens is unrolled before GCC decides what lives in registers;
  // otherwise it keeps the accumulator array in memory and stores all of it every step.
  __m512 acc[kRows][kTokens];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_ps();
  const void* rows[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) rows[r] = weight.row(row + r);
  const float* activations[kTokens];
#pragma GCC unroll 16
  for (int t = 0; t < kTokens; ++t) activations[t] = x + (token + t) * n_in;
  for (int64_t i = 0; i < n_in; i += 16) {
    const __mmask16 mask = n_in - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n_in - i)) - 1);
    __m512 w[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) w[r] = load_weights16<kType>(rows[r], i, mask);
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) {
      const __m512 a = _mm512_maskz_loadu_ps(mask, activations[t] + i);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) acc[r][t] = _mm512_fmadd_ps(w[r], a, acc[r][t]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) out[(token + t) * out_stride + row + r] = reduce(acc[r][t]);
}

template <DType kType>
void gemm_float_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                      float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 6;  // 4 x 6 accumulators + 4 weights + 1 activation of 32 zmm
  // Token tiles outside, row tiles inside: a token tile's f32 activations (the bigger operand)
  // stay in L1 across the call's rows, whose weights stay in L2 across token tiles.
  int64_t token = 0;
  for (; token + kTokenTile <= n_tokens; token += kTokenTile) {
    int64_t row = row_begin;
    for (; row + kRowTile <= row_end; row += kRowTile)
      float_tile<kType, kRowTile, kTokenTile>(weight, row, x, token, n_in, out, out_stride);
    for (; row < row_end; ++row) float_tile<kType, 1, kTokenTile>(weight, row, x, token, n_in, out, out_stride);
  }
  for (; token < n_tokens; ++token) {
    int64_t row = row_begin;
    for (; row + kRowTile <= row_end; row += kRowTile)
      float_tile<kType, kRowTile, 1>(weight, row, x, token, n_in, out, out_stride);
    for (; row < row_end; ++row) float_tile<kType, 1, 1>(weight, row, x, token, n_in, out, out_stride);
  }
}

}  // namespace

void gemm_float(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                float* out, int64_t out_stride) {
  switch (weight.dtype) {
    case DType::F32: return gemm_float_typed<DType::F32>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::F16: return gemm_float_typed<DType::F16>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::BF16: return gemm_float_typed<DType::BF16>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

void gemm_q8(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x, int64_t n_tokens,
             float* out, int64_t out_stride) {
  switch (weight.dtype) {
    case DType::Q8_0: return gemm_q8_typed<DType::Q8_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q4_0: return gemm_q8_typed<DType::Q4_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4: return gemm_q32(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
