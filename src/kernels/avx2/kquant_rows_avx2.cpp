// The AVX2 row dot products of the 256-element weight types (Q4_K, Q5_K, Q6_K, Q8_K, Q2_K,
// Q3_K, IQ4_XS; Q4_K and Q5_K are the loop both SIMD levels share, kquant_k4_row.h) against
// 8-bit activation blocks, and this level's row-by-row k-quant GEMM.
// Each computes the exact int32 sums of the scalar reference (kernels/dot_kquants.cpp,
// dot_low_bit_kquants.cpp) and the same float update, so it returns the reference's bits.
#include "kernels/avx2/kquant_row_parts.h"

#include "base/half.h"
#include "base/kquants.h"
#include "base/kquants_low_bit.h"
#include "kernels/avx2/avx2_kernels.h"
#include "kernels/dot_kquants.h"
#include "kernels/kernel_contract.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#include "kernels/avx2/kquant_k4_row.h"  // AVX2 code: after the target pragma

namespace tandem::avx2 {
namespace {

using kquant_detail::finish_d;
using kquant_detail::finish_k4;
using kquant_detail::iq4xs_scales;
using namespace kquant_parts;  // NOLINT(google-build-using-namespace): this file is their user

// ---- AVX2 ------------------------------------------------------------------------------
// Weights are non-negative (Q4_K/Q5_K quants, Q6_K quants + 32), so maddubs (u8 x s8 ->
// pairs summed in int16, at most 2*63*127 < 32767: no saturation) then madd with the
// sub-block scale broadcast to int16 gives exact int32 partial sums. Q4_K and Q5_K are the
// shared loop of kquant_k4_row.h with this level's accumulation.

struct MaddThenAdd {
  static __m256i add(__m256i sum, __m256i pairs, __m256i scale) {
    return _mm256_add_epi32(sum, _mm256_madd_epi16(pairs, scale));
  }
};

float dot_q6k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ6K*>(weight_row);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i bits45 = _mm256_set1_epi8(0x30);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qh + 32 * h));
      // Each 2-bit field of qh moved to bits 4-5 of its byte.
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45)),
          _mm256_or_si256(_mm256_and_si256(ql1, nibble), _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), nibble), _mm256_and_si256(qh, bits45)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), nibble),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45)),
      };
      for (int k = 0; k < 4; ++k) {
        const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(kPairMasks.bytes[4 * h + k]));
        const __m256i scale = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, mask));
        const auto* a = reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k);
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], _mm256_loadu_si256(a)), scale));
      }
    }
    const int32_t sumi = hsum_avx2(_mm256_sub_epi32(sum, q6k_offset_avx2(w[b].scales, x[b].block_sums)));
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), sumi);
  }
  return acc;
}

// Both sides signed: widen to int16 and madd (|products| <= 127*127, pairs fit int32).
float dot_q8k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ8K*>(weight_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    __m256i sum = _mm256_setzero_si256();
    for (int i = 0; i < 256; i += 16) {
      const __m256i wq = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + i)));
      const __m256i aq = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].quants + i)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(wq, aq));
    }
    acc += finish_d(x[b].scale, w[b].d, hsum_avx2(sum));
  }
  return acc;
}

// ---- AVX2 ------------------------------------------------------------------------------
// Q2_K and Q3_K: a 32-byte register of quants covers two sub-blocks of 16. Weights are made
// non-negative (Q3_K stores q + 4 in three bits), so maddubs (u8 x s8, pairs at most
// 2 * 7 * 127: no saturation) then madd with the pair's two scales as int16 gives exact int32
// partial sums. The Q3_K offset of 4 and the Q2_K mins multiply the 16 activation sums.

float dot_q2k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ2K*>(weight_row);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m128i nibble = _mm_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].scales));
    const __m128i scales = _mm_and_si128(packed, nibble);
    const __m128i mins = _mm_and_si128(_mm_srli_epi16(packed, 4), nibble);
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      // Shift k of the 32 bytes holds elements 128h + 32k .. 128h + 32k + 31.
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int k = 0; k < 4; ++k) {
        const __m256i u = _mm256_and_si256(q, two_bits);
        q = _mm256_srli_epi16(q, 2);
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k));
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), pair_scales_avx2(scales, 4 * h + k, false)));
      }
    }
    const int32_t summ = hsum_avx2(times_block_sums_avx2(_mm256_cvtepu8_epi16(mins), x[b].block_sums));
    acc += finish_k4(x[b].scale, f16_avx(w[b].d_f16), f16_avx(w[b].dmin_f16), hsum_avx2(sum), summ);
  }
  return acc;
}

float dot_q3k_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockQ3K*>(weight_row);
  const __m256i two_bits = _mm256_set1_epi8(3);
  const __m256i bit2 = _mm256_set1_epi8(4);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m128i scales = q3k_scales_sse(w[b].scales);
    // Register m = 4h + k takes bit m of hmask: shifting right by one per register brings it
    // to bit 0, and a left shift by 2 to bit 2 (16-bit shifts, masked per byte).
    __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].hmask));
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[b].qs + 32 * h));
      for (int k = 0; k < 4; ++k) {
        const __m256i u =
            _mm256_or_si256(_mm256_and_si256(q, two_bits), _mm256_and_si256(_mm256_slli_epi16(high, 2), bit2));
        q = _mm256_srli_epi16(q, 2);
        high = _mm256_srli_epi16(high, 1);
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 128 * h + 32 * k));
        sum = _mm256_add_epi32(
            sum, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), pair_scales_avx2(scales, 4 * h + k, true)));
      }
    }
    // sum(scale * (u - 4) * a) = sum(scale * u * a) - 4 * sum(scale * block_sum).
    const __m256i offset = _mm256_slli_epi32(times_block_sums_avx2(_mm256_cvtepi8_epi16(scales), x[b].block_sums), 2);
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx2(_mm256_sub_epi32(sum, offset)));
  }
  return acc;
}

// IQ4_XS: the 16 levels looked up with pshufb; they are signed, so maddubs takes |level| as
// the unsigned side and the activation with the level's sign (pairs at most 2 * 127 * 127).
float dot_iq4xs_avx2(const void* weight_row, const ActivationBlockQ8K* x, int64_t n_blocks) {
  const auto* w = static_cast<const BlockIQ4XS*>(weight_row);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4NonLinear)));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  float acc = 0.0f;
  for (int64_t b = 0; b < n_blocks; ++b) {
    int32_t scales[8];
    iq4xs_scales(w[b], scales);
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      // Sub-block j: elements 0..15 the low nibbles of its 16 bytes, 16..31 the high ones.
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w[b].qs + 16 * j));
      const __m256i index = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), nibble), _mm_and_si128(q, nibble));
      const __m256i level = _mm256_shuffle_epi8(levels, index);
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].quants + 32 * j));
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(level), _mm256_sign_epi8(a, level));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_set1_epi16(static_cast<int16_t>(scales[j]))));
    }
    acc += finish_d(x[b].scale, f16_avx(w[b].d_f16), hsum_avx2(sum));
  }
  return acc;
}

}  // namespace

KQuantRowDotFn kquant_row_dot(DType type) {
  switch (type) {
    case DType::Q4_K: return dot_k4_row<Q4KQuants, MaddThenAdd>;
    case DType::Q5_K: return dot_k4_row<Q5KQuants, MaddThenAdd>;
    case DType::Q6_K: return dot_q6k_avx2;
    case DType::Q8_K: return dot_q8k_avx2;
    case DType::Q2_K: return dot_q2k_avx2;
    case DType::Q3_K: return dot_q3k_avx2;
    case DType::IQ4_XS: return dot_iq4xs_avx2;
    default: return nullptr;
  }
}

// Packed Q4_K/Q6_K (every one the loader packs) to the packed kernel; the rest row by row.
void gemm_q8k(const TensorView& weight, int64_t row_begin, int64_t row_end, const ActivationBlockQ8K* x,
              int64_t n_tokens, float* out, int64_t out_stride) {
  if (weight.packed != nullptr) return gemm_kquant_packed(weight, row_begin, row_end, x, n_tokens, out, out_stride);
  gemm_q8k_rows(kquant_row_dot(weight.dtype), weight, row_begin, row_end, x, n_tokens, out, out_stride);
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
