// AVX2 activation quantizers: the same bytes as the portable ones (quantize_q8_portable in
// kernels/dot.cpp, quantize_q8k_scalar in kernels/dot_kquants.cpp). The max is exact in any
// order and, like fmax/std::max there, keeps the running value when an input is NaN; the
// product, the rounding (to nearest, ties to even) and the conversion are the same per element.
#include "kernels/simd_intrinsics.h"

#include <cstdint>

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

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// max(|x|, running): _mm256_max_ps returns its second operand when either is NaN, so a NaN
// input leaves the running maximum as it was (fmax's and std::max's behaviour in the loops).
[[gnu::always_inline]] inline __m256 max_abs(__m256 x, __m256 running) {
  return _mm256_max_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), running);
}

[[gnu::always_inline]] inline float reduce_max(__m256 x) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// x·inverse rounded to the nearest integer, ties to even (nearbyint in the default mode); a
// NaN product converts to INT_MIN, as the scalar conversion does on x86.
[[gnu::always_inline]] inline __m256i round_to_int(__m256 x, __m256 inverse) {
  return _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(x, inverse), kRound));
}

// 16 int32 lanes (a, b) to 16 bytes in order. Signed saturation, which is exact for values
// already in [-128, 127].
[[gnu::always_inline]] inline __m128i pack_bytes(__m256i a, __m256i b) {
  const __m128i a16 = _mm_packs_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b16 = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packs_epi16(a16, b16);
}

// The low byte of each of 16 int32 lanes, in order: static_cast<int8_t>'s truncation, which
// the Q8 loop applies unclamped (only a NaN input, converted to INT_MIN, falls outside
// [-127, 127]; its low byte is 0).
[[gnu::always_inline]] inline __m128i truncate_bytes(__m256i a, __m256i b) {
  const __m256i low_byte = _mm256_set1_epi32(0xff);
  a = _mm256_and_si256(a, low_byte);
  b = _mm256_and_si256(b, low_byte);
  const __m128i a16 = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i b16 = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
  return _mm_packus_epi16(a16, b16);
}

[[gnu::always_inline]] inline int32_t reduce_add(__m256i x) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void quantize_q8(const float* x, int64_t n, ActivationBlockQ8* out) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* block = x + b * 32;
    __m256 v[4];
    for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(block + 8 * i);
    const __m256 max_ab = max_abs(v[1], max_abs(v[0], _mm256_setzero_ps()));
    const __m256 max_cd = max_abs(v[3], max_abs(v[2], _mm256_setzero_ps()));
    const float amax = reduce_max(_mm256_max_ps(max_ab, max_cd));
    const float scale = amax / 127.0f;
    const __m256 inverse = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
    out[b].scale = scale;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants),
                     truncate_bytes(round_to_int(v[0], inverse), round_to_int(v[1], inverse)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16),
                     truncate_bytes(round_to_int(v[2], inverse), round_to_int(v[3], inverse)));
  }
}

void quantize_q8k(const float* x, int64_t n, ActivationBlockQ8K* out) {
  constexpr int64_t kBlock = 256;
  for (int64_t b = 0; b < n / kBlock; ++b) {
    const float* xb = x + b * kBlock;
    __m256 running[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int i = 0; i < 256; i += 32)
      for (int k = 0; k < 4; ++k) running[k] = max_abs(_mm256_loadu_ps(xb + i + 8 * k), running[k]);
    const float amax =
        reduce_max(_mm256_max_ps(_mm256_max_ps(running[0], running[1]), _mm256_max_ps(running[2], running[3])));
    out[b].scale = amax / 127.0f;
    const __m256 inverse = _mm256_set1_ps(amax > 0.0f ? 127.0f / amax : 0.0f);
    const __m256i lowest = _mm256_set1_epi32(-127), highest = _mm256_set1_epi32(127);
    for (int j = 0; j < 16; ++j) {
      __m256i q0 = round_to_int(_mm256_loadu_ps(xb + 16 * j), inverse);
      __m256i q1 = round_to_int(_mm256_loadu_ps(xb + 16 * j + 8), inverse);
      q0 = _mm256_min_epi32(_mm256_max_epi32(q0, lowest), highest);
      q1 = _mm256_min_epi32(_mm256_max_epi32(q1, lowest), highest);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out[b].quants + 16 * j), pack_bytes(q0, q1));
      out[b].block_sums[j] = static_cast<int16_t>(reduce_add(_mm256_add_epi32(q0, q1)));
    }
  }
}

}  // namespace tandem::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
