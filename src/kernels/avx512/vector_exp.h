// exp_nonpositive: a vectorized exp for AVX-512 kernels (attention's softmax, SwiGLU's
// sigmoid). Include it only from code compiled for AVX-512 (inside the target pragma of an
// avx512/ kernel file): the functions are inline and use AVX-512 intrinsics.
#pragma once

#include "kernels/simd_intrinsics.h"

namespace tandem::avx512 {

// exp(x) for x <= 0, within about 1 ulp; 0 below kExpLowest (and for -inf). Cody-Waite
// reduction x = n·ln2 + r, |r| <= ln2/2, Cephes' expf polynomial for e^r, then scalef for 2^n.
// Results are kept normal: a subnormal or underflowing result costs a microcode assist of
// about a hundred cycles (the first tile's correction exp(-inf) and masked positions would hit
// one every time), and a softmax weight below 2^-125 of the largest is lost in the sum anyway.
constexpr float kExpLowest = -87.0f;  // exp(-87) = 1.6e-38, just above the smallest normal float

[[gnu::always_inline]] inline __m512 exp_nonpositive(__m512 x) {
  // NaN compares "not less" and max(lowest, NaN) is NaN, so a NaN score still shows in the output.
  const __mmask16 representable = _mm512_cmp_ps_mask(x, _mm512_set1_ps(kExpLowest), _CMP_NLT_UQ);
  x = _mm512_max_ps(_mm512_set1_ps(kExpLowest), x);
  const __m512 n =
      _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT);
  // ln2 split in two floats: n times the first is exact inside the FMA.
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693147182464599609375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-1.904654323148236e-09f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  // e^r = 1 + (r + r²·p): the small part first, so the final rounding is the only big one.
  const __m512 small = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r);
  return _mm512_maskz_mov_ps(representable, _mm512_scalef_ps(_mm512_add_ps(small, _mm512_set1_ps(1.0f)), n));
}

}  // namespace tandem::avx512
