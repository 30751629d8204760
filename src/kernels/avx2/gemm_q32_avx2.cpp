// AVX2 GEMM for the 32-element formats of base/quant32.h (Q5_0, Q5_1, IQ4_NL, MXFP4) on the
// file's own blocks, against 8-bit activation blocks: register tiles of 4 weight rows x 2
// tokens as the Q8_0/Q4_0 kernel (gemm_avx2.cpp), one block per 256-bit register.
//
// Each block is decoded in registers into 32 bytes, then one maddubs/madd gives 8 exact int32
// lanes of its products with the activations:
//   Q5_0, Q5_1: the 5-bit codes q (nibbles, plus 0x10 where the qh bit is set) are unsigned,
//     the operand maddubs wants; pairs of products reach 2 * 31 * 127, far from saturating.
//     Q5_0's -16 is taken off as 16 * (sum of each lane's 4 activations), once per token and
//     block; Q5_1's min adds m * d_x * (the same lane sums) as a second float term.
//   IQ4_NL, MXFP4: the codes index the level table with pshufb (16 entries, one per nibble)
//     into signed levels w; the sign moves onto the activations (sign(x, w)) and |w| <= 127 is
//     the unsigned operand, pairs at most 2 * 127 * 127 < 32767.
// Batch invariance: every (row, token) pair takes the same steps into its own accumulator
// whatever the tile shape, and one fixed horizontal sum ends it.
#include "kernels/simd_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/quant32.h"
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

// The one horizontal sum: lanes (0+4, 1+5, 2+6, 3+7), then pairs, then the two.
inline float reduce(__m256 acc) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Byte j = element j's 4-bit code: the low nibbles give elements 0-15, the high ones 16-31.
inline __m256i nibble_codes(const uint8_t* nibbles) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Byte j = 0x10 where bit j of qh is set: byte j/8 of qh spread to bytes j, then bit j%8 tested.
inline __m256i fifth_bits(const uint8_t* qh) {
  int32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

inline __m256i level_table(const int8_t (&levels)[16]) {
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(levels));
  return _mm256_broadcastsi128_si256(table);
}

template <DType kType>
struct Format;

template <>
struct Format<DType::Q5_0> {
  using Block = BlockQ5_0;
  static __m256i weights(const Block& b, __m256i) { return _mm256_or_si256(nibble_codes(b.nibbles), fifth_bits(b.qh)); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
};

template <>
struct Format<DType::Q5_1> {
  using Block = BlockQ5_1;
  static __m256i weights(const Block& b, __m256i) { return _mm256_or_si256(nibble_codes(b.nibbles), fifth_bits(b.qh)); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
  static float min(const Block& b) { return _cvtsh_ss(b.min_f16); }
};

template <>
struct Format<DType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static __m256i table() { return level_table(kIq4nlValues); }
  static __m256i weights(const Block& b, __m256i table) { return _mm256_shuffle_epi8(table, nibble_codes(b.nibbles)); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
};

template <>
struct Format<DType::MXFP4> {
  using Block = BlockMXFP4;
  static __m256i table() { return level_table(kMxfp4Values); }
  static __m256i weights(const Block& b, __m256i table) { return _mm256_shuffle_epi8(table, nibble_codes(b.nibbles)); }
  static float scale(const Block& b) { return mxfp4_half_scale(b.e); }
};

// Unsigned 5-bit codes (Q5_0/Q5_1) or signed levels (IQ4_NL/MXFP4)?
template <DType kType>
constexpr bool kUnsignedCodes = kType == DType::Q5_0 || kType == DType::Q5_1;

template <DType kType, int kRows, int kTokens>
inline void q32_tile(const TensorView& weight, int64_t row, const ActivationBlockQ8* x, int64_t token,
                     int64_t blocks_per_row, float* out, int64_t out_stride) {
  using F = Format<kType>;
  using Block = typename F::Block;
  __m256 acc[kRows][kTokens];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm256_setzero_ps();
  const Block* rows[kRows];
#pragma GCC unroll 8
  for (int r = 0; r < kRows; ++r) rows[r] = reinterpret_cast<const Block*>(weight.row(row + r));
  const ActivationBlockQ8* activations[kTokens];
#pragma GCC unroll 8
  for (int t = 0; t < kTokens; ++t) activations[t] = x + (token + t) * blocks_per_row;
  __m256i table = _mm256_setzero_si256();
  if constexpr (!kUnsignedCodes<kType>) table = F::table();
  const __m256i ones16 = _mm256_set1_epi16(1);
  constexpr int64_t kPrefetchBytes = 384;  // ahead of the loads: hides DRAM latency per row (decode)
  for (int64_t b = 0; b < blocks_per_row; ++b) {
    __m256i xq[kTokens];
    __m256i x_lane_sums[kTokens];  // Q5_0: 16 x (sum of each lane's 4 activations); Q5_1: the sums
    __m256 xd[kTokens];
#pragma GCC unroll 8
    for (int t = 0; t < kTokens; ++t) {
      xq[t] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(activations[t][b].quants));
      xd[t] = _mm256_set1_ps(activations[t][b].scale);
      x_lane_sums[t] = _mm256_setzero_si256();
      if constexpr (kType == DType::Q5_0)
        x_lane_sums[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(16), xq[t]), ones16);
      if constexpr (kType == DType::Q5_1)
        x_lane_sums[t] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xq[t]), ones16);
    }
#pragma GCC unroll 8
    for (int r = 0; r < kRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + b) + kPrefetchBytes, _MM_HINT_T0);
      const __m256i w = F::weights(rows[r][b], table);
      const __m256 wd = _mm256_set1_ps(F::scale(rows[r][b]));
      if constexpr (kUnsignedCodes<kType>) {
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(w, xq[t]), ones16);
          if constexpr (kType == DType::Q5_0) lanes = _mm256_sub_epi32(lanes, x_lane_sums[t]);
          acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes), _mm256_mul_ps(wd, xd[t]), acc[r][t]);
          if constexpr (kType == DType::Q5_1) {
            const __m256 wm = _mm256_set1_ps(F::min(rows[r][b]));
            acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x_lane_sums[t]), _mm256_mul_ps(wm, xd[t]), acc[r][t]);
          }
        }
      } else {
        const __m256i w_abs = _mm256_sign_epi8(w, w);
#pragma GCC unroll 8
        for (int t = 0; t < kTokens; ++t) {
          const __m256i lanes = _mm256_madd_epi16(_mm256_maddubs_epi16(w_abs, _mm256_sign_epi8(xq[t], w)), ones16);
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

// Token tiles outside, row tiles inside, as gemm_q8_typed.
template <DType kType>
void gemm_q32_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t blocks_per_row = weight.row_length() / 32;
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 2;
  auto rows_for = [&]<int kTokens>(int64_t token) {
    int64_t row = row_begin;
    for (; row + kRowTile <= row_end; row += kRowTile)
      q32_tile<kType, kRowTile, kTokens>(weight, row, x, token, blocks_per_row, out, out_stride);
    for (; row < row_end; ++row) q32_tile<kType, 1, kTokens>(weight, row, x, token, blocks_per_row, out, out_stride);
  };
  int64_t token = 0;
  for (; token + kTokenTile <= n_tokens; token += kTokenTile) rows_for.template operator()<kTokenTile>(token);
  for (; token < n_tokens; ++token) rows_for.template operator()<1>(token);
}

}  // namespace

void gemm_q32(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
              int64_t n_tokens, float* out, int64_t out_stride) {
  switch (weight.dtype) {
    case DType::Q5_0: return gemm_q32_typed<DType::Q5_0>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::Q5_1: return gemm_q32_typed<DType::Q5_1>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::IQ4_NL: return gemm_q32_typed<DType::IQ4_NL>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    case DType::MXFP4: return gemm_q32_typed<DType::MXFP4>(weight, row_begin, row_end, x, n_tokens, out, out_stride);
    default: __builtin_trap();
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
