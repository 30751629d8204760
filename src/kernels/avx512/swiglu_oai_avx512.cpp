// AVX-512 version of gpt-oss's expert activation (kernels/swiglu_oai.h; kernel_table(Isa::Avx512)
// and the AMX level point at it), 16 lanes at a time with masked tails (nothing read or written
// past a row). The same arithmetic as the AVX2 one (kernels/avx2/swiglu_oai_avx2.cpp, which
// says why).
#include "kernels/simd_intrinsics.h"

#include <cstdint>

#include "kernels/avx512/avx512_kernels.h"
#include "kernels/swiglu_oai.h"

// Everything below is compiled for the ISA; it only runs after the runtime check.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")
#endif

#include "kernels/avx512/first_lanes.h"
#include "kernels/avx512/vector_exp.h"  // AVX-512 code: after the target pragma

namespace tandem::avx512 {
namespace {

inline __m512 swiglu_oai_vector(__m512 gate, __m512 up) {
  const __m512 limit = _mm512_set1_ps(kSwigluOaiLimit);
  // NaN inputs stay NaN: min/max return the second operand, the input, when either is NaN.
  const __m512 g = _mm512_min_ps(limit, gate);
  const __m512 u = _mm512_min_ps(limit, _mm512_max_ps(_mm512_set1_ps(-kSwigluOaiLimit), up));
  const __m512 z = _mm512_mul_ps(_mm512_set1_ps(kSwigluOaiAlpha), g);
  const __m512 e = exp_nonpositive(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_abs_ps(z)));
  const __m512 denominator = _mm512_add_ps(_mm512_set1_ps(1.0f), e);
  const __mmask16 negative = _mm512_cmp_ps_mask(z, _mm512_setzero_ps(), _CMP_LT_OQ);
  const __m512 numerator = _mm512_mask_mul_ps(g, negative, g, e);
  return _mm512_mul_ps(_mm512_div_ps(numerator, denominator), _mm512_add_ps(u, _mm512_set1_ps(1.0f)));
}

}  // namespace

void swiglu_oai_row(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, swiglu_oai_vector(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  if (i < n) {
    const __mmask16 mask = first_lanes(n - i);
    _mm512_mask_storeu_ps(
        out + i, mask, swiglu_oai_vector(_mm512_maskz_loadu_ps(mask, gate + i), _mm512_maskz_loadu_ps(mask, up + i)));
  }
}

}  // namespace tandem::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
