// tanh_vector: a vectorized tanh for AVX2 kernels (soft-capping), 8 lanes, the same
// arithmetic as avx512/vector_tanh.h. Include it only from code compiled for AVX2 + FMA
// (inside the target pragma of an avx2/ kernel file), after vector_exp.h's requirements.
#pragma once

#include "kernels/avx2/vector_exp.h"
#include "kernels/simd_intrinsics.h"

namespace tandem::avx2 {

// Below this |x| the odd polynomial; from it on (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.29,
// where neither the subtraction nor the division loses more than half an ulp.
constexpr float kTanhPolynomialLimit = 0.625f;

// tanh(x) within 3 ulp over all floats (the kernel tests measure it against float64 std::tanh);
// tanh(±0) = ±0, tiny x gives x, ±inf gives ±1, NaN stays NaN.
// |x| < 0.625: x + x³·P(x²), P of degree 4 fitted here for minimax relative error on
// [0, 0.625] (4.4e-9 before float rounding, Lawson's iteration on the Taylor series).
// Otherwise (1 - e) / (1 + e), e = exp(-2|x|): 1 from |x| = 43.5 on (exp below -87 is 0).
// Both halves are computed for every lane and one chosen: no branches in the loops.
[[gnu::always_inline]] inline __m256 tanh_vector(__m256 x) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 sign = _mm256_and_ps(x, sign_bit);
  const __m256 magnitude = _mm256_andnot_ps(sign_bit, x);
  const __m256 y = _mm256_mul_ps(magnitude, magnitude);
  __m256 p = _mm256_set1_ps(-5.704754032e-3f);
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(2.063889056e-2f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-5.373965949e-2f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(1.333144158e-1f));
  p = _mm256_fmadd_ps(p, y, _mm256_set1_ps(-3.333328068e-1f));
  // |x| + |x|·(y·P): the small correction first, one rounding at the end. A subnormal |x|
  // makes y 0, so the result is x itself.
  const __m256 near_zero = _mm256_fmadd_ps(_mm256_mul_ps(y, p), magnitude, magnitude);
  const __m256 e = exp_nonpositive(_mm256_mul_ps(magnitude, _mm256_set1_ps(-2.0f)));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 away = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  // NaN compares false: it takes the exp half, which keeps it NaN.
  const __m256 use_polynomial = _mm256_cmp_ps(magnitude, _mm256_set1_ps(kTanhPolynomialLimit), _CMP_LT_OQ);
  return _mm256_or_ps(_mm256_blendv_ps(away, near_zero, use_polynomial), sign);
}

}  // namespace tandem::avx2
