// AVX-512 (F/BW/VL/VNNI) GEMM for the 32-element formats of base/quant32.h (Q5_0, Q5_1,
// IQ4_NL, MXFP4) on the file's own blocks, against 8-bit activation blocks: register tiles of
// 4 weight rows x 4 tokens as the Q8_0/Q4_0 kernel (gemm_avx512.cpp), two blocks per 512-bit
// register. The AMX level runs these too (no tile layout for these formats).
//
// Every format is brought to one shape: unsigned weight codes u (bytes) with a fixed offset o,
// so the block's integer products are dpbusd(u, x) - o * (sum of each lane's 4 activations).
// dpbusd takes u unsigned and the activations signed as they are, and the offset term is
// computed once per token and block pair, shared by every row of the tile:
//   Q5_0:   u = the 5-bit code (nibble | 0x10 where the qh bit is set, by a byte mask), o = 16.
//   Q5_1:   u = the 5-bit code, o = 0; the min adds m * d_x * (the lane sums) as a float term.
//   IQ4_NL: u = level + 128 (1..241) by vpshufb from the 16-entry table, o = 128.
//   MXFP4:  u = level + 12 (0..24) likewise, o = 12.
// Batch invariance: every (row, token) pair takes the same steps into its own accumulator
// whatever the tile shape, and one fixed horizontal sum ends it.
#include "kernels/simd_intrinsics.h"

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/quant32.h"
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

// Byte j = element j's 4-bit code: the low nibbles give elements 0-15, the high ones 16-31.
inline __m256i nibble_codes(const uint8_t* nibbles) {
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(nibbles));
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(packed), _mm_srli_epi16(packed, 4), 1);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// qh's bit j is byte j's mask bit: 0x10 added where it is set.
inline __m256i q5_codes(const uint8_t* nibbles, const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i codes = nibble_codes(nibbles);
  return _mm256_mask_add_epi8(codes, bits, codes, _mm256_set1_epi8(0x10));  // nibbles < 0x10: add is or
}

// The 16 levels + offset as unsigned bytes, in both 128-bit lanes (vpshufb looks up per lane).
inline __m256i offset_table(const int8_t (&levels)[16], int offset) {
  const __m128i table =
      _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels)), _mm_set1_epi8(static_cast<char>(offset)));
  return _mm256_broadcastsi128_si256(table);
}

template <DType kType>
struct Format;

template <>
struct Format<DType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr int kOffset = 16;
  static __m256i codes(const Block& b, __m256i) { return q5_codes(b.nibbles, b.qh); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
};

template <>
struct Format<DType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr int kOffset = 0;
  static __m256i codes(const Block& b, __m256i) { return q5_codes(b.nibbles, b.qh); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
  static float min(const Block& b) { return _cvtsh_ss(b.min_f16); }
};

template <>
struct Format<DType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr int kOffset = 128;
  static __m256i table() { return offset_table(kIq4nlValues, kOffset); }
  static __m256i codes(const Block& b, __m256i table) { return _mm256_shuffle_epi8(table, nibble_codes(b.nibbles)); }
  static float scale(const Block& b) { return _cvtsh_ss(b.scale_f16); }
};

template <>
struct Format<DType::MXFP4> {
  using Block = BlockMXFP4;
  static constexpr int kOffset = 12;
  static __m256i table() { return offset_table(kMxfp4Values, kOffset); }
  static __m256i codes(const Block& b, __m256i table) { return _mm256_shuffle_epi8(table, nibble_codes(b.nibbles)); }
  static float scale(const Block& b) { return mxfp4_half_scale(b.e); }
};

inline __m512i join(__m256i low, __m256i high) { return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1); }

inline __m512 pair_scales(float low, float high) {
  const __m512d low_half = _mm512_castps_pd(_mm512_castps256_ps512(_mm256_set1_ps(low)));
  return _mm512_castpd_ps(_mm512_insertf64x4(low_half, _mm256_castps_pd(_mm256_set1_ps(high)), 1));
}

// Blocks b and b+1 of a row (b+1 may be past the row: zeros).
struct WeightPair {
  __m512i codes;
  __m512 scales;  // [d_b x 8 | d_b+1 x 8]
  __m512 mins;    // Q5_1 only
};

template <DType kType>
inline WeightPair load_weight_pair(const typename Format<kType>::Block* row, int64_t b, int64_t n_blocks,
                                   __m256i table) {
  using F = Format<kType>;
  const bool has_second = b + 1 < n_blocks;
  WeightPair pair;
  pair.codes = join(F::codes(row[b], table), has_second ? F::codes(row[b + 1], table) : _mm256_setzero_si256());
  pair.scales = pair_scales(F::scale(row[b]), has_second ? F::scale(row[b + 1]) : 0.0f);
  pair.mins = _mm512_setzero_ps();
  if constexpr (kType == DType::Q5_1) pair.mins = pair_scales(F::min(row[b]), has_second ? F::min(row[b + 1]) : 0.0f);
  return pair;
}

// A token's blocks b and b+1, with what the offset (or Q5_1's min) needs.
struct ActivationPair {
  __m512i quants;  // signed, as quantized
  __m512 scales;
  __m512i bias;      // -offset * (sum of each lane's 4 activations): where dpbusd starts
  __m512 lane_sums;  // Q5_1: the lane sums as floats
};

template <DType kType>
inline ActivationPair load_activation_pair(const ActivationBlockQ8* x, int64_t b, int64_t n_blocks) {
  const bool has_second = b + 1 < n_blocks;
  const __m256i low = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants));
  const __m256i high =
      has_second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b + 1].quants)) : _mm256_setzero_si256();
  ActivationPair pair;
  pair.quants = join(low, high);
  pair.scales = pair_scales(x[b].scale, has_second ? x[b + 1].scale : 0.0f);
  constexpr int kOffset = Format<kType>::kOffset;
  if constexpr (kOffset != 0) {
    const __m512i offset_sums =
        _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(kOffset)), pair.quants);
    pair.bias = _mm512_sub_epi32(_mm512_setzero_si512(), offset_sums);
  } else {
    pair.bias = _mm512_setzero_si512();
  }
  pair.lane_sums = _mm512_setzero_ps();
  if constexpr (kType == DType::Q5_1)
    pair.lane_sums = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), pair.quants));
  return pair;
}

template <DType kType, int kRows, int kTokens>
inline void q32_tile(const TensorView& weight, int64_t row, const ActivationBlockQ8* x, int64_t token,
                     int64_t blocks_per_row, float* out, int64_t out_stride) {
  using Block = typename Format<kType>::Block;
  // Loops over rows/tokens unrolled early so the accumulators stay in registers.
  __m512 acc[kRows][kTokens];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) acc[r][t] = _mm512_setzero_ps();
  const Block* rows[kRows];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) rows[r] = reinterpret_cast<const Block*>(weight.row(row + r));
  __m256i table = _mm256_setzero_si256();
  if constexpr (kType == DType::IQ4_NL || kType == DType::MXFP4) table = Format<kType>::table();
  constexpr int64_t kPrefetchBytes = 512;  // ahead of the loads: hides DRAM latency per stream
  for (int64_t b = 0; b < blocks_per_row; b += 2) {
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r)
      _mm_prefetch(reinterpret_cast<const char*>(rows[r] + b) + kPrefetchBytes, _MM_HINT_T0);
    WeightPair w[kRows];
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) w[r] = load_weight_pair<kType>(rows[r], b, blocks_per_row, table);
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) {
      const ActivationPair a = load_activation_pair<kType>(x + (token + t) * blocks_per_row, b, blocks_per_row);
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) {
        const __m512i lanes = _mm512_dpbusd_epi32(a.bias, w[r].codes, a.quants);
        acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), _mm512_mul_ps(w[r].scales, a.scales), acc[r][t]);
        if constexpr (kType == DType::Q5_1)
          acc[r][t] = _mm512_fmadd_ps(a.lane_sums, _mm512_mul_ps(w[r].mins, a.scales), acc[r][t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) out[(token + t) * out_stride + row + r] = _mm512_reduce_add_ps(acc[r][t]);
}

template <DType kType>
void gemm_q32_typed(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8* x,
                    int64_t n_tokens, float* out, int64_t out_stride) {
  const int64_t blocks_per_row = weight.row_length() / 32;
  constexpr int kRowTile = 4;
  constexpr int kTokenTile = 4;
  auto tokens_for = [&]<int kRows>(int64_t row) {
    int64_t token = 0;
    for (; token + kTokenTile <= n_tokens; token += kTokenTile)
      q32_tile<kType, kRows, kTokenTile>(weight, row, x, token, blocks_per_row, out, out_stride);
    for (; token < n_tokens; ++token) q32_tile<kType, kRows, 1>(weight, row, x, token, blocks_per_row, out, out_stride);
  };
  int64_t row = row_begin;
  for (; row + kRowTile <= row_end; row += kRowTile) tokens_for.template operator()<kRowTile>(row);
  for (; row < row_end; ++row) tokens_for.template operator()<1>(row);
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

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
