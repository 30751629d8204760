// exp_nonpositive: a vectorized exp for AVX2 kernels (attention's softmax, SwiGLU's sigmoid),
// 8 lanes, the same arithmetic as avx512/vector_exp.h. Include it only from code compiled for
// AVX2 + FMA (inside the target pragma of an avx2/ kernel file): the functions are inline and
// use AVX2 and FMA intrinsics.
#pragma once

#include "kernels/simd_intrinsics.h"

namespace tandem::avx2 {

// exp(x) for x <= 0, within about 1 ulp; 0 below kExpLowest (and for -inf); NaN stays NaN.
// Cody-Waite reduction x = n·ln2 + r, |r| <= ln2/2, Cephes' expf polynomial for e^r, then 2^n
// by adding n to the exponent field (AVX2 has no scalef). Results are kept normal, as on
// AVX-512: at x >= kExpLowest, n >= -126 and e^r·2^n >= 2^-126, so the exponent add never
// leaves the normal range, and a subnormal result's microcode assist never happens.
constexpr float kExpLowest = -87.0f;  // exp(-87) = 1.6e-38, just above the smallest normal float

[[gnu::always_inline]] inline __m256 exp_nonpositive(__m256 x) {
  // NaN compares "not less" and max(lowest, NaN) is NaN, so a NaN score still shows in the output.
  const __m256 representable = _mm256_cmp_ps(x, _mm256_set1_ps(kExpLowest), _CMP_NLT_UQ);
  x = _mm256_max_ps(_mm256_set1_ps(kExpLowest), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // ln2 split in two floats: n times the first is exact inside the FMA.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693147182464599609375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-1.904654323148236e-09f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  // e^r = 1 + (r + r²·p): the small part first, so the final rounding is the only big one.
  const __m256 small = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  const __m256 mantissa = _mm256_add_ps(small, _mm256_set1_ps(1.0f));  // e^r in [0.7, 1.42]
  // 2^n: n (-126..0) added to the exponent field; exact while the result stays normal. A NaN
  // n converts to INT_MIN, whose shifted bits are 0, so NaN passes through unchanged.
  const __m256i exponent = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  const __m256 scaled = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(mantissa), exponent));
  return _mm256_and_ps(representable, scaled);
}

}  // namespace tandem::avx2
