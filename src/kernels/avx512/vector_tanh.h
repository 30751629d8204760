// tanh_vector: a vectorized tanh for AVX-512 kernels (soft-capping), 16 lanes, the same
// arithmetic as avx2/vector_tanh.h. Include it only from code compiled for AVX-512 (inside the
// target pragma of an avx512/ kernel file): the functions are inline and use AVX-512F intrinsics.
#pragma once

#include "kernels/avx512/vector_exp.h"
#include "kernels/simd_intrinsics.h"

namespace tandem::avx512 {

// Below this |x| the odd polynomial; from it on (1 - e) / (1 + e) with e = exp(-2|x|) <= 0.29,
// where neither the subtraction nor the division loses more than half an ulp.
constexpr float kTanhPolynomialLimit = 0.625f;

// tanh(x) within 3 ulp over all floats (the kernel tests measure it against float64 std::tanh);
// tanh(±0) = ±0, tiny x gives x, ±inf gives ±1, NaN stays NaN. The polynomial and the exp
// form as in avx2/vector_tanh.h (which says where the coefficients come from).
[[gnu::always_inline]] inline __m512 tanh_vector(__m512 x) {
  const __m512i sign_bit = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), sign_bit);
  const __m512 magnitude = _mm512_abs_ps(x);
  const __m512 y = _mm512_mul_ps(magnitude, magnitude);
  __m512 p = _mm512_set1_ps(-5.704754032e-3f);
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(2.063889056e-2f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(-5.373965949e-2f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(1.333144158e-1f));
  p = _mm512_fmadd_ps(p, y, _mm512_set1_ps(-3.333328068e-1f));
  const __m512 near_zero = _mm512_fmadd_ps(_mm512_mul_ps(y, p), magnitude, magnitude);
  const __m512 e = exp_nonpositive(_mm512_mul_ps(magnitude, _mm512_set1_ps(-2.0f)));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 away = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
  // NaN compares false: it takes the exp half, which keeps it NaN.
  const __mmask16 use_polynomial = _mm512_cmp_ps_mask(magnitude, _mm512_set1_ps(kTanhPolynomialLimit), _CMP_LT_OQ);
  const __m512 chosen = _mm512_mask_mov_ps(away, use_polynomial, near_zero);
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(chosen), sign));
}

}  // namespace tandem::avx512
