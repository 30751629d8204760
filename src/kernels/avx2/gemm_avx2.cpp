// AVX2 (+FMA +F16C) matrix-product kernels: the AVX-512 kernels' register tiling at 256 bits.
// A tile of ROWS weight rows x TOKENS activation rows is computed together, so every weight
// vector loaded serves TOKENS products (prefill) and several rows stream at once (decode).
// Batch invariance: each (row, token) pair runs the same instruction sequence with its own
// accumulator whatever the tile shape, and the final horizontal sum is one fixed function,
// so a row's result does not depend on how many tokens or rows shared its tile.
//
// 8-bit path: one 32-element block per 256-bit register. maddubs multiplies unsigned by
// signed bytes, so for Q8_0 the weight's sign moves onto the activation (sign(x, w)) and |w|
// is the unsigned operand: pairs of products sum to at most 2 * 128 * 127 < 32767 (activations
// are quantized to [-127, 127]), so no saturation. Q4_0 nibbles are unsigned already; their -8
// offset is 8 * sum(x) per lane, computed once per token and block and subtracted. Either way
// the int32 lanes after madd are exact, then scaled by d_w * d_x and accumulated in float,
// block after block.
#include "kernels/simd_intrinsics.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "kernels/avx2/avx2_kernels.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

namespace tandem::avx2 {
namespace {

// The one horizontal sum every path uses: lanes (0+4, 1+5, 2+6, 3+7), then pairs, then the two.
inline float reduce(__m256 acc) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// ---- 8-bit blocks ------------------------------------------------------------------------

// A Q4_0 block's quants as unsigned nibbles 0..15 (elements 0-15 from the low nibbles, 16-31
// from the high ones): the -8 offset is taken off the integer sums instead (q4_0_offset).
inline __m256i q4_0_nibbles(const BlockQ4_0& block) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(block.nibbles));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// 8 * (sum of each 4 activations of a lane): what the -8 offset of Q4_0 weights contributes.
inline __m256i q4_0_offset(__m256i activations) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), activations), _mm256_set1_epi16(1));
}

template <DType kType>
inline __m256i block_quants(const void* row, int64_t b) {
  if constexpr (kType == DType::Q8_0) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const BlockQ8_0*>(row)[b].quants));
  } else {
    return q4_0_nibbles(static_cast<const BlockQ4_0*>(row)[b]);
  }
}

template <DType kType>
inline uint16_t block_scale_bits(const void* row, int64_t b) {
  if constexpr (kType == DType::Q8_0) {
    return static_cast<const BlockQ8_0*>(row)[b].scale_f16;
  } else {
    return static_cast<const BlockQ4_0*>(row)[b].scale_f16;
  }
}

template <DType kType>
constexpr int64_t kBlockBytes = kType == DType::Q8_0 ? sizeof(BlockQ8_0) : sizeof(BlockQ4_0);

template <DType kType, int kRows, int kTokens>
inline void q8_tile(const TensorView& weight, int64_t row, const ActivationBlockQ8* x, int64_t token,
                    int64_t blocks_per_row, float* out, int64_t out_stride) {
  // Loops over rows/tokens are unrolled before GCC decides what lives in registers;
  // otherwise it keeps the accumulator array in memory and stores all of it every step.
  __m256 acc[kRows][kTokens];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_setzero_ps();
  const void* rows[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) rows[r] = weight.row(row + r);
  const ActivationBlockQ8* activations[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) activations[t] = x + (token + t) * blocks_per_row;
  const __m256i ones = _mm256_set1_epi16(1);
  // Prefetch distance ahead of the loads: hides DRAM latency on each row's stream (decode).
  constexpr int64_t kPrefetchBytes = 384;
  for (int64_t b = 0; b < blocks_per_row; ++b) {
    __m256i xq[kTokens];
    __m256i x_offset[kTokens];  // Q4_0 only
    __m256 xd[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      xq[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(activations[t][b].quants));
      if constexpr (kType == DType::Q4_0) x_offset[t] = q4_0_offset(xq[t]);
      xd[t] = _mm256_set1_ps(activations[t][b].scale);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(static_cast<const char*>(rows[r]) + b * kBlockBytes<kType> + kPrefetchBytes, _MM_HINT_T0);
      const __m256i w = block_quants<kType>(rows[r], b);
      const __m256 wd = _mm256_set1_ps(_cvtsh_ss(block_scale_bits<kType>(rows[r], b)));
      if constexpr (kType == DType::Q8_0) {
        const __m256i w_abs = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          const __m256i products = _mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xq[t], w));
          const __m256i lanes = _mm256_madd_epi16(products, ones);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(wd, xd[t]), acc[r][t]);
        }
      } else {  // unsigned nibbles: pairs of products at most 2 * 15 * 127
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          const __m256i products = _mm256_maddubs_epi16(w, xq[t]);
          const __m256i lanes = _mm256_sub_epi32(_mm256_madd_epi16(products, ones), x_offset[t]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(wd, xd[t]), acc[r][t]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) out[(token + t) * out_stride + row + r] = reduce(acc[r][t]);
}

// Token tiles outside, row tiles inside: a token tile's activations stay in L1 across the
// call's rows (matmul hands a kernel 16 rows at a time, whose weights stay in L2).
template <DType kType>
void gemm_q8_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                   int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t blocks_per_row = weight.row_length() / 32;
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 2;  // 4 x 2 accumulators + 2 activations + weight, |weight|, scales: 16 ymm
  auto rows_for = [&]<int kTokens>(int64_t token) {
    int64_t row = row_begin;
    for (; row + kRowTile <= row_end; row += kRowTile)
      q8_tile<kType, kRowTile, kTokens>(weight, row, x, token, blocks_per_row, out, out_stride);
    for (; row < row_end; ++row) q8_tile<kType, 1, kTokens>(weight, row, x, token, blocks_per_row, out, out_stride);
  };
  int64_t token = 0;
  for (; token + kTokenTile <= n_tokens; token += kTokenTile) rows_for.template operator()<kTokenTile>(token);
  for (; token < n_tokens; ++token) rows_for.template operator()<1>(token);
}

// ---- float weights (F32, F16, BF16) against f32 activations --------------------------------

// Eight weights from element i of a row of kType, as floats (F16 through F16C, BF16 by a shift).
template <DType kType>
inline __m256 load_weights8(const void* row, int64_t i) {
  if constexpr (kType == DType::F32) {
    return _mm256_loadu_ps(static_cast<const float*>(row) + i);
  } else if constexpr (kType == DType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i)));
  } else {
    const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(row) + i));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(bits), 16));
  }
}

// The last count < 8 weights of a row, zero-padded (no read past the row).
template <DType kType>
inline __m256 load_weights_tail(const void* row, int64_t i, int64_t count) {
  using Element = std::conditional_t<kType == DType::F32, float, uint16_t>;
  alignas(32) Element padded[8] = {};
  std::memcpy(padded, static_cast<const Element*>(row) + i, static_cast<size_t>(count) * sizeof(Element));
  return load_weights8<kType>(padded, 0);
}

inline __m256 load_activations_tail(const float* x, int64_t count) {
  alignas(32) float padded[8] = {};
  std::memcpy(padded, x, static_cast<size_t>(count) * sizeof(float));
  return _mm256_load_ps(padded);
}

template <DType kType, int kRows, int kTokens>
inline void float_tile(const TensorView& weight, int64_t row, const float* x, int64_t token, int64_t n_in, float* out,
                       int64_t out_stride) {
  __m256 acc[kRows][kTokens];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_setzero_ps();
  const void* rows[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) rows[r] = weight.row(row + r);
  const float* activations[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) activations[t] = x + (token + t) * n_in;
  constexpr int64_t kPrefetchElements = kType == DType::F32 ? 96 : 192;  // 384 bytes ahead
  constexpr int64_t kElementBytes = kType == DType::F32 ? 4 : 2;
  constexpr int64_t kLineElements = 64 / kElementBytes;  // one prefetch per 64-byte line
  const int64_t n_full = n_in / 8 * 8;
  for (int64_t i = 0; i < n_full; i += 8) {
    __m256 a[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) a[t] = _mm256_loadu_ps(activations[t] + i);
    const bool new_line = i % kLineElements == 0;
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      if (new_line)
        _mm_prefetch(static_cast<const char*>(rows[r]) + (i + kPrefetchElements) * kElementBytes, _MM_HINT_T0);
      const __m256 w = load_weights8<kType>(rows[r], i);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_fmadd_ps(w, a[t], acc[r][t]);
    }
  }
  if (n_full < n_in) {  // the last < 8 elements, zero-padded: the same step for every tile shape
    const int64_t count = n_in - n_full;
    __m256 a[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) a[t] = load_activations_tail(activations[t] + n_full, count);
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      const __m256 w = load_weights_tail<kType>(rows[r], n_full, count);
#pragma GCC unroll 8
      for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_fmadd_ps(w, a[t], acc[r][t]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) out[(token + t) * out_stride + row + r] = reduce(acc[r][t]);
}

template <DType kType>
void gemm_float_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const float* x, int64_t n_tokens,
                      float* out, int64_t out_stride) {
  const int64_t n_in = weight.row_length();
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 3;  // 4 x 3 accumulators + 3 activations + 1 weight = 16 ymm
  // One token (decode, a prefill's last tokens): 8 rows, so 8 independent FMA chains cover
  // the FMA latency (4 chains left one FMA a cycle). Each row's arithmetic is the same at
  // any row tile, so the bits do not change.
  constexpr int kSingleTokenRowTile = 8;
  auto rows_for = [&]<int kTokens>(int64_t token) {
    int64_t row = row_begin;
    if constexpr (kTokens == 1)
      for (; row + kSingleTokenRowTile <= row_end; row += kSingleTokenRowTile)
        float_tile<kType, kSingleTokenRowTile, 1>(weight, row, x, token, n_in, out, out_stride);
    for (; row + kRowTile <= row_end; row += kRowTile)
      float_tile<kType, kRowTile, kTokens>(weight, row, x, token, n_in, out, out_stride);
    for (; row < row_end; ++row) float_tile<kType, 1, kTokens>(weight, row, x, token, n_in, out, out_stride);
  };
  int64_t token = 0;
  for (; token + kTokenTile <= n_tokens; token += kTokenTile) rows_for.template operator()<kTokenTile>(token);
  for (; token < n_tokens; ++token) rows_for.template operator()<1>(token);
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
    case DType::Q8_0:
      if (weight.packed != nullptr) return gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
      return gemm_q8_typed<DType::Q8_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q4_0:
      if (weight.packed != nullptr) return gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
      return gemm_q8_typed<DType::Q4_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::IQ4_NL:
    case DType::MXFP4:
      if (weight.packed != nullptr) return gemm_q8_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
      return gemm_q32(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
