// AVX-512 versions of the per-row kernels whose portable loops call libm per element
// (kernels/elementwise.h chooses them when the active level has AVX-512).
#include <immintrin.h>

#include <cstdint>

#include "kernels/elementwise.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif

#include "kernels/avx512/vector_exp.h"  // AVX-512 code: after the target pragma

namespace tandem::avx512 {
namespace {

// silu(g) * up with sigmoid(g) from exp(-|g|) (never overflows): 1 / (1 + e) for g >= 0,
// e / (1 + e) for g < 0.
inline __m512 swiglu_vector(__m512 gate, __m512 up) {
  const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(gate)));
  const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __mmask16 negative = _mm512_cmp_ps_mask(gate, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), negative, e);
  return _mm512_mul_ps(_mm512_mul_ps(gate, _mm512_div_ps(numerator, denominator)), up);
}

}  // namespace

void swiglu_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, swiglu_vector(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const auto mask = static_cast<__mmask16>((1u << (n - i)) - 1u);
    _mm512_mask_storeu_ps(out + i, mask, swiglu_vector(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
